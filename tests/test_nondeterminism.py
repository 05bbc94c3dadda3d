"""nondeterminism: `--baseline` compares two runs step by step and reports where they first diverge."""

from __future__ import annotations

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def _log(values: list[float]) -> str:
    return "".join(f"step {i} loss {v:.6f} lr 1e-4\n" for i, v in enumerate(values, 1))


def _pair(tmp_path, a: list[float], b: list[float]):
    ra = ingest(write_run(tmp_path, {"train.log": _log(a)}, "a"))
    rb = ingest(write_run(tmp_path, {"train.log": _log(b)}, "b"))
    ctx = Context(ra)
    ctx.baseline = Context(rb)
    return analyze(ctx, None)


def test_first_divergent_step_with_the_real_line_quoted(tmp_path):
    base = [2.5 - 0.01 * i for i in range(30)]
    other = base[:11] + [v + 0.00001 * (i + 1) for i, v in enumerate(base[11:])]
    a = _pair(tmp_path, other, base)
    f = next(f for f in a.findings if f.id == "nondeterminism")
    assert f.onset.step == 12 and f.onset.line == 12
    assert f.evidence[0].text == "step 12 loss 2.390010 lr 1e-4"
    assert f.facts["differing_steps"] == 19 and f.facts["common_steps"] == 30
    # A tiny first difference points at kernels, not data order.
    assert f.causes[0].cause.id == "nondeterministic_kernels"


def test_different_data_from_the_start(tmp_path):
    base = [2.5 - 0.01 * i for i in range(30)]
    other = [v * 1.2 for v in base]
    f = next(f for f in _pair(tmp_path, other, base).findings if f.id == "nondeterminism")
    assert f.onset.step == 1 and f.causes[0].cause.id == "unseeded_data_order"


def test_identical_runs_are_quiet_and_no_baseline_skips(tmp_path):
    base = [2.5 - 0.01 * i for i in range(30)]
    assert "nondeterminism" not in {f.id for f in _pair(tmp_path, base, base).findings}
    solo = analyze(Context(ingest(write_run(tmp_path, {"train.log": _log(base)}, "solo"))))
    assert "second run" in solo.skipped["nondeterminism"]

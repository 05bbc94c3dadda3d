"""Budgets on rows one file repeats without end (parsers/repeats.py): events of one code past the budget are counted,
metric runs of one step past it are reduced; the answers of the detectors stay those of the whole input, the file
is marked `partial`, and memory stays flat as the repeats grow (peak RSS measured in a subprocess)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from forensics.parsers import lines as lines_mod
from forensics.parsers.repeats import StepRepeatBudget
from forensics.playbooks import timeseries as ts

from forensics.contracts.context import Context, event_count
from forensics.engine import analyze
from forensics.ingest import ingest
from forensics.reports import jsonout
from tests.helpers import frame, write_run

# The old-style PyTorch message, as printed by torch < 2.1 (reference/formats.md 2.1).
OOM = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
       "14.21 GiB already allocated)")
FLUSH = ("[2023-03-20 20:38:19,874] [WARNING] [stage3.py:1939:step] 13 pytorch allocator cache flushes since last step. "
         "this happens when there is high memory pressure and is detrimental to performance. if this is happening "
         "frequently consider adjusting settings to reduce memory consumption. If you are unable to make the cache "
         "flushes go away consider adding torch.cuda.empty_cache() calls in your training loop to ensure that all "
         "ranks flush their caches at the same time")
METRIC = "step {step} | loss {loss} | lr 1.0e-04 | grad_norm 0.97"
MB = 1024 * 1024


def _analysis(root: Path) -> tuple[dict, Context]:
    ctx = Context(ingest(root))
    return json.loads(jsonout.render(analyze(ctx))), ctx


def _without_rows(doc: dict) -> dict:
    """The report less what says how many rows were kept (the files' rows and the tables' sizes)."""
    return {**doc, "files": None, "run": {**doc["run"], "tables": None}}


def test_events_past_the_budget_are_counted_and_the_findings_are_those_of_every_event(tmp_path, monkeypatch):
    # OOMs with allocator flushes between them, then a step line: more of each than the budget.
    body = [METRIC.format(step=1, loss=2.5)]
    for i in range(120):
        body += [FLUSH, OOM] if i % 3 == 0 else [OOM]
    root = write_run(tmp_path, {"rank0.log": "\n".join(body) + "\n"})
    whole, _ = _analysis(root)
    # Above the eight quoted rows of a finding: those are the first occurrences, always kept.
    monkeypatch.setenv("FORENSICS_MAX_EVENTS_PER_CODE", "10")
    cut, ctx = _analysis(root)
    assert _without_rows(cut) == _without_rows(whole)
    oom = next(f for f in cut["findings"] if f["playbook"] == "cuda-oom")
    assert oom["evidence_count"] == 120 and "(120 OOM errors" in oom["summary"]
    ev = ctx.events_of("cuda_oom")
    # The first ten in full, and the last one standing for the 110 after them.
    assert ev.height == 11 and event_count(ev) == 120
    assert ev.get_column("line").to_list()[-1] == len(body)
    assert ev.get_column("repeats").to_list() == [None] * 10 + [110]
    row = cut["files"][0]
    assert row["status"] == "partial"
    assert "FORENSICS_MAX_EVENTS_PER_CODE" in row["error"] and "cuda_oom 110" in row["error"]
    assert "allocator_cache_flush 30" in row["error"]


def test_the_event_budget_holds_across_chunks_and_keeps_the_last_event(tmp_path, monkeypatch):
    monkeypatch.setattr(lines_mod, "CHUNK_BYTES", 4096)  # many frames: the count goes on from one to the next
    monkeypatch.setenv("FORENSICS_MAX_EVENTS_PER_CODE", "5")
    body = [OOM] * 200 + ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
                          "ValueError: bad value"]
    run = ingest(write_run(tmp_path, {"train.log": "\n".join(body) + "\n"}))
    ev = frame(run, "events")
    oom = ev.filter(pl.col("code") == "cuda_oom").sort("line")
    assert oom.get_column("line").to_list() == [1, 2, 3, 4, 5, 200]
    assert event_count(oom) == 200
    # The error after the last OOM is kept: it is what tells a crash from an OOM the program survived.
    assert ev.filter(pl.col("line") > 200).height >= 1


def test_a_log_within_the_budgets_is_kept_whole_and_not_marked(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_MAX_EVENTS_PER_CODE", "3")
    monkeypatch.setenv("FORENSICS_MAX_STEP_REPEATS", "3")
    body = [OOM] * 3 + [METRIC.format(step=s, loss=2.5) for s in (1, 1, 1, 2, 2, 2)]
    run = ingest(write_run(tmp_path, {"train.log": "\n".join(body) + "\n"}))
    row = frame(run, "files").row(0, named=True)
    assert row["status"] == "parsed" and row["error"] is None
    assert frame(run, "events").get_column("repeats").null_count() == 3
    assert frame(run, "metrics").filter(pl.col("name") == "loss").height == 6


def _metric_rows(steps: list[int | None], values: list[float], rank: int | None = 0, name: str = "loss") -> pl.DataFrame:
    return pl.DataFrame({
        "line": list(range(1, len(steps) + 1)), "rank": [rank] * len(steps), "step": steps, "name": [name] * len(steps),
        "value": values,
    }, schema={"line": pl.Int64, "rank": pl.Int32, "step": pl.Int64, "name": pl.String, "value": pl.Float64})


def _reduced(df: pl.DataFrame, limit: int, batches: int) -> pl.DataFrame:
    budget = StepRepeatBudget()
    budget.limit = limit
    size = math.ceil(df.height / batches)
    return pl.concat([budget.keep(df.slice(at, size)) for at in range(0, df.height, size)])


@pytest.mark.parametrize("batches", [1, 3, 7])
def test_a_run_of_one_step_keeps_every_value_a_detector_decides_on(batches):
    # Step 5 repeated 60 times (its smallest and largest values and non-finite ones in the middle), then steps 6, 4
    # (a restart), and step 4 again 40 times ending on a NaN.
    vals5 = [2.0 + (i % 7) / 10 for i in range(60)]
    vals5[31], vals5[37], vals5[40], vals5[44] = -3.0, 9.0, float("nan"), float("inf")
    steps = [5] * 60 + [6, 4] + [4] * 40
    values = vals5 + [2.1, 2.2] + [1.0 + i / 100 for i in range(39)] + [float("nan")]
    df = _metric_rows(steps, values)
    kept = _reduced(df, 10, batches)
    lines = set(kept.get_column("line").to_list())
    assert set(range(1, 11)) <= lines  # the first rows of a run, up to the budget
    assert {32, 38, 41, 45, 60, 61, 62, 102, 101} <= lines  # min, max, NaN, inf, last; the step changes; last finite
    assert kept.height < 45
    whole = df.with_columns(pl.lit("f").alias("file"))
    cut = kept.with_columns(pl.lit("f").alias("file"))
    # What the detectors read: the clean series (last row per step, finite or not), its extremes, the restarts.
    for finite in (False, True):
        assert ts.series(cut, "loss", finite=finite).equals(ts.series(whole, "loss", finite=finite))
    assert ts.restarts(cut).equals(ts.restarts(whole))
    finite = kept.filter(pl.col("value").is_finite()).get_column("value")
    assert (finite.min(), finite.max()) == (-3.0, 9.0)


def test_runs_are_counted_per_rank_and_metric_and_a_changing_step_is_never_reduced():
    budget = StepRepeatBudget()
    budget.limit = 4
    # Two ranks interleaved, each at its own steps: no run of one (rank, metric) is longer than the budget.
    n = 50
    df = pl.concat([_metric_rows(list(range(n)), [1.0] * n, rank=0), _metric_rows(list(range(n)), [1.0] * n, rank=1)])
    df = df.sort("step", "rank").with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("line"))
    assert budget.keep(df).height == df.height and budget.dropped == 0
    # One rank stuck at a step while the other goes on: only the stuck one is reduced.
    stuck = pl.concat([_metric_rows([7] * 30, [1.0] * 30, rank=0), _metric_rows(list(range(30)), [1.0] * 30, rank=1)])
    kept = budget.keep(stuck.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("line")))
    assert kept.filter(pl.col("rank") == 1).height == 30
    assert kept.filter(pl.col("rank") == 0).height < 30


# Runs the CLI in a child whose reads are 1 MiB chunks (a frame's transient memory is ~30x its chunk, a constant
# that would hide what grows), from a parent that prints (exit code, the child's peak RSS in bytes, its output).
_CLI = "import sys; from forensics.parsers import lines; lines.CHUNK_BYTES = 1 << 20; from forensics.cli import main; main()"
_MEASURE = """
import json, resource, subprocess, sys
proc = subprocess.run([sys.executable, "-c", sys.argv[1], *sys.argv[2:]], capture_output=True, text=True, errors="replace")
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"rc": proc.returncode, "rss": peak, "out": proc.stdout, "err": proc.stderr}))
"""


def _measured(root: Path, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", _MEASURE, _CLI, "analyze", str(root), "--no-cache", "--format", "json"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "FORENSICS_WORKERS": "1", **env})
    got = json.loads(proc.stdout)
    assert got["rc"] == 0 and "Traceback" not in got["err"], got["err"][-2000:]
    return got


def _repeated(tmp_path: Path, name: str, line: str, size: int) -> Path:
    root = tmp_path / name
    root.mkdir()
    data = (line + "\n").encode()
    (root / "train.log").write_bytes(data * (size // len(data)))
    return root


@pytest.mark.parametrize(("line", "env"), [
    (OOM, {"FORENSICS_MAX_EVENTS_PER_CODE": "100"}),
    (METRIC.format(step=100, loss=2.345), {"FORENSICS_MAX_STEP_REPEATS": "1000"}),
], ids=["errors", "metrics"])
def test_memory_stays_flat_as_one_line_repeats(tmp_path, line, env):
    base = _measured(_repeated(tmp_path, "small", line, 2 * MB), env)
    big = _measured(_repeated(tmp_path, "big", line, 16 * MB), env)
    # Eight times the lines, about the same peak: what grows is counted, not kept. (Kept, the 16 MB of errors are
    # 130,000 event rows with three strings each, 300 MB more at the peak; the metric line gives 900,000 rows.)
    assert big["rss"] < base["rss"] + 64 * MB, (base["rss"] / MB, big["rss"] / MB)
    row = json.loads(big["out"])["files"][0]
    assert row["status"] == "partial" and "budget" in row["error"]
    if line == OOM:
        oom = next(f for f in json.loads(big["out"])["findings"] if f["playbook"] == "cuda-oom")
        assert oom["evidence_count"] == 16 * MB // (len(OOM) + 1)


def test_thousands_of_caught_ooms_among_progress_lines_are_judged_without_pairing_every_row(tmp_path):
    # 4,000 OOMs, each followed by progress at a later step (caught, the run went on), among 100,000 progress lines:
    # pairing each OOM with every progress line of its file would be 400M rows.
    body = []
    for step in range(100_000):
        body.append(METRIC.format(step=step, loss=2.5))
        if step % 25 == 0:
            body.append(OOM)
    root = write_run(tmp_path, {"rank0.log": "\n".join(body) + "\n"})
    base = _measured(_repeated(tmp_path, "small", OOM, MB), {})
    got = _measured(root, {})
    assert got["rss"] < base["rss"] + 200 * MB, (base["rss"] / MB, got["rss"] / MB)
    oom = next(f for f in json.loads(got["out"])["findings"] if f["playbook"] == "cuda-oom")
    assert oom["severity"] == "info" and "caught it and went on" in oom["summary"]
    assert oom["evidence_count"] == 4000
    # The same OOMs with the progress stopping at the last one's step: not caught.
    stuck = write_run(tmp_path, {"rank0.log": "\n".join([*body[:-1], METRIC.format(step=99_975, loss=2.5), OOM]) + "\n"}, "stuck")
    oom = next(f for f in json.loads(_measured(stuck, {})["out"])["findings"] if f["playbook"] == "cuda-oom")
    assert oom["severity"] == "critical" and "caught" not in oom["summary"]

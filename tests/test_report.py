"""`forensics report`: the postmortem page of real sample runs (verdict, impact, timeline, plots, GPU, traces),
self-containment, escaping of hostile input in HTML and Markdown, determinism, and the command itself."""

from __future__ import annotations

import re
from functools import cache

import polars as pl
import pytest
from click.testing import CliRunner

from forensics.cli import main
from forensics.contracts.context import Context
from forensics.contracts.model import Evidence
from forensics.engine import analyze
from forensics.ingest import ingest
from forensics.reports.postmortem import html, markdown
from forensics.reports.postmortem.build import Postmortem, build
from forensics.reports.postmortem.checkpoints import find_saves
from forensics.reports.postmortem.series import WIDTH, decimate
from tests.conftest import SAMPLES
from tests.helpers import write_run

OOM_LINE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
            "4.00 GiB of which 2.35 GiB is free. Of the allocated memory 825.15 MiB is allocated by PyTorch, and 24.85 MiB "
            "is reserved by PyTorch but unallocated.")


@cache
def page(sample: str) -> tuple[Postmortem, str]:
    """The postmortem and its HTML for one sample folder, analysed once per test session."""
    pm = build(analyze(Context(ingest(SAMPLES / sample))))
    return pm, html.render(pm)


def facts(pm: Postmortem) -> dict[str, str]:
    return {f.label: f.value for f in pm.impact}


def outside_pre(text: str) -> str:
    """The page less the quoted log text (<pre> blocks), where a URL printed by a program may stand."""
    return re.sub(r"<pre>.*?</pre>", "", text, flags=re.S)


def test_cuda_oom_verdict_names_the_root_playbook_rank_and_step():
    pm, _ = page("cuda-oom/oom-then-timeouts")
    assert pm.verdict.startswith("Rank 3 failed first: GPU out of memory (cuda-oom) at step 120")
    assert "rank3.log:52" in pm.verdict and "It explains nccl-timeout on ranks 0-2" in pm.verdict
    assert "demand" not in pm.verdict and "needs more memory than the GPU has" in pm.verdict  # the top cause, by title


def test_cuda_oom_impact_comes_from_the_logs():
    pm, _ = page("cuda-oom/oom-then-timeouts")
    f = facts(pm)
    # The OOM line has no stamp: its time is rank 3's last stamped line (step 120 at 02:11:05).
    assert f["First failure"] == "~2026-11-22 02:11:05 UTC"
    assert f["Last healthy step"] == "120" and f["Steps lost"] == "120"
    assert f["Last checkpoint before it"] == "none found"
    # Ranks 0-2 waited for the NCCL watchdog: 600 s after the failure.
    assert f["Waiting in timeouts"] == "10 min 00 s"
    assert f["GPU-hours lost"] == "0.73"  # 4 ranks x 10 min 59 s


def test_impact_counts_from_the_last_checkpoint_that_completed(tmp_path):
    lines = [f"step {i} loss {3 - i / 100:.3f}" for i in range(1, 121)]
    lines.insert(50, "Saving model checkpoint to out/checkpoint-50")
    lines.insert(101, "saving checkpoint to out")  # after step 100, and it fails:
    lines.insert(102, "OSError: [Errno 28] No space left on device: 'out/ckpt.pt'")
    run = write_run(tmp_path, {"train.log": "\n".join([*lines, OOM_LINE]) + "\n"}, "ckpt")
    pm = build(analyze(Context(ingest(run))))
    f = facts(pm)
    # The failed save is the first failure; the save of step 50 is the one to resume from.
    assert "(checkpoint-failure) at step 100" in pm.verdict
    assert f["Last healthy step"] == "100"
    assert f["Last checkpoint before it"] == "step 50"
    assert f["Steps lost"] == "50"


def test_checkpoint_saves_are_found_in_compressed_logs_and_loads_are_not_saves(tmp_path):
    import gzip

    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log.gz").write_bytes(gzip.compress(
        b"step 1\nLoading checkpoint shards: 100%\n[INFO] Saved checkpoint ckpt_7.pt\nresuming from checkpoint ckpt_7.pt\n"))
    saves = find_saves(Context(ingest(run)).table("events"))
    assert [(s.file, s.line, s.step) for s in saves] == [("train.log.gz", 3, 7)]


def test_timeline_marks_the_first_failing_rank():
    pm, text = page("cuda-oom/oom-then-timeouts")
    marked = [ln.name for ln in pm.lanes if ln.first_failure]
    assert marked == ["rank 3"]
    rank3 = next(ln for ln in pm.lanes if ln.rank == 3)
    assert rank3.point("first_failure").line == 52
    # Rank 0's first error comes 10 minutes after rank 3's: the lanes are in wall time.
    assert pm.timeline_by_time
    assert rank3.point("first_error").ts < next(ln for ln in pm.lanes if ln.rank == 0).point("first_error").ts
    assert 'id="timeline-first-failure-rank-3"' in text
    assert "rank 3 <strong>(first failure)</strong>" in text


def test_plots_are_inline_svg_with_finding_onsets():
    _, text = page("cuda-oom/oom-then-timeouts")
    assert text.count("<svg") >= 3
    assert 'id="plot-loss"' in text and 'id="loss-onset-cuda-oom"' in text and 'id="loss-onset-nccl-timeout"' in text
    assert "<img" not in text


def test_nan_points_are_drawn_as_markers():
    pm, text = page("nan-loss/nan-feature")
    loss = next(fig for fig in pm.metric_figures if fig.key == "loss")
    assert 'id="loss-nonfinite-loss"' in loss.svg and "NaN/Inf at" in loss.caption
    assert 'id="loss-onset-nan-loss"' in text
    assert facts(pm)["Last healthy step"] == "136"


def test_gpu_telemetry_with_throttle_intervals():
    pm, text = page("gpu-throttling/thermal-h100")
    keys = [fig.key for fig in pm.gpu_figures]
    assert keys == ["gpu_utilization_gpu_pct", "gpu_memory_used_mib", "gpu_temperature_c", "gpu_sm_clock_mhz", "gpu_power_w"]
    clock = pm.gpu_figures[3]
    assert 'id="gpu-sm-clock-mhz-span"' in clock.svg and "throttle interval(s) shaded" in clock.caption
    assert ">GPU 2<" in clock.svg and 'id="gpu"' in text
    assert "GPU model" not in text or "H100" in text


def test_trace_summary_of_a_profiled_run():
    pm, text = page("host-device-sync/h100")
    assert pm.trace is not None and 'id="trace"' in text
    (t,) = pm.trace.traces
    assert t["steps"] >= 3 and t["syncs_per_step"] >= 50  # about 80 host-device syncs per step in this recording
    assert 0 < t["gpu_busy"] < 1
    assert pm.trace.kernels and pm.trace.kernels[0]["ms"] >= pm.trace.kernels[-1]["ms"]


def test_healthy_run_says_what_was_checked():
    pm, text = page("healthy/hf-trainer")
    assert pm.verdict.startswith("No problem found:") and pm.healthy
    assert facts(pm)["First failure"] == "none"
    assert pm.skipped and all(why for _, why in pm.skipped)
    assert "needs a second run (--baseline)" in text  # nondeterminism is listed, not silently passed


@pytest.mark.parametrize("sample", ["cuda-oom/oom-then-timeouts", "nan-loss/nan-feature", "gpu-throttling/thermal-h100", "host-device-sync/h100", "healthy/hf-trainer"])
def test_page_is_self_contained(sample):
    _, text = page(sample)
    lower = text.lower()
    assert "<script" not in lower and "<link" not in lower and "<iframe" not in lower
    assert "src=" not in lower and "@import" not in lower
    assert not re.search(r"url\((?!#)", lower)  # SVG clip paths point inside the page only
    assert not re.search(r"href=\"(?!#)", lower)
    assert "http://" not in outside_pre(text) and "https://" not in outside_pre(text)


HOSTILE_LINES = [
    "RuntimeError: <script>alert('pwned')</script> & <img src=x onerror=alert(1)>",
    "```",
    "| a | b | # [link](http://evil.example) **bold** \x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x07osc\x1b]8;;\x07",
]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Postmortem:
    root = tmp_path_factory.mktemp("hostile")
    oom = OOM_LINE + " " + HOSTILE_LINES[0]
    log = "step 1 loss 2.0\nstep 2 loss 1.9\nTraceback (most recent call last):\n" + \
        '  File "<script>x.py", line 1, in <module>\n' + "\n".join(HOSTILE_LINES) + "\n" + oom + "\n"
    run = write_run(root, {"train.log": log, "<script>alert(2)</script>.bin": b"\x00\x01binary"}, "run")
    a = analyze(Context(ingest(run)))
    # No playbook quotes a whole traceback today; quote the parsed block (with its bare ``` line) as one would.
    block = a.context.table("events").filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert "\n```\n" in block["text"]
    a.findings[0].evidence.append(Evidence(block["file"], block["line"], block["text"]))
    return build(a)


def test_hostile_text_is_escaped_in_html(hostile):
    text = html.render(hostile)
    quoted = [e.text for f in hostile.findings for e in f.evidence]
    assert any("<script>alert('pwned')</script>" in q for q in quoted)  # the evidence does hold it ...
    assert "<script" not in text.lower() and "<img" not in text.lower()  # ... the page never as markup
    assert "&lt;script&gt;alert(" in text and "&lt;script&gt;alert(2)&lt;/script&gt;.bin" in text
    assert "\x1b" not in text and "\x07" not in text


def test_hostile_text_is_escaped_in_markdown(hostile, tmp_path):
    out = tmp_path / "postmortem.md"
    markdown.write(hostile, out)
    text = out.read_text()
    assert "\x1b" not in text and "\x07" not in text
    outside, inside, fence = [], [], None
    for line in text.splitlines():
        if fence is None:
            m = re.match(r"^(`{3,})\w*$", line)
            if m:
                fence = m.group(1)
                continue
            outside.append(line)
        elif re.fullmatch(rf"`{{{len(fence)},}}", line):
            fence = None
        else:
            inside.append(line)
    assert fence is None  # every block closed
    assert "```" in inside  # the log's bare fence line stayed inside the quote
    assert not any("<script" in ln.lower() or "<img" in ln.lower() for ln in outside)
    assert any("&lt;script&gt;alert(2)&lt;/script&gt;.bin" in ln for ln in outside)


def test_markdown_writes_its_plot_folder(tmp_path):
    pm, _ = page("cuda-oom/oom-then-timeouts")
    written = markdown.write(pm, tmp_path / "postmortem.md")
    folder = tmp_path / "postmortem_files"
    assert {p.name for p in folder.iterdir()} >= {"timeline.svg", "loss.svg"}
    text = (tmp_path / "postmortem.md").read_text()
    for ref in re.findall(r"\]\((postmortem_files/[^)]+)\)", text):
        assert (tmp_path / ref).is_file()
    assert len(written) == 1 + len(list(folder.iterdir()))
    assert "## Verdict" in text and "rank3.log:52" in text


def test_same_input_gives_the_same_bytes(tmp_path):
    _, first = page("cuda-oom/oom-then-timeouts")
    again = html.render(build(analyze(Context(ingest(SAMPLES / "cuda-oom/oom-then-timeouts")))))
    assert again == first


def test_decimation_keeps_spikes_and_bounds_the_points():
    n = 200_000
    df = pl.DataFrame({"g": [0] * n, "x": [float(i) for i in range(n)], "y": [1.0] * n})
    df = df.with_columns(pl.when(pl.col("x") == 123_457).then(1e6).when(pl.col("x") == 9).then(-5.0).otherwise(pl.col("y")).alias("y"))
    d = decimate(df, ["g"])
    assert d.height <= 2 * WIDTH
    assert d.get_column("y").max() == 1e6 and d.get_column("y").min() == -5.0
    assert d.get_column("x").is_sorted()
    short = df.head(50)
    assert decimate(short, ["g"]).height == 50


def test_report_command_writes_html_and_markdown(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_CACHE_DIR", str(tmp_path / "cache"))
    run = write_run(tmp_path, {"train.log": "step 1 loss 2.0\nstep 2 loss 1.9\n" + OOM_LINE + "\n"}, "oom")
    runner = CliRunner()
    out = tmp_path / "pm.html"
    res = runner.invoke(main, ["report", str(run), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text().startswith("<!DOCTYPE html>") and "cuda-oom" in out.read_text()
    res = runner.invoke(main, ["report", str(run), "--format", "markdown", "-o", str(tmp_path / "pm.md")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "pm_files" / "loss.svg").is_file()
    assert runner.invoke(main, ["report", str(run), "--select", "nope"]).exit_code == 2


def test_report_with_a_baseline_runs_nondeterminism(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_CACHE_DIR", str(tmp_path / "cache"))
    run = write_run(tmp_path, {"train.log": "".join(f"step {i} loss {2 - i / 100:.3f}\n" for i in range(30))}, "a")
    out = tmp_path / "pm.html"
    res = CliRunner().invoke(main, ["report", str(run), "--baseline", str(run), "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "compared with" in text and "needs a second run" not in text


def test_page_size_stays_small_for_a_long_run(tmp_path):
    n = 60_000
    log = "".join(f"step {i} loss {2 + (i % 97) / 100:.3f} lr 1e-4 grad_norm {1 + (i % 13) / 10:.2f}\n" for i in range(1, n))
    pm = build(analyze(Context(ingest(write_run(tmp_path, {"train.log": log}, "long")))))
    text = html.render(pm)
    loss = next(fig for fig in pm.metric_figures if fig.key == "loss")
    assert f"{n - 1} points" in loss.caption and "drawn (min and max per pixel column)" in loss.caption
    assert len(text) < 400_000, len(text)



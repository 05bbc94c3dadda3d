"""Budgets on hostile sizes: a line without end, a bomb without newlines, a huge JSON document; each is read
up to its budget, marked `partial` with the reason, in bounded memory (peak RSS measured in a subprocess)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.10 GiB of which 1.06 GiB is free.")
MB = 1024 * 1024
# Runs the CLI as a child and prints (exit code, the child's peak RSS in bytes, its stdout) as JSON.
_MEASURE = """
import json, resource, subprocess, sys
proc = subprocess.run([sys.executable, "-m", "forensics", *sys.argv[1:]], capture_output=True, text=True, errors="replace")
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"rc": proc.returncode, "rss": peak, "out": proc.stdout, "err": proc.stderr}))
"""


def _measured(*args: str, env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FORENSICS_WORKERS": "1", **(env or {})})
    return json.loads(proc.stdout)


def _baseline_rss(tmp_path: Path) -> int:
    small = tmp_path / "small"
    small.mkdir()
    (small / "rank0.log").write_text(OOM + "\n", encoding="utf-8")
    return _measured("analyze", str(small), "--no-cache", "--format", "json")["rss"]


def _row(doc: dict, prefix: str) -> dict:
    return next(f for f in doc["files"] if f["file"].startswith(prefix))


def test_a_line_over_the_budget_is_cut_and_the_log_goes_on_in_bounded_memory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with open(run / "rank0.log", "wb") as fh:
        fh.write(b"step 1 loss 2.0\n")
        for _ in range(120):  # one 120 MB line
            fh.write(b"x" * MB)
        fh.write(b"\n" + OOM.encode() + b"\n")
    before = (run / "rank0.log").stat()
    base = _baseline_rss(tmp_path)
    got = _measured("analyze", str(run), "--no-cache", "--format", "json", env={"FORENSICS_MAX_LINE_MB": "1"})
    assert got["rc"] == 0 and "Traceback" not in got["err"], got["err"][-2000:]
    doc = json.loads(got["out"])
    row = _row(doc, "rank0")
    assert row["status"] == "partial" and "per-line budget" in row["error"]
    # The OOM after the cut line is still found, with its own line number.
    oom = next(f for f in doc["findings"] if f["playbook"] == "cuda-oom")
    assert any(e["line"] == 3 for e in oom["evidence"])
    assert got["rss"] < base + 150 * MB, (got["rss"] / MB, base / MB)
    assert (run / "rank0.log").stat().st_mtime_ns == before.st_mtime_ns


def test_a_log_without_any_newline_is_cut_at_the_budget(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with open(run / "rank0.log", "wb") as fh:
        fh.write(OOM.encode() + b" ")
        for _ in range(40):
            fh.write(b"y" * MB)
    got = _measured("ingest", str(run), "-q", "-o", str(tmp_path / "tables"), env={"FORENSICS_MAX_LINE_MB": "2"})
    assert got["rc"] == 0 and "Traceback" not in got["err"], got["err"][-2000:]
    import pyarrow.parquet as pq

    files = pq.read_table(tmp_path / "tables" / "files.parquet").to_pylist()
    assert files[0]["status"] == "partial" and "per-line budget" in files[0]["error"]


def test_a_short_line_log_is_not_marked(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0.log").write_text("step 1 loss 2.0\n" + OOM + "\n", encoding="utf-8")
    got = _measured("analyze", str(run), "--no-cache", "--format", "json", env={"FORENSICS_MAX_LINE_MB": "1"})
    row = _row(json.loads(got["out"]), "rank0")
    assert row["status"] == "parsed" and not row["error"]


def test_a_gzip_bomb_without_newlines_stays_in_bounded_memory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    comp = gzip.compress(b"z" * (200 * MB), 9)  # ~200 KB compressed
    (run / "rank0.log.gz").write_bytes(gzip.compress(OOM.encode() + b"\n", 9) + comp)
    base = _baseline_rss(tmp_path)
    got = _measured("analyze", str(run), "--no-cache", "--format", "json",
                    env={"FORENSICS_MAX_LINE_MB": "4", "FORENSICS_DECOMPRESS_FLOOR_MB": "16"})
    assert got["rc"] == 0, got["err"][-2000:]
    doc = json.loads(got["out"])
    assert _row(doc, "rank0")["status"] == "partial"
    assert any(f["playbook"] == "cuda-oom" for f in doc["findings"])
    assert got["rss"] < base + 150 * MB, (got["rss"] / MB, base / MB)


def test_a_trace_over_the_document_budget_keeps_its_events_before_the_cut(tmp_path, monkeypatch):
    from forensics.ingest import parse_one
    from forensics.sources import make_source

    events = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i * 10, "dur": 5}
              for i in range(40000)]  # ~3.5 MB
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}), encoding="utf-8")
    monkeypatch.setenv("FORENSICS_MAX_DOCUMENT_MB", "1")
    row, _ = parse_one(make_source(path, "trace.json"))
    assert row["status"] == "partial" and "1 MiB budget" in row["error"]
    assert 5000 < row["rows"] < 40000
    monkeypatch.delenv("FORENSICS_MAX_DOCUMENT_MB")
    row, _ = parse_one(make_source(path, "trace.json"))
    assert row["status"] == "parsed" and row["rows"] == 40000

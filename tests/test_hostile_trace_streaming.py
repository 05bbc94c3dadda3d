"""Big and hostile JSON traces are streamed, never loaded whole: a trace past the event budget keeps its first
events, is marked `partial` with the reason, and the rest of the folder goes on, in bounded memory (peak RSS
measured in a subprocess); a streamed read gives exactly what a read of the whole document gives."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from forensics.parsers import chrome_trace

from forensics.ingest import parse_one
from forensics.sources import make_source
from tests.test_hostile_budgets import MB, OOM, _baseline_rss, _measured, _row

HEAD = b'{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [\n'
TAIL = b'\n], "traceName": "rank0"}\n'


def _events(n: int, first: int = 0) -> bytes:
    """`n` complete kernel events in Kineto's shape, comma-separated (no brackets)."""
    return b",\n".join(
        b'{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %d, "dur": 5, "args": {"correlation": %d}}'
        % (i % 97, 1000 + i * 10, i) for i in range(first, first + n))


def _trace(n: int) -> bytes:
    return HEAD + _events(n) + TAIL


def _parse(path: Path, monkeypatch, budget: int | None) -> dict:
    if budget is not None:
        monkeypatch.setenv("FORENSICS_MAX_TRACE_EVENTS", str(budget))
    row, _ = parse_one(make_source(path, path.name))
    return row


def test_a_trace_past_the_event_budget_keeps_its_first_events_and_says_why(tmp_path, monkeypatch):
    path = tmp_path / "rank0.pt.trace.json"
    path.write_bytes(_trace(5000))
    row = _parse(path, monkeypatch, 1200)
    assert row["kind"] == "kineto_trace" and row["status"] == "partial" and row["rows"] == 1200
    assert "event budget reached (1,200 events, FORENSICS_MAX_TRACE_EVENTS)" in row["error"]


def test_a_trace_at_the_event_budget_is_read_whole_and_not_marked(tmp_path, monkeypatch):
    path = tmp_path / "rank0.pt.trace.json"
    path.write_bytes(_trace(1200))
    row = _parse(path, monkeypatch, 1200)
    assert row["status"] == "parsed" and row["rows"] == 1200 and not row["error"]


def test_the_budget_stops_reading_the_trace(monkeypatch):
    """Past the budget the stream is left unread: a trace cut there reads no further than a few windows."""
    stream = io.BytesIO(_trace(200_000))  # ~20 MB
    trace = chrome_trace.read_stream(stream, window=64 * 1024, max_events=1000)
    assert not trace.complete and trace.events.num_rows == 1000
    assert stream.tell() < 2 * chrome_trace.STREAM_BYTES
    assert trace.meta_value("schemaVersion") == 1


@pytest.mark.parametrize("cut", ["whole", "truncated", "damaged", "bare"])
def test_a_streamed_read_equals_a_read_of_the_whole_document(corpus, monkeypatch, cut):
    raw = gzip.decompress((corpus / "torch_profiler/hta_a100_ddp2_rank0_nccl_fields_basetime.json.gz").read_bytes())
    doc = {"whole": raw, "truncated": raw[:len(raw) * 2 // 3], "damaged": raw[:len(raw) // 2] + b"#@!" + raw[len(raw) // 2 + 3:],
           "bare": json.dumps(json.loads(raw)["traceEvents"]).encode()}[cut]
    # Small blocks and windows: every window boundary, every refill and every slide of the buffer is exercised.
    monkeypatch.setattr(chrome_trace, "STREAM_BYTES", 3000)
    whole = chrome_trace.read(doc, window=16 * 1024)
    streamed = chrome_trace.read_stream(io.BytesIO(doc), window=16 * 1024)
    assert streamed.events.equals(whole.events) and whole.events.num_rows > 10000
    assert (streamed.complete, streamed.problems, streamed.meta) == (whole.complete, whole.problems, whole.meta)
    assert whole.complete == (cut in ("whole", "bare"))


def test_a_gzip_trace_bomb_is_read_up_to_the_budget_in_bounded_memory(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    # ~120 MB of trace from a ~10 MB gzip: one compressed block of 10,000 events repeated as concatenated members.
    block = gzip.compress(b",\n" + _events(10_000), 1)
    with open(run / "rank0.pt.trace.json.gz", "wb") as fh:
        fh.write(gzip.compress(HEAD + _events(1), 1))
        for _ in range(100):
            fh.write(block)
        fh.write(gzip.compress(TAIL, 1))
    (run / "rank0.log").write_text(OOM + "\n", encoding="utf-8")
    base = _baseline_rss(tmp_path)
    got = _measured("analyze", str(run), "--no-cache", "--format", "json", env={"FORENSICS_MAX_TRACE_EVENTS": "20000"})
    assert got["rc"] == 0 and "Traceback" not in got["err"], got["err"][-2000:]
    doc = json.loads(got["out"])
    trace = _row(doc, "rank0.pt.trace")
    assert trace["status"] == "partial" and "event budget" in trace["error"] and trace["rows"] == 20000
    assert any(f["playbook"] == "cuda-oom" for f in doc["findings"])  # the rest of the folder goes on
    # Reading the document whole would hold its 120 MB; parsing all its million events, far more.
    assert got["rss"] < base + 80 * MB, (got["rss"] / MB, base / MB)

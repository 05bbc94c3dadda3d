"""Trace loader edge cases: truncation, damage, windows, legacy shapes, pickles, memory timelines."""

from __future__ import annotations

import gzip
import json
import pickle

import polars as pl
import pytest
from forensics.parsers import chrome_trace

from forensics.ingest import ingest
from tests.helpers import frame, write_run


def corpus_events(corpus, rel: str) -> dict:
    raw = (corpus / rel).read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def serialise(doc: dict) -> tuple[bytes, list[int]]:
    """Kineto-like layout with the byte offset where each event ends."""
    head = b'{\n  "schemaVersion": 1,\n  "distributedInfo": {"rank": 2, "world_size": 4},\n  "traceEvents": [\n'
    parts, ends, pos = [], [], len(head)
    for i, e in enumerate(doc["traceEvents"]):
        text = ("  " + json.dumps(e) + (",\n" if i < len(doc["traceEvents"]) - 1 else "\n")).encode()
        parts.append(text)
        ends.append(pos + len(text.rstrip(b",\n")))
        pos += len(text)
    return head + b"".join(parts) + b'  ],\n  "traceName": "x.json"\n}\n', ends


def test_windows_and_splits_agree_with_one_shot(corpus):
    doc = corpus_events(corpus, "torch_profiler/hta_a100_ddp2_rank0_nccl_fields_basetime.json.gz")
    buf, _ = serialise(doc)
    small = chrome_trace.read(buf, window=4096)
    whole = chrome_trace.read(buf, window=1 << 40)
    assert small.complete and whole.complete
    assert small.events.num_rows == whole.events.num_rows == len(doc["traceEvents"])
    assert small.events.column("ts").to_pylist() == whole.events.column("ts").to_pylist()
    assert small.meta_value("traceName") == "x.json" and small.meta_value("distributedInfo")["rank"] == 2


def test_truncated_trace_keeps_every_complete_event(corpus, tmp_path):
    doc = corpus_events(corpus, "torch_profiler/hta_a100_alexnet_cuda_sync.json.gz")
    buf, ends = serialise(doc)
    cut_event = 700
    cut = ends[cut_event] - 5  # the process died while writing event 700
    run = ingest(write_run(tmp_path, {"rank2.pt.trace.json": buf[:cut]}))
    files = frame(run, "files")
    assert files["status"].to_list() == ["partial"]
    assert "truncated" in files["error"][0]
    spans = frame(run, "spans")
    expected = [i for i, e in enumerate(doc["traceEvents"][:cut_event]) if e["ph"] == "X"]
    assert sorted(spans.filter(pl.col("ph") == "X")["line"].to_list()) == expected
    assert set(spans["rank"].unique()) == {2}


def test_truncated_gzip_trace_is_partial(corpus, tmp_path):
    raw = (corpus / "torch_profiler/hta_v100_ns_resolution_rank0.pt.trace.json.gz").read_bytes()
    run = ingest(write_run(tmp_path, {"rank0.pt.trace.json.gz": raw[: len(raw) // 2]}))
    files = frame(run, "files")
    assert files["status"].to_list() == ["partial"]
    spans = frame(run, "spans")
    lines = sorted(spans["line"].to_list())
    # A prefix of the document: no event is missing before the last one kept.
    full = corpus_events(corpus, "torch_profiler/hta_v100_ns_resolution_rank0.pt.trace.json.gz")["traceEvents"]
    kept = [i for i, e in enumerate(full[: lines[-1] + 1]) if e["ph"] not in ("M", "s", "f", "C")]
    assert lines == kept and len(lines) > 10000


def test_damage_in_the_middle_keeps_both_sides(tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(200)]
    text = "[" + ",\n".join(json.dumps(e) for e in events) + "]"
    bad = text.replace('"name": "op100"', '"name": "op100" "oops"')
    trace = chrome_trace.read(bad.encode(), window=1024)
    names = trace.events.column("name").to_pylist()
    assert not trace.complete
    assert "op99" in names and "op150" in names and "op199" in names
    assert "op100" not in names
    assert any("malformed" in p for p in trace.problems)


def test_old_writer_quirks_are_read_leniently():
    text = b'{"traceEvents": [{"ph": "X", "cat": "Operator", "name": "a\tb", "pid": 1, "tid": "7", "ts": 1, "dur": N/A, "args": {"x": N/A}}]}'
    trace = chrome_trace.read(text)
    assert trace.events.column("name").to_pylist() == ["a\tb"]
    assert trace.events.column("dur").to_pylist() == [None]
    assert trace.events.column("tid_text").to_pylist() == ["7"]


def test_legacy_bare_array_export(tmp_path):
    # torch.autograd.profiler export_chrome_trace writes the event list itself.
    events = [{"name": "aten::add", "ph": "X", "ts": 1.5, "dur": 2.25, "tid": 0, "pid": "CPU functions", "args": {}},
              {"name": "aten::mul", "ph": "X", "ts": 5.0, "dur": 1.0, "tid": 0, "pid": "CPU functions", "args": {}}]
    run = ingest(write_run(tmp_path, {"trace.json": json.dumps(events)}))
    assert frame(run, "files")["kind"].to_list() == ["kineto_trace"]
    spans = frame(run, "spans")
    assert spans["name"].to_list() == ["aten::add", "aten::mul"]
    assert spans["dur_us"].to_list() == [2.25, 1.0]
    assert spans["pid"].to_list() == [None, None]


def test_pickled_memory_snapshot_is_never_loaded(tmp_path):
    class Boom:
        def __reduce__(self):
            return (exec, ("open('PWNED', 'w').write('x')",))

    snapshot = {"segments": [], "device_traces": [[]], "boom": Boom()}
    run = ingest(write_run(tmp_path, {"snapshot.pickle": pickle.dumps(snapshot, protocol=4)}))
    files = frame(run, "files")
    assert files["status"].to_list() == ["unrecognized"]
    assert files["kind"].to_list() == ["pickle"]
    assert "never loaded" in files["error"][0]
    assert not (tmp_path / "PWNED").exists()


def test_memory_timeline_raw_to_counters(corpus, tmp_path):
    run = ingest(write_run(tmp_path, {"mem.raw.json.gz": (corpus / "torch_profiler/hta_memory_timeline_raw.json.gz").read_bytes()}))
    files = frame(run, "files")
    assert files["kind"].to_list() == ["memory_timeline"] and files["status"].to_list() == ["parsed"]
    c = frame(run, "counters")
    raw = json.loads(gzip.decompress((corpus / "torch_profiler/hta_memory_timeline_raw.json.gz").read_bytes()))
    # Independent running totals.
    held: dict[int, int] = {}
    for _, _, nbytes, cat in raw:
        held[cat] = held.get(cat, 0) + nbytes
    last = c.sort("line").group_by("series", maintain_order=True).last()
    got = dict(zip(last["series"], last["value"], strict=True))
    names = ["PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION", "GRADIENT", "AUTOGRAD_DETAIL", "unknown"]
    for cat, value in held.items():
        assert got[names[cat]] == value
    assert got["total"] == sum(held.values())
    assert c["ts"].min().year == 2023


def test_memory_timeline_plot_form(tmp_path):
    doc = [[1700000000000000, 1700000000000100], [[0, 10, 0, 5, 0, 0, 0, 0, 0], [0, 10, 0, 5, 7, 0, 0, 0, 0]]]
    run = ingest(write_run(tmp_path, {"timeline.json": json.dumps(doc)}))
    c = frame(run, "counters")
    second = {r["series"]: r["value"] for r in c.filter(pl.col("line") == 1).to_dicts()}
    assert second["PARAMETER"] == 10 and second["INPUT"] == 5 and second["TEMPORARY"] == 7 and second["total"] == 22


def test_truncated_memory_timeline_is_partial(corpus, tmp_path):
    raw = gzip.decompress((corpus / "torch_profiler/hta_memory_timeline_raw.json.gz").read_bytes())
    run = ingest(write_run(tmp_path, {"mem.raw.json": raw[: len(raw) // 3]}))
    files = frame(run, "files")
    assert files["status"].to_list() == ["partial"]
    assert frame(run, "counters").height > 1000


@pytest.mark.parametrize("text", [b'{"traceEvents": []}', b'{"traceEvents": [], "viztracer_metadata": {"version": "1.1.1"}}'])
def test_empty_traces(tmp_path, text):
    run = ingest(write_run(tmp_path, {"t.json": text}))
    assert frame(run, "files")["status"].to_list() == ["parsed"]
    assert run.table("spans").num_rows == 0


def test_in_place_windows_match_copied_windows_and_leave_the_buffer_as_given(corpus):
    doc = corpus_events(corpus, "torch_profiler/hta_a100_ddp2_rank0_nccl_fields_basetime.json.gz")
    buf, _ = serialise(doc)
    mutable = bytearray(buf)
    copied = chrome_trace.read(buf, window=4096)
    in_place = chrome_trace.read(mutable, window=4096)
    assert bytes(mutable) == buf
    assert in_place.complete and in_place.events.num_rows == len(doc["traceEvents"])
    for col in ("ph", "name", "ts", "dur", "args"):
        assert in_place.events.column(col).to_pylist() == copied.events.column(col).to_pylist()


def test_kineto_leaves_args_in_the_file_and_args_of_fetches_them(corpus, tmp_path):
    doc = corpus_events(corpus, "torch_profiler/hta_a100_ddp2_rank0_nccl_fields_basetime.json.gz")
    buf, _ = serialise(doc)
    run = ingest(write_run(tmp_path, {"rank0.pt.trace.json": buf}))
    spans = frame(run, "spans")
    assert spans["args"].null_count() == spans.height  # not copied into the table
    kernels = spans.filter(pl.col("cat") == "kernel").head(3)["line"].to_list()
    got = chrome_trace.args_of(bytearray(buf), kernels + [10**9], window=4096)
    assert sorted(got) == kernels  # an index past the end is simply absent
    for line in kernels:
        assert json.loads(got[line]) == doc["traceEvents"][line]["args"]


def test_kineto_args_of_an_odd_type_go_through_the_loose_twin_and_are_coerced():
    from forensics.parsers import kineto

    # A writer that quoted its ids: the typed decode refuses the window, the loose twin reads it.
    doc = {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 10, "dur": 5,
         "args": {"correlation": "12", "External id": 3}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 4,
         "args": {"correlation": 12, "stream": "7", "device": 0}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 21,
         "args": {"Device Id": 0, "Bytes": "512", "Total Allocated": 1024, "Total Reserved": 2048}},
    ]}
    result = kineto.parse_bytes(json.dumps(doc).encode(), "rank0.json")
    spans = pl.from_arrow(result.tables["spans"]).sort("line")
    assert spans["correlation"].to_list() == [12, 12]
    assert spans["external_id"].to_list() == [3, None]
    assert spans["stream"].to_list() == [None, 7]
    counters = pl.from_arrow(result.tables["counters"])
    assert dict(zip(counters["name"], counters["value"], strict=True)) == {
        "memory_allocated_bytes": 1024.0, "memory_reserved_bytes": 2048.0, "memory_delta_bytes": 512.0}

"""Hostile JSON traces: one bad event is dropped or emptied and counted, never the whole trace; deep nesting
and never-closing function names end quickly with a status row."""

from __future__ import annotations

import json
import time
from pathlib import Path

from forensics.ingest import parse_one
from forensics.sources import make_source

GOOD = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 1000 + i * 10, "dur": 5,
         "args": {"device": 0}} for i in range(2000)]


def _kineto(events: list) -> str:
    return json.dumps({"schemaVersion": 1, "traceEvents": events})


def _viztracer(names: list[str]) -> str:
    events = [{"ph": "X", "cat": "FEE", "name": n, "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i, n in enumerate(names)]
    return json.dumps({"traceEvents": events, "viztracer_metadata": {"version": "0.16.3"}})


def _parse(tmp_path: Path, name: str, text: str) -> tuple[dict, float]:
    (tmp_path / name).write_text(text, encoding="utf-8")
    t = time.perf_counter()
    row, _ = parse_one(make_source(tmp_path / name, name))
    return row, time.perf_counter() - t


def test_an_event_nested_past_the_decoder_is_dropped_and_counted(tmp_path):
    bad = {"ph": "X", "cat": "kernel", "name": "bad", "pid": 0, "tid": 7, "ts": 5, "dur": 5, "args": {"a": "DEEP"}}
    text = _kineto(GOOD[:1000] + [bad] + GOOD[1000:]).replace('"DEEP"', "[" * 3000 + "]" * 3000)
    row, _ = _parse(tmp_path, "trace.json", text)
    assert row["kind"] == "kineto_trace" and row["status"] == "partial"
    assert row["rows"] == 2000 and "dropped 1 event" in row["error"]


def test_a_time_out_of_float_range_empties_that_field_only(tmp_path):
    bad = dict(GOOD[0], name="bad", ts=10**400)
    row, _ = _parse(tmp_path, "trace.json", _kineto(GOOD[:1000] + [bad] + GOOD[1000:]))
    assert row["status"] == "parsed" and row["rows"] == 2001
    assert "ts of 1 event(s) is not a number" in row["error"]


def test_a_function_line_number_past_int64_keeps_the_trace(tmp_path):
    names = [f"f{i} (/a/b.py:{12 if i != 5 else 10**25})" for i in range(2000)]
    row, _ = _parse(tmp_path, "viz.json", _viztracer(names))
    assert row["kind"] == "viztracer_trace" and row["status"] == "parsed" and row["rows"] >= 2000


def test_function_names_that_never_close_are_split_in_linear_time(tmp_path):
    from forensics.parsers.viztracer import split_function_names

    names = ["f (" + "a (b.py:1 " * 5000 for _ in range(10)]  # 50 KB each of ` (` and `:` that never close
    row, took = _parse(tmp_path, "viz.json", _viztracer(names))
    assert row["status"] == "parsed" and took < 30
    assert split_function_names(["step (/x/train.py:42)", "f (a (b.py:1", "run (t.py:99)\n"]) == (
        ["step", "f (a (b.py:1", "run"], ["/x/train.py", None, "t.py"], [42, None, 99])


def test_a_document_nested_ten_thousand_levels_gets_a_fast_status_row(tmp_path):
    row, took = _parse(tmp_path, "deep.json", '{"traceEvents": ' + "[" * 10000 + "]" * 10000 + "}")
    assert row["status"] in ("partial", "failed", "unrecognized") and took < 30

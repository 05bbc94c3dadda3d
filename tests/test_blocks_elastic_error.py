"""torchelastic error.json files (formats.md §2.5) into `torchrun_error_file` events."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
from forensics.parsers import elastic_error
from forensics.parsers.base import Sniffed

from tests.conftest import ROOT
from tests.helpers import tables

UTC = dt.timezone.utc
REC = ROOT / "tests" / "recordings" / "events"


def test_formats_md_shape_with_parent_error_code(tmp_path):
    """The §2.5 shape; the parent's copy adds `errorCode` inside `message`."""
    doc = {"message": {"message": "RuntimeError: CUDA error: an illegal memory access was encountered",
                       "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"/ws/train.py\", line 88, in step\n    loss.item()\nRuntimeError: CUDA error: an illegal memory access was encountered\n",
                                     "timestamp": "1716280983"},
                       "errorCode": 1}}
    files, ev = tables(tmp_path, {"torchelastic/none_abc/attempt_0/3/error.json": json.dumps(doc)}, "files", "events")
    ev = ev.sort("file", "line")
    assert files.select("kind", "status", "rank").row(0) == ("torchelastic_error", "parsed", 3)
    main = ev.filter(pl.col("code") == "torchrun_error_file").row(0, named=True)
    assert (main["line"], main["rank"], main["severity"]) == (1, 3, "error")
    assert main["ts"] == dt.datetime.fromtimestamp(1716280983, UTC)
    assert main["message"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert json.loads(main["fields"]) == {"file": "/ws/train.py", "line": "88", "function": "step",
                                          "exception": "RuntimeError: CUDA error: an illegal memory access was encountered",
                                          "timestamp": "1716280983", "error_code": "1"}
    # The recorded message also runs through the signature table (once per code and text).
    ima = ev.filter(pl.col("code") == "illegal_memory_access")
    assert ima.height == 1 and ima.item(0, "rank") == 3 and ima.item(0, "ts") == main["ts"]


def test_recorded_error_file_from_torchrun(tmp_path):
    """Written by @record under torchrun --log-dir (recorded here, torch 2.13)."""
    (path,) = (REC / "torchrun_raise" / "logs").glob("*/attempt_0/1/error.json")
    files, ev = tables(tmp_path, {"attempt_0/1/error.json": path.read_bytes()}, "files", "events")
    ev = ev.sort("file", "line")
    row = ev.row(0, named=True)
    fields = json.loads(row["fields"])
    assert (row["code"], row["rank"], row["message"]) == ("torchrun_error_file", 1, "ValueError: bad batch at step 3 on rank 1")
    assert fields["exception"] == "ValueError: bad batch at step 3 on rank 1"
    assert fields["line"] == "34" and fields["function"] == "main"
    assert row["ts"] == dt.datetime.fromtimestamp(int(fields["timestamp"]), UTC)


def test_plain_string_message_and_bad_json(tmp_path):
    files, ev = tables(tmp_path, {
        "a/error.json": json.dumps({"message": "Signal 9 (SIGKILL) received by PID 14750", "timestamp": 1716280983}),
        "b/error.json": '{"message": {"message": "RuntimeError: x", "extraInfo": {"py_callstack": ',
    }, "files", "events")
    ev = ev.sort("file", "line")
    st = dict(zip(files.get_column("file").to_list(), files.get_column("status").to_list(), strict=True))
    assert st == {"a/error.json": "parsed", "b/error.json": "failed"}
    assert "not valid JSON" in files.filter(pl.col("file") == "b/error.json").item(0, "error")
    codes = ev.filter(pl.col("file") == "a/error.json").select("code", "message").rows()
    assert ("torchrun_error_file", "Signal 9 (SIGKILL) received by PID 14750") in codes
    assert ("torchrun_worker_signal", "Signal 9 (SIGKILL) received by PID 14750") in codes


def test_sniff_claims_only_the_error_file_shape():
    def sn(head: bytes, name: str = "x.json") -> Sniffed:
        return Sniffed(head=head, text=head.decode(), name=name, rel=name)

    assert elastic_error.sniff(sn(b'{"message": {"message": "E", "extraInfo": {"py_callstack": ""}}}')) == 90
    assert elastic_error.sniff(sn(b'{"message": "boom"}', "error.json")) == 60
    assert elastic_error.sniff(sn(b'{"message": "hello"}', "chat.json")) == 0
    assert elastic_error.sniff(sn(b'{"traceEvents": []}')) == 0
    assert elastic_error.sniff(sn(b"Traceback (most recent call last):")) == 0

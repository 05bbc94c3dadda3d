"""DataLoader worker failures in real pastes and recordings: killed, exited, timed out, chains cut short."""

from __future__ import annotations

import json

import polars as pl

from tests.helpers import (
    event_codes,
    event_rows,
    fields_of,
    ingest_issue,
    recorded_log_events,
)


def test_dataloader_chain_cut_short(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_8976_dataloader_chain.log")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    f = json.loads(tb["fields"])
    assert (tb["line"], tb["end_line"], f["chain"], f["truncated"]) == (1, 20, "cause", "true")
    assert tb["message"] == "RuntimeError: DataLoader worker (pid 1817) is killed by signal: Killed."
    assert event_rows(ev, "dataloader_worker_killed", "pids", "signal") == [(10, None, "1817", "Killed")]


def test_dcpdn_12_python27_dataloader(tmp_path):
    ev = ingest_issue(tmp_path, "dcpdn_12_dataloader_py27.log")
    assert ev.select("line", "end_line", "code").rows() == [(1, 8, "python_traceback"), (8, 8, "dataloader_worker_killed")]


def test_fondue_13_rich_box_source_line_is_not_an_event(tmp_path):
    """The `raise RuntimeError('DataLoader worker (pid(s) {}) exited unexpectedly'...` quoted in a rich box."""
    ev = ingest_issue(tmp_path, "fondue_13_rich_dataloader_source.log")
    assert ev.filter(pl.col("code").str.starts_with("dataloader")).height == 0


def test_gaussiantalker_42_worker_killed(tmp_path):
    ev = ingest_issue(tmp_path, "gaussiantalker_42_worker_killed_chain.log")
    assert event_rows(ev, "dataloader_worker_killed", "pids", "signal") == [(17, None, "12851", "Killed")]
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"], json.loads(tb["fields"])["frames"]) == (2, 17, "7")


def test_pytorch_68643_dataloader_timed_out(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_68643_dataloader_timed_out.log")
    assert event_codes(ev) == [(1, "python_traceback"), (3, "dataloader_timeout")]
    assert event_rows(ev, "dataloader_timeout", "timeout_s") == [(3, None, "5")]


def test_dataloader_worker_killed_chain(tmp_path):
    ev = recorded_log_events(tmp_path, "dataloader_killed.log")
    assert ev.select("line", "code").rows() == [
        (1, "python_traceback"), (22, "dataloader_worker_killed"), (42, "dataloader_worker_exited")]
    tb = ev.row(0, named=True)
    assert tb["end_line"] == 42 and tb["message"] == "RuntimeError: DataLoader worker (pid(s) 15388) exited unexpectedly"
    f = fields_of(tb)
    assert (f["chain"], f["first_exception"]) == ("cause", "RuntimeError: DataLoader worker (pid 15388) is killed by signal: Killed.")
    assert fields_of(ev.row(1, named=True)) == {"pids": "15388", "signal": "Killed"}

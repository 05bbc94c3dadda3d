"""Real error output recorded here (tests/recordings/events_record.sh, torch 2.13 CPU) ingests into the right events.

Each test ingests a recorded log or a whole torchrun `--log-dir` folder and checks codes, ranks,
lines and fields, and that the error.json files become `torchrun_error_file` events.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl

from forensics.ingest import ingest
from tests.conftest import ROOT
from tests.helpers import frame, ingest_text

REC = ROOT / "tests" / "recordings" / "events"


def _events_of_log(tmp_path: Path, name: str) -> pl.DataFrame:
    text = (REC / name).read_text(encoding="utf-8")
    return frame(ingest_text(tmp_path, text, name=name), "events").sort("line")


def _events_of_run(tmp_path: Path, folder: str) -> pl.DataFrame:
    run = tmp_path / folder
    shutil.copytree(REC / folder, run)
    return frame(ingest(run), "events").sort("file", "line")


def _fields(row: dict) -> dict:
    return json.loads(row["fields"])


def test_inplace_error_is_a_traceback_plus_the_autograd_event(tmp_path):
    ev = _events_of_log(tmp_path, "inplace.log")
    assert ev.select("line", "end_line", "code").rows() == [(1, 13, "python_traceback"), (13, 13, "inplace_autograd_error")]
    f = _fields(ev.row(1, named=True))
    assert (f["tensor_type"], f["shape"], f["grad_fn"], f["version"], f["expected_version"]) == (
        "torch.FloatTensor", "4, 3", "Sigmoid", "1", "0")
    tb = _fields(ev.row(0, named=True))
    assert (tb["function"], tb["line"], tb["exc_type"]) == ("_engine_run_backward", "979", "RuntimeError")


def test_inplace_error_with_anomaly_mode_has_the_forward_trace_warning(tmp_path):
    ev = _events_of_log(tmp_path, "inplace_anomaly.log")
    assert ev.select("line", "code", "severity").rows() == [
        (1, "anomaly_forward_trace", "warning"),
        (10, "python_traceback", "error"),
        (24, "inplace_autograd_error", "error"),
    ]
    assert _fields(ev.row(0, named=True))["grad_fn"] == "SigmoidBackward0"


def test_embedding_index_error(tmp_path):
    ev = _events_of_log(tmp_path, "embedding_index.log")
    assert ev.select("line", "end_line", "code", "message").rows() == [
        (1, 18, "python_traceback", "IndexError: index out of range in self"),
        (18, 18, "embedding_index_out_of_range", "IndexError: index out of range in self"),
    ]
    assert _fields(ev.row(0, named=True))["function"] == "embedding"


def test_backward_twice_and_nan_anomaly(tmp_path):
    ev = _events_of_log(tmp_path, "backward_twice.log")
    assert ev.get_column("code").to_list() == ["python_traceback", "backward_twice"]
    ev = _events_of_log(tmp_path / "b", "nan_anomaly.log")
    assert ev.filter(pl.col("code") == "anomaly_nan").select("line").item() == 20
    assert _fields(ev.filter(pl.col("code") == "anomaly_nan").row(0, named=True)) == {"grad_fn": "SqrtBackward0", "output": "0"}


def test_cpu_allocation_failure(tmp_path):
    ev = _events_of_log(tmp_path, "cpu_alloc.log")
    row = ev.filter(pl.col("code") == "cpu_alloc_failed").row(0, named=True)
    assert row["line"] == 6
    assert _fields(row) == {"requested_bytes": "281474976710656", "errno": "12", "reason": "Cannot allocate memory"}


def test_dataloader_worker_killed_chain(tmp_path):
    ev = _events_of_log(tmp_path, "dataloader_killed.log")
    assert ev.select("line", "code").rows() == [
        (1, "python_traceback"), (22, "dataloader_worker_killed"), (42, "dataloader_worker_exited")]
    tb = ev.row(0, named=True)
    assert tb["end_line"] == 42 and tb["message"] == "RuntimeError: DataLoader worker (pid(s) 15388) exited unexpectedly"
    f = _fields(tb)
    assert (f["chain"], f["first_exception"]) == ("cause", "RuntimeError: DataLoader worker (pid 15388) is killed by signal: Killed.")
    assert _fields(ev.row(1, named=True)) == {"pids": "15388", "signal": "Killed"}


def test_checkpoint_truncated_and_shape_mismatch(tmp_path):
    ev = _events_of_log(tmp_path, "checkpoint_truncated.log")
    assert ev.filter(pl.col("code") == "checkpoint_corrupt").select("line").item() == 12
    ev = _events_of_log(tmp_path / "s", "shape_mismatch.log")
    row = ev.filter(pl.col("code") == "shape_mismatch").row(0, named=True)
    assert (row["line"], _fields(row)) == (15, {"shape_a": "2x5", "shape_b": "8x4"})


def test_dynamo_recompile_limit_and_reasons(tmp_path):
    ev = _events_of_log(tmp_path, "recompile_logs.log")
    rec = ev.filter(pl.col("code") == "dynamo_recompile")
    assert rec.select("line").to_series().to_list() == [1, 7]
    assert [_fields(r)["compile_id"] for r in rec.iter_rows(named=True)] == ["1", "2"]
    lim = ev.filter(pl.col("code") == "dynamo_recompile_limit").row(0, named=True)
    assert (lim["line"], _fields(lim)["limit_name"], _fields(lim)["limit"]) == (17, "recompile_limit", "2")
    assert str(lim["ts"]).endswith("05:36:11.765000+00:00")


def test_torchrun_plain_console_interleaved_ranks(tmp_path):
    """No --tee: `[rankN]: ` excepthook prefixes; rank 1 raised, rank 0 saw gloo's monitoredBarrier failure."""
    text = (REC / "torchrun_plain" / "console.log").read_text(encoding="utf-8")
    ev = frame(ingest_text(tmp_path, text, name="console.log"), "events").sort("line")
    tbs = ev.filter(pl.col("code") == "python_traceback")
    assert tbs.select("line", "end_line", "rank", "message").rows()[:2] == [
        (9, 17, 1, "ValueError: bad batch at step 3 on rank 1"),
        (20, 34, 0, "RuntimeError: [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 1800000 ms"),
    ]
    bar = ev.filter(pl.col("code") == "gloo_monitored_barrier_failed")
    assert bar.select("line", "rank").rows()[:3] == [(18, 0), (19, 0), (34, 0)]
    assert _fields(bar.row(1, named=True)) == {"failed_ranks": "1", "timeout_ms": "1800000"}
    failed = ev.filter(pl.col("code") == "torchrun_child_failed").row(0, named=True)
    assert (failed["line"], _fields(failed)["local_rank"], _fields(failed)["exitcode"]) == (36, "1", "1")
    report = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    assert report["rank"] == 1 and _fields(report)["exception"] == "ValueError: bad batch at step 3 on rank 1"


def test_torchrun_log_dir_run_folder(tmp_path):
    """`--log-dir --redirects 3 --tee 3`: per-rank stderr files, error.json files and the tee'd console."""
    ev = _events_of_run(tmp_path, "torchrun_raise")
    per_file = ev.group_by("file").agg(pl.col("code")).sort("file")
    by_file = {r["file"].split("/", 2)[-1] if r["file"].startswith("logs/") else r["file"]: r["code"] for r in per_file.iter_rows(named=True)}
    assert by_file["attempt_0/1/error.json"] == ["torchrun_error_file"]
    assert by_file["attempt_0/1/stderr.log"] == ["python_traceback"]
    assert sorted(by_file["attempt_0/0/error.json"]) == ["gloo_error", "torchrun_error_file"]

    err = ev.filter(pl.col("code") == "torchrun_error_file").sort("rank")
    assert err.get_column("rank").to_list() == [0, 1]
    r1 = err.row(1, named=True)
    assert r1["message"] == "ValueError: bad batch at step 3 on rank 1"
    assert _fields(r1)["exception"] == "ValueError: bad batch at step 3 on rank 1"
    assert (_fields(r1)["file"].endswith("events_ddp.py"), _fields(r1)["line"]) == (True, "34")
    assert r1["ts"] is not None and r1["ts"].timestamp() == int(_fields(r1)["timestamp"])

    stderr1 = ev.filter(pl.col("file").str.ends_with("attempt_0/1/stderr.log")).row(0, named=True)
    assert (stderr1["rank"], stderr1["line"], stderr1["end_line"]) == (1, 1, 9)

    console = ev.filter(pl.col("file") == "console.log")
    tee = console.filter(pl.col("code") == "python_traceback").sort("line")
    assert tee.select("line", "rank").rows()[:2] == [(5, 1), (18, 0)]


def test_collective_mismatch_recorded(tmp_path):
    """TORCH_DISTRIBUTED_DEBUG=DETAIL with gloo: rank 0 all_reduce while rank 1 all_gather."""
    ev = _events_of_run(tmp_path, "torchrun_mismatch")
    mm = ev.filter((pl.col("code") == "collective_mismatch") & (pl.col("file") == "console.log")).sort("line")
    rows = [(r["line"], r["rank"], _fields(r)) for r in mm.iter_rows(named=True)]
    # The two ranks' own messages, then the launcher report's copies of their call stacks.
    assert [(line, rank) for line, rank, _ in rows] == [(17, 1), (32, 0), (79, 0), (101, 1)]
    f1 = rows[0][2]
    assert (f1["rank"], f1["other_rank"], f1["seq"], f1["op"], f1["other_seq"], f1["other_op"]) == ("1", "0", "6", "ALLGATHER", "6", "ALLREDUCE")
    assert f1["differences"] == "Op type: ALLGATHERvs ALLREDUCE"

"""More real logs from public issue threads (tests/recordings/issues, sources in SOURCES.md) and a
recorded loguru traceback: codes, lines, ranks and fields of their events."""

from __future__ import annotations

import json

import polars as pl

from tests.conftest import ROOT
from tests.helpers import frame, ingest_text
from tests.test_signatures_issues import ingest_issue, rows

EVENTS = ROOT / "tests" / "recordings" / "events"


def test_mmsegmentation_3106_report_with_two_other_failures(tmp_path):
    ev = ingest_issue(tmp_path, "mmsegmentation_3106_sigabrt_report.log")
    rep = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    f = json.loads(rep["fields"])
    assert (rep["line"], rep["end_line"], rep["rank"]) == (5, 33, 0)
    assert (f["exitcode"], f["signal"], f["failures"], f["other_ranks"]) == ("-6", "SIGABRT", "3", "1,2")
    # Each row's `Signal ... received by PID` line takes the rank of the report row with its PID.
    assert rows(ev, "torchrun_worker_signal", "signame", "pid") == [
        (16, 1, "SIGABRT", "2385923"), (23, 2, "SIGABRT", "2385924"), (32, 0, "SIGABRT", "2385922")]


def test_accelerate_2960_report_then_srun_and_glog_launcher(tmp_path):
    ev = ingest_issue(tmp_path, "accelerate_2960_report_srun_glog.log")
    rep = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    assert (rep["line"], rep["end_line"], rep["rank"]) == (3, 18, 10)
    assert json.loads(rep["fields"])["failures"] == "1"  # <NO_OTHER_FAILURES>
    assert rows(ev, "slurm_task_failed", "node", "tasks", "exitcode") == [(19, None, "SH-IDC1-10-140-24-95", "0", "1")]
    assert rows(ev, "torchrun_closing_worker", "pid") == [(20, None, "147865"), (21, None, "147866")]


def test_submitit_1708_slurm_requeue(tmp_path):
    ev = ingest_issue(tmp_path, "submitit_1708_slurm_requeue.log")
    assert rows(ev, "slurm_job_cancelled", "scope", "job_id", "reason") == [
        (2, None, "JOB", "608", "JOB REQUEUE"), (3, None, "STEP", "608.0", "JOB REQUEUE")]
    assert rows(ev, "slurm_task_failed", "tasks", "exitcode") == [(8, None, "2-3", "1")]
    # submitit's own signal chatter and slurmstepd's MESSAGE_TASK_EXIT noise are not events.
    assert set(ev.get_column("line").to_list()) == {2, 3, 8}


def test_nnunet_2162_shm_enospc_is_shared_memory_not_a_full_disk(tmp_path):
    ev = ingest_issue(tmp_path, "nnunet_2162_shm_enospc.log")
    assert rows(ev, "shared_memory_error", "op", "segment", "errno") == [
        (3, None, "write to file", "/torch_8289_606636967_0", "28"), (15, None, "write to file", "/torch_8226_3581395585_0", "28")]
    assert ev.filter(pl.col("code") == "no_space_left").height == 0  # checkpoint-failure evidence only for disks
    tbs = ev.filter(pl.col("code") == "python_traceback").sort("line")
    # The paste starts inside a worker's traceback (its tail, lines 1-3), then a whole one.
    assert tbs.select("line", "end_line").rows() == [(1, 3), (4, 15)]
    assert json.loads(tbs.row(1, named=True)["fields"])["frames"] == "5"


def test_cris_19_loguru_traceback_cut_by_the_paste(tmp_path):
    """loguru/better_exceptions layout: blank lines after the opener and between `> File` frames."""
    ev = ingest_issue(tmp_path, "cris_19_loguru_spawn_sigkill.log")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    f = json.loads(tb["fields"])
    assert (tb["line"], tb["end_line"], f["frames"], f["function"], f["truncated"]) == (2, 14, "2", "main", "true")


def test_recorded_loguru_catch_traceback(tmp_path):
    """tests/recordings/loguru_record.sh: logger.catch around a real torch IndexError."""
    run = ingest_text(tmp_path, (EVENTS / "loguru_traceback.log").read_text(encoding="utf-8"))
    ev = frame(run, "events").sort("line", "code")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    f = json.loads(tb["fields"])
    assert (tb["line"], tb["end_line"], tb["message"]) == (3, 48, "IndexError: index out of range in self")
    assert (f["frames"], f["function"], f["exc_type"]) == ("7", "embedding", "IndexError")
    assert ev.filter(pl.col("code") == "embedding_index_out_of_range").get_column("line").to_list() == [48]


def test_plain_traceback_followed_by_a_blank_line_and_a_log_record_is_unchanged(tmp_path):
    """Near miss for the loguru rule: a normal traceback's exception line stays the message; the
    blank line and an error-looking record after it are not pulled into the block."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 3, in <module>\n'
        "    main()\n"
        "ValueError: bad config\n"
        "\n"
        "RuntimeError: something printed later\n"
    )
    ev = frame(ingest_text(tmp_path, text), "events")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"], tb["message"]) == (1, 4, "ValueError: bad config")


def test_pytorch_65041_report_of_1_9_with_centred_title_and_msg_json(tmp_path):
    """PyTorch 1.9-1.10 reports: the title centred between `*` and `=` borders, the child's error.json under `msg:`."""
    ev = ingest_issue(tmp_path, "pytorch_65041_report_msg_json.log")
    rep = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    f = json.loads(rep["fields"])
    assert (rep["line"], rep["end_line"], rep["rank"]) == (1, 14, 0)
    assert (f["title"], f["exitcode"], f["pid"]) == ("run_script_path", "1", "1092727")
    assert f["exception"] == "RuntimeError: rasing error since --throw was specified"
    assert rep["message"] == "run_script_path FAILED: rank 0 (local_rank 0) exitcode 1: RuntimeError: rasing error since --throw was specified"


def test_vllm_7896_ray_dedup_suffix_is_not_part_of_a_frame(tmp_path):
    """Ray appends ` [repeated 6x across cluster]` to deduplicated lines, traceback frames included."""
    ev = ingest_issue(tmp_path, "vllm_7896_ray_repeated_suffix.log")
    assert rows(ev, "nccl_error", "reason") == [(3, None, "unhandled cuda error")]
    # The paste starts inside pid 11305's traceback (lines 1-3); pid 11934's has its head (line 5 on).
    head_cut, tb = ev.filter(pl.col("code") == "python_traceback").sort("line").rows(named=True)
    assert (head_cut["line"], head_cut["end_line"], json.loads(head_cut["fields"])["head_truncated"]) == (1, 3, "true")
    f = json.loads(tb["fields"])
    assert (tb["line"], tb["end_line"], f["function"], f["line"], f["truncated"]) == (5, 7, "execute_method", "374", "true")

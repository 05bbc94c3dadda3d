"""Launcher and scheduler reports in real pastes (torchrun, DeepSpeed's launcher, Slurm, submitit): codes, lines, ranks and fields of their events."""

from __future__ import annotations

import json

import polars as pl

from tests.helpers import (
    RECORDED,
    event_codes,
    event_rows,
    events_of,
    fields_of,
    frame,
    ingest_issue,
    ingest_text,
    recorded_run_events,
)


def test_launcher_lines_of_three_eras(tmp_path):
    ev = ingest_issue(tmp_path, "colossalai_3514_sigterm_oom_kill.log")
    assert event_rows(ev, "torchrun_closing_worker", "pid") == [(3, None, "812914"), (4, None, "812915"), (5, None, "812916")]
    assert event_rows(ev, "torchrun_child_failed", "exitcode", "local_rank", "pid") == [(6, None, "-9", "3", "812917")]
    ev = ingest_issue(tmp_path / "b", "x_r1_23_glog_launcher.log")
    failed = ev.filter(pl.col("code") == "torchrun_child_failed").row(0, named=True)
    assert failed["line"] == 2 and (failed["ts"].month, failed["ts"].day, failed["ts"].hour) == (2, 17, 16)
    ev = ingest_issue(tmp_path / "c", "chatglm2_520_tqdm_glued_failed.log")
    assert event_rows(ev, "torchrun_child_failed", "exitcode", "pid") == [(1, None, "-9", "31631")]
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert tb["message"] == "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"


def test_cppo_6_report_after_traceback_tail(tmp_path):
    ev = ingest_issue(tmp_path, "cppo_6_child_failed_sigkill.log")
    rep = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    assert (rep["line"], rep["end_line"], rep["rank"]) == (10, 25, 0)
    assert event_rows(ev, "torchrun_worker_signal", "signame", "pid") == [(24, 0, "SIGKILL", "14750")]  # the report row's rank


def test_sctnet_47_old_report(tmp_path):
    ev = ingest_issue(tmp_path, "sctnet_47_old_report.log")
    rep = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    f = json.loads(rep["fields"])
    assert (rep["line"], rep["end_line"], f["exitcode"], f["other_ranks"], f["other_pids"]) == (1, 17, "1", "1", "866230")


def test_deepspeed_sigkill_handler_keeps_the_command(tmp_path):
    ev = ingest_issue(tmp_path, "deepspeed_3232_sigkill_handler.log")
    row = ev.filter(pl.col("code") == "deepspeed_launcher_exit").row(0, named=True)
    f = json.loads(row["fields"])
    assert (f["exitcode"], f["local_rank"]) == ("-9", "0")
    assert f["cmd"].startswith("'/usr/bin/python3', '-u', 'main.py', '--local_rank=0'")
    assert row["message"].startswith("['/usr/bin/python3', '-u', 'main.py'") and row["message"].endswith("exits with return code = -9")
    assert row["ts"] is not None


def test_dsexamples_626_segfault_exit_keeps_local_rank(tmp_path):
    ev = ingest_issue(tmp_path, "dsexamples_626_glued_sigkill_11.log")
    assert event_codes(ev) == [(4, "torchrun_closing_worker"), (5, "torchrun_closing_worker"), (6, "deepspeed_launcher_exit")]
    assert event_rows(ev, "torchrun_closing_worker", "pid") == [(4, None, "94984"), (5, None, "94985")]
    assert event_rows(ev, "deepspeed_launcher_exit", "exitcode", "local_rank") == [(6, None, "-11", "1")]


def test_deepspeed_3232_sigkill_handler(tmp_path):
    ev = ingest_issue(tmp_path, "deepspeed_3232_sigkill_handler.log")
    assert event_rows(ev, "torchrun_closing_worker", "pid", "launcher") == [(1, None, "13266", "deepspeed")]
    assert event_rows(ev, "deepspeed_launcher_exit", "exitcode") == [(2, None, "-9")]


def test_deepspeed_1581_killing_subprocesses(tmp_path):
    ev = ingest_issue(tmp_path, "deepspeed_1581_killing_subprocess.log")
    assert event_rows(ev, "torchrun_closing_worker", "pid") == [(1, None, "250621"), (2, None, "250622"), (3, None, "250623")]


def test_killing_subprocess_near_miss():
    assert events_of("Killing subprocesses and exiting", "INFO: Killing subprocess tree of the data server").height == 0


def test_mmsegmentation_3106_report_with_two_other_failures(tmp_path):
    ev = ingest_issue(tmp_path, "mmsegmentation_3106_sigabrt_report.log")
    rep = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    f = json.loads(rep["fields"])
    assert (rep["line"], rep["end_line"], rep["rank"]) == (5, 33, 0)
    assert (f["exitcode"], f["signal"], f["failures"], f["other_ranks"]) == ("-6", "SIGABRT", "3", "1,2")
    # Each row's `Signal ... received by PID` line takes the rank of the report row with its PID.
    assert event_rows(ev, "torchrun_worker_signal", "signame", "pid") == [
        (16, 1, "SIGABRT", "2385923"), (23, 2, "SIGABRT", "2385924"), (32, 0, "SIGABRT", "2385922")]


def test_accelerate_2960_report_then_srun_and_glog_launcher(tmp_path):
    ev = ingest_issue(tmp_path, "accelerate_2960_report_srun_glog.log")
    rep = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    assert (rep["line"], rep["end_line"], rep["rank"]) == (3, 18, 10)
    assert json.loads(rep["fields"])["failures"] == "1"  # <NO_OTHER_FAILURES>
    assert event_rows(ev, "slurm_task_failed", "node", "tasks", "exitcode") == [(19, None, "SH-IDC1-10-140-24-95", "0", "1")]
    assert event_rows(ev, "torchrun_closing_worker", "pid") == [(20, None, "147865"), (21, None, "147866")]


def test_submitit_1708_slurm_requeue(tmp_path):
    ev = ingest_issue(tmp_path, "submitit_1708_slurm_requeue.log")
    assert event_rows(ev, "slurm_job_cancelled", "scope", "job_id", "reason") == [
        (2, None, "JOB", "608", "JOB REQUEUE"), (3, None, "STEP", "608.0", "JOB REQUEUE")]
    assert event_rows(ev, "slurm_task_failed", "tasks", "exitcode") == [(8, None, "2-3", "1")]
    # submitit's own signal chatter and slurmstepd's MESSAGE_TASK_EXIT noise are not events.
    assert set(ev.get_column("line").to_list()) == {2, 3, 8}


def test_pytorch_65041_report_of_1_9_with_centred_title_and_msg_json(tmp_path):
    """PyTorch 1.9-1.10 reports: the title centred between `*` and `=` borders, the child's error.json under `msg:`."""
    ev = ingest_issue(tmp_path, "pytorch_65041_report_msg_json.log")
    rep = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    f = json.loads(rep["fields"])
    assert (rep["line"], rep["end_line"], rep["rank"]) == (1, 14, 0)
    assert (f["title"], f["exitcode"], f["pid"]) == ("run_script_path", "1", "1092727")
    assert f["exception"] == "RuntimeError: rasing error since --throw was specified"
    assert rep["message"] == "run_script_path FAILED: rank 0 (local_rank 0) exitcode 1: RuntimeError: rasing error since --throw was specified"


def test_torchrun_plain_console_interleaved_ranks(tmp_path):
    """No --tee: `[rankN]: ` excepthook prefixes; rank 1 raised, rank 0 saw gloo's monitoredBarrier failure."""
    text = (RECORDED / "torchrun_plain" / "console.log").read_text(encoding="utf-8")
    ev = frame(ingest_text(tmp_path, text, name="console.log"), "events").sort("line")
    tbs = ev.filter(pl.col("code") == "python_traceback")
    assert tbs.select("line", "end_line", "rank", "message").rows()[:2] == [
        (9, 17, 1, "ValueError: bad batch at step 3 on rank 1"),
        (20, 34, 0, "RuntimeError: [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 1800000 ms"),
    ]
    bar = ev.filter(pl.col("code") == "gloo_monitored_barrier_failed")
    assert bar.select("line", "rank").rows()[:3] == [(18, 0), (19, 0), (34, 0)]
    assert fields_of(bar.row(1, named=True)) == {"failed_ranks": "1", "timeout_ms": "1800000"}
    failed = ev.filter(pl.col("code") == "torchrun_child_failed").row(0, named=True)
    assert (failed["line"], fields_of(failed)["local_rank"], fields_of(failed)["exitcode"]) == (36, "1", "1")
    report = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    assert report["rank"] == 1 and fields_of(report)["exception"] == "ValueError: bad batch at step 3 on rank 1"


def test_torchrun_log_dir_run_folder(tmp_path):
    """`--log-dir --redirects 3 --tee 3`: per-rank stderr files, error.json files and the tee'd console."""
    ev = recorded_run_events(tmp_path, "torchrun_raise")
    per_file = ev.group_by("file").agg(pl.col("code")).sort("file")
    by_file = {r["file"].split("/", 2)[-1] if r["file"].startswith("logs/") else r["file"]: r["code"] for r in per_file.iter_rows(named=True)}
    assert by_file["attempt_0/1/error.json"] == ["torchrun_error_file"]
    assert by_file["attempt_0/1/stderr.log"] == ["python_traceback"]
    assert sorted(by_file["attempt_0/0/error.json"]) == ["gloo_error", "torchrun_error_file"]

    err = ev.filter(pl.col("code") == "torchrun_error_file").sort("rank")
    assert err.get_column("rank").to_list() == [0, 1]
    r1 = err.row(1, named=True)
    assert r1["message"] == "ValueError: bad batch at step 3 on rank 1"
    assert fields_of(r1)["exception"] == "ValueError: bad batch at step 3 on rank 1"
    assert (fields_of(r1)["file"].endswith("events_ddp.py"), fields_of(r1)["line"]) == (True, "34")
    assert r1["ts"] is not None and r1["ts"].timestamp() == int(fields_of(r1)["timestamp"])

    stderr1 = ev.filter(pl.col("file").str.ends_with("attempt_0/1/stderr.log")).row(0, named=True)
    assert (stderr1["rank"], stderr1["line"], stderr1["end_line"]) == (1, 1, 9)

    console = ev.filter(pl.col("file") == "console.log")
    tee = console.filter(pl.col("code") == "python_traceback").sort("line")
    assert tee.select("line", "rank").rows()[:2] == [(5, 1), (18, 0)]

"""Events completed from the lines after them (parsers/followups.py), on real issue-thread pastes:
NCCL `Last error:` details, lines a paste wrapped, ranks of torchrun report rows."""

from __future__ import annotations

import json

import polars as pl

from tests.helpers import event_rows, frame, ingest_issue, ingest_text


def test_nccl_2076_remote_error_carries_its_last_error(tmp_path):
    ev = ingest_issue(tmp_path, "nccl_2076_remote_error_last_error.log")
    detail = "socketProgressOpt: Call to recv from 172....<33759> failed : Connection reset by peer"
    err = ev.filter(pl.col("code") == "nccl_error").row(0, named=True)
    f = json.loads(err["fields"])
    assert (err["line"], err["end_line"]) == (1, 4)
    assert (f["reason"], f["nccl_code"], f["last_error"]) == ("remote process exited or there was a network error", "ncclRemoteError", detail)
    assert err["text"].endswith("\nLast error:\n" + detail)
    assert event_rows(ev, "nccl_error_detail", "nccl_code", "last_error") == [(2, None, "ncclRemoteError", detail)]


def test_nccl_1247_ray_vllm_record_prefix_on_every_detail_line(tmp_path):
    ev = ingest_issue(tmp_path, "nccl_1247_ray_last_error.log")
    assert event_rows(ev, "nccl_error", "line", "nccl_version", "nccl_code", "last_error") == [
        (2, None, "1333", "2.18.6", "ncclInternalError", "Attribute busid of node nic not found")]
    assert ev.filter(pl.col("code") == "nccl_error").get_column("end_line").to_list() == [5]


def test_tinyllava_112_nccl_error_wrapped_after_the_file_path(tmp_path):
    """`...ProcessGroupNCCL.cpp` / `:1331, internal error ...`: joined back into one nccl_error."""
    ev = ingest_issue(tmp_path, "tinyllava_112_wrapped_nccl_error.log")
    err = ev.filter(pl.col("code") == "nccl_error").row(0, named=True)
    f = json.loads(err["fields"])
    assert (err["line"], err["end_line"]) == (1, 5)
    assert (f["file"], f["line"], f["reason"], f["nccl_version"]) == (
        "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "1331", "internal error - please report this issue to the NCCL developers", "2.18.1")
    assert (f["last_error"], "partial" in f) == ("Attribute arch of node cpu not found", False)


def test_pytorch_111187_detail_without_the_error_line(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_111187_unhandled_cuda_last_error.log")
    assert event_rows(ev, "nccl_error_detail", "nccl_code", "last_error") == [(1, None, "ncclUnhandledCudaError", "Cuda failure 'invalid argument'")]
    # The traceback after the detail is its own block, not part of the detail.
    assert ev.filter(pl.col("code") == "python_traceback").get_column("line").to_list() == [4]


def test_pytorch_149984_empty_last_error_takes_no_detail(tmp_path):
    """Near miss: `Last error:` with nothing after it, then a blank line and a C++ frame dump."""
    ev = ingest_issue(tmp_path, "pytorch_149984_empty_last_error.log")
    f = json.loads(ev.filter(pl.col("code") == "nccl_error").row(0, named=True)["fields"])
    assert (f["reason"], f["nccl_code"], "last_error" in f) == ("unhandled system error", "ncclSystemError", False)
    assert ev.filter(pl.col("code") == "nccl_error_detail").select("line", "end_line").rows() == [(2, 3)]


def test_nccl_error_detail_of_another_rank_is_not_taken(tmp_path):
    """Near miss: the `Last error:` lines after a rank's NCCL error belong to that rank's stream only
    (lines from tests/recordings/issues/dle_1386, the detail moved to another rank's prefix)."""
    text = (
        "[rank2]: torch.distributed.DistBackendError: NCCL error in: /home/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2028, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
        "[rank3]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. \n"
        "[rank3]: Last error:\n"
        "[rank3]: Error while creating shared memory segment /dev/shm/nccl-c8G2vd (size 5767520)\n"
    )
    ev = frame(ingest_text(tmp_path, text), "events")
    err = ev.filter(pl.col("code") == "nccl_error").row(0, named=True)
    assert (err["rank"], err["end_line"], "last_error" in json.loads(err["fields"])) == (2, 1, False)
    assert event_rows(ev, "nccl_error_detail", "last_error") == [(2, 3, "Error while creating shared memory segment /dev/shm/nccl-c8G2vd (size 5767520)")]


def test_dle_1386_rank_prefixed_last_error(tmp_path):
    ev = ingest_issue(tmp_path, "dle_1386_nccl_shm_rank_prefixed.log")
    assert event_rows(ev, "nccl_error", "last_error") == [(7, 2, "Error while creating shared memory segment /dev/shm/nccl-c8G2vd (size 5767520)")]


def test_openr1_620_watchdog_wrapped_inside_collective(tmp_path):
    """The paste cut `Watchdog caught colle` / `ctive operation timeout: ...`: the second line still
    gives the timeout with every field it holds."""
    ev = ingest_issue(tmp_path, "openr1_620_wrapped_watchdog.log")
    assert event_rows(ev, "nccl_watchdog_timeout", "seq", "op", "numel_in", "timeout_ms", "elapsed_ms", "partial") == [
        (2, None, "4", "BROADCAST", "112", "1800000", "1800011", "true")]


# Lines of hiyouga/LlamaFactory#7396 (tests/recordings/issues/llamafactory_7396_nccl_timeout.log) as a
# paste wraps them at a fixed width: inside the elapsed time, and inside NumelIn.
_L1 = "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
_L2 = "[rank4]:[E321 02:07:08.414640780 ProcessGroupNCCL.cpp:607] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600067 milliseconds before timing out."


def test_watchdog_line_wrapped_mid_number_is_joined(tmp_path):
    cut1, cut2 = _L1.index("060 milli"), _L2.index("19168, NumelOut")
    text = "\n".join([_L1[:cut1], _L1[cut1:], _L2[:cut2], _L2[cut2:]]) + "\n"
    ev = frame(ingest_text(tmp_path, text), "events").sort("line")
    assert event_rows(ev, "nccl_watchdog_timeout", "seq", "numel_in", "timeout_ms", "elapsed_ms", "partial") == [
        (1, 0, "1580", "466119168", "600000", "600060", None), (3, 4, "1580", "466119168", "600000", "600067", None)]
    assert ev.get_column("end_line").to_list() == [2, 4]


def test_watchdog_line_cut_with_no_continuation_keeps_its_head(tmp_path):
    """Near miss: the next line is a new record (another rank), not the rest: no join, fields of the head only."""
    cut = _L1.index("060 milli")
    ev = frame(ingest_text(tmp_path, _L1[:cut] + "\n" + _L2 + "\n"), "events").sort("line")
    assert event_rows(ev, "nccl_watchdog_timeout", "numel_out", "timeout_ms", "elapsed_ms", "partial") == [
        (1, 0, "466119168", "600000", None, "true"), (2, 4, "466119168", "600000", "600067", None)]
    assert ev.get_column("end_line").to_list() == [1, 2]


def test_watchdog_cut_mid_number_does_not_read_the_stub(tmp_path):
    """Near miss: `NumelIn=4661` at the end of a line is not read as 4661 (no join possible here)."""
    cut = _L2.index("19168, NumelOut")
    ev = frame(ingest_text(tmp_path, _L2[:cut] + "\n\n"), "events")
    f = json.loads(ev.filter(pl.col("code") == "nccl_watchdog_timeout").row(0, named=True)["fields"])
    assert (f["seq"], f["op"], "numel_in" in f, f["partial"]) == ("1580", "ALLREDUCE", False, "true")


# --- tracebacks whose opener the paste left out (parsers/blocks/tails.py) ---------------------


def test_deepspeed_6793_rank_prefixed_traceback_tail(tmp_path):
    ev = ingest_issue(tmp_path, "deepspeed_6793_no_sync_zero3_torchrun.log")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    f = json.loads(tb["fields"])
    assert (tb["line"], tb["end_line"], tb["rank"]) == (1, 3, 0)
    assert (f["function"], f["line"], f["exc_type"], f["frames"], f["head_truncated"]) == ("no_sync", "1997", "AssertionError", "1", "true")
    assert tb["message"].startswith("AssertionError: no_sync context manager is incompatible")
    assert event_rows(ev, "torchrun_child_failed", "exitcode", "local_rank") == [(6, None, "1", "1")]


def test_dle_1386_headless_traceback_of_rank_2(tmp_path):
    ev = ingest_issue(tmp_path, "dle_1386_nccl_shm_rank_prefixed.log")
    tbs = ev.filter(pl.col("code") == "python_traceback").sort("line")
    assert tbs.select("line", "end_line", "rank").rows() == [(1, 7, 2), (11, 13, 3)]
    assert json.loads(tbs.row(0, named=True)["fields"])["exc_type"] == "torch.distributed.DistBackendError"


def test_traceback_with_its_opener_is_not_doubled(tmp_path):
    text = ('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    main()\n'
            "ValueError: bad config\n")
    ev = frame(ingest_text(tmp_path, text), "events")
    assert ev.filter(pl.col("code") == "python_traceback").select("line", "end_line").rows() == [(1, 4)]


def test_exception_line_after_indented_text_without_frames_is_not_a_traceback(tmp_path):
    """Near miss: an indented config dump then an error record, with no `File "..."` frame above it: the config
    lines are no frames (mid-log, nothing is read; as the log's last line, the error line alone is its end)."""
    text = "    lr: 0.001\n    batch_size: 8\nValueError: bad config\nstep 1 loss 2.3\n"
    ev = frame(ingest_text(tmp_path, text), "events")
    assert ev.filter(pl.col("code") == "python_traceback").height == 0
    last = frame(ingest_text(tmp_path / "end", text.rsplit("step", 1)[0]), "events").filter(pl.col("code") == "python_traceback")
    assert last.select("line", "end_line").rows() == [(3, 3)]

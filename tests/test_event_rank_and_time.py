"""The rank, time and step an event takes from its line's prefix or message."""

from __future__ import annotations

import polars as pl

from tests.helpers import events_of, only


def test_rank_from_the_message_fills_an_unprefixed_line():
    row = only("[E ProcessGroupNCCL.cpp:737] [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802210 milliseconds before timing out.")
    assert row["rank"] == 6 and row["fields"]["rank"] == "6"


def test_prefix_rank_and_glog_time_are_kept():
    row = only("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.")
    assert row["rank"] == 1
    assert str(row["ts"]) == "2024-06-26 06:24:44.903881+00:00"


def test_nccl_warn_timestamp_of_nccl_2_26_becomes_the_event_time():
    row = only("[2025-05-01 12:00:00] host:123:456 [0] file.cc:123 NCCL WARN msg")
    assert row["code"] == "nccl_warn" and str(row["ts"]) == "2025-05-01 12:00:00+00:00"


def test_dmesg_ctime_stamp_becomes_the_event_time():
    row = only("[Mon May 25 12:34:56 2026] NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.")
    assert str(row["ts"]) == "2026-05-25 12:34:56+00:00"


def test_megatron_iteration_fills_step():
    ev = events_of("RuntimeError: Rank 2, node gpu-17, device 2, iteration 1200: Unexpected result nan (message='found NaN in local forward loss calculation')")
    row = ev.filter(pl.col("code") == "megatron_unexpected_result").row(0, named=True)
    assert row["step"] == 1200 and row["rank"] == 2


def test_vllm_worker_prefix_names_the_rank():
    """OBS gpustack/gpustack#2680: `(VllmWorker rank=3 pid=4665) ERROR ... NCCL error: ...`."""
    row = only("(VllmWorker rank=3 pid=4665) ERROR 08-05 14:13:44 [multiproc_executor.py:487] RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)")
    assert (row["code"], row["rank"], row["fields"]["reason"]) == ("nccl_error", 3, "unhandled system error")


def test_line_counter_or_indentation_before_the_rank_prefix_keeps_the_rank():
    """Pasted logs put a line counter (LlamaFactory#7396, #8261) or indentation (NVIDIA/nccl#1409) before `[rankN]:`."""
    ev = events_of(
        "[80750] [rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of 79.10 GiB of which 1.06 GiB is free.",
        "    [rank7]:[E816 01:45:40.183009389 ProcessGroupNCCL.cpp:607] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=80078, OpType=BROADCAST, NumelIn=5056, NumelOut=5056, Timeout(ms)=600000) ran for 600002 milliseconds before timing out.",
    )
    assert ev.select("code", "rank").rows() == [("cuda_oom", 2), ("nccl_watchdog_timeout", 7)]
    assert str(ev.get_column("ts")[1]) == "2024-08-16 01:45:40.183009+00:00"

"""A log that stops on a process-group start-up line (DeepSpeed init_distributed, torch's store-based barrier,
torchrun's rendezvous) is a low silent-hang; the same lines followed by anything, or before an error, are not."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# ultralytics/yolov5#4574: the barrier line repeats every 10 s while ranks are missing, and the run never starts.
YOLO_WAIT = ("Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 "
             "(world_size=4, worker_count=8, timeout=0:30:00)")
# Lightning-AI/pytorch-lightning#4420: every rank waits, 7 of 8 workers joined (root logger prefix).
PL_WAIT = [f"INFO:root:Waiting in store based barrier to initialize process group for rank: {r}, key: "
           "store_based_barrier_key:1 (world_size=8, worker_count=7, timeout=0:30:00)" for r in (0, 6, 2, 1, 7, 3, 5)]
# AlibabaResearch/efficientteacher#85: the same line with a one-day timeout, repeated.
ET_WAIT = ("Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 "
           "(world_size=2, worker_count=4, timeout=1 day, 0:00:00)")
# facebookresearch/metaseq#52 (a comment's paste): fairseq-style `| INFO | torch.distributed.distributed_c10d |` prefix.
METASEQ_WAIT = [f"2022-05-10 05:38:{s} | INFO | torch.distributed.distributed_c10d | Waiting in store based barrier to initialize "
                f"process group for rank: {r}, key: store_based_barrier_key:1 (world_size=2, worker_count=3, timeout=0:30:00)"
                for s, r in (("33", 0), ("33", 2), ("43", 0))]
# ymcui/Chinese-LLaMA-Alpaca-2#67: DeepSpeed's init lines, then the run goes on (it later failed loading a checkpoint).
DS_INIT = ["[2023-08-03 08:32:42,753] [WARNING] [comm.py:152:init_deepspeed_backend] NCCL backend in DeepSpeed not yet implemented",
           "[2023-08-03 08:32:42,753] [INFO] [comm.py:616:init_distributed] cdb=None",
           "[2023-08-03 08:32:42,753] [INFO] [comm.py:643:init_distributed] Initializing TorchBackend in DeepSpeed with backend nccl"]
DS_NEXT = "08/03/2023 08:32:43 - WARNING - __main__ - Process rank: 0, device: cuda:0, n_gpu: 1"
# DLLXW/baby-llama2-chinese#58: torch >= 1.9 logs the barrier's completion, then the script goes on.
BARRIER_DONE = ["[2024-01-24 15:07:20,199][distributed_c10d.py][INFO] Added key: store_based_barrier_key:1 to store for rank: 0",
                "[2024-01-24 15:07:20,199][distributed_c10d.py][INFO] Rank 0: Completed store-based barrier for key:store_based_barrier_key:1 with 1 nodes.",
                "device: cuda:0"]
# Lightning-AI/pytorch-lightning#3029: torchelastic's agent rendezvous, then the etcd rendezvous lines that follow it.
RDZV = ["[INFO] 2020-08-18 05:26:51,666 api: [default] Stopping worker group",
        "[INFO] 2020-08-18 05:26:51,937 api: [default] Rendezvous'ing worker group"]
RDZV_NEXT = "INFO 2020-08-18 05:26:51,937 Attempting to join next rendezvous"


def _analyze(tmp_path: Path, lines: list[str]) -> tuple[Analysis, pl.DataFrame]:
    ctx = Context(ingest(write_run(tmp_path, {"console.log": "\n".join(lines) + "\n"})))
    return analyze(ctx), ctx.events


def _problems(a: Analysis) -> list:
    return [f for f in a.findings if f.severity > Severity.INFO]


@pytest.mark.parametrize("lines", [
    [YOLO_WAIT] * 3,
    PL_WAIT,
    [ET_WAIT, ET_WAIT],
    METASEQ_WAIT,
    DS_INIT,
    DS_INIT[:2],
    BARRIER_DONE[:1],
    RDZV,
], ids=["yolov5_barrier_wait", "lightning_root_logger_wait", "one_day_timeout_wait", "metaseq_prefixed_wait", "deepspeed_torch_backend",
        "deepspeed_cdb_none", "barrier_key_added", "torchelastic_rendezvous"])
def test_log_ending_on_a_start_up_line_is_a_low_hang(tmp_path, lines):
    a, ev = _analyze(tmp_path, lines)
    ends = ev.filter(pl.col("code") == "log_end")
    assert ends.select("line", "fields").rows() == [(len(lines), '{"form":"dist_init"}')]
    top = _problems(a)[0]
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.LOW, "rendezvous_incomplete")
    assert top.evidence[0].line == len(lines)


@pytest.mark.parametrize("lines", [
    [*DS_INIT, DS_NEXT],
    BARRIER_DONE,
    BARRIER_DONE[:2],
    [*RDZV, RDZV_NEXT],
    [YOLO_WAIT, *BARRIER_DONE[1:]],
], ids=["deepspeed_then_script", "barrier_completed_then_script", "barrier_completed_last", "rendezvous_then_etcd",
        "wait_then_completed"])
def test_start_up_lines_followed_by_anything_are_quiet(tmp_path, lines):
    a, ev = _analyze(tmp_path, lines)
    assert ev.filter(pl.col("code") == "log_end").height == 0
    assert not _problems(a)


def test_start_up_line_after_an_error_is_the_crash_not_a_hang(tmp_path):
    # A relaunch after a crash in the same log: the error's playbook explains the run, not the last line.
    crash = ["Traceback (most recent call last):", '  File "train.py", line 12, in <module>',
             "    main()", "RuntimeError: CUDA error: out of memory"]
    a, _ = _analyze(tmp_path, [*crash, *DS_INIT])
    assert "silent-hang" not in {f.id for f in _problems(a)}


def test_lightning_registration_of_every_member_is_not_this_form(tmp_path):
    # Lightning's registration line is dist_member_init's (duplicate claims); a log holding every member is quiet.
    members = [f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/2" for r in range(2)]
    a, ev = _analyze(tmp_path, members)
    assert ev.filter(pl.col("code") == "log_end").height == 0
    assert not _problems(a)

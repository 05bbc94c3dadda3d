"""Hang evidence from where a log stops and from stall reports (ingest + analyze on real lines): Horovod's stall
report, a JIT extension build waiting on a stale lock, duplicate rank registrations, a bar that never advanced;
and the healthy logs that print the same lines and go on."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# horovod/horovod#1442 (horovod 0.18, mpirun-prefixed glog record): rank 6 never submits its allreduces.
HVD_WARNING = ("[1,0]<stderr>:[2019-10-09 15:36:43.594972: W horovod/common/stall_inspector.cc:105] One or more tensors were "
               "submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for "
               "more than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that "
               "only subset of ranks is submitting tensors, which will cause deadlock.")
HVD_RANKS = ["[1,0]<stderr>:Stalled ranks:",
             "[1,0]<stderr>:6: [horovod_allreduce.0, horovod_allreduce.1, horovod_allreduce.10, horovod_allreduce.100, "
             "horovod_allreduce.101, horovod_allreduce.102 ...]"]
# The same thread's progress lines (GluonNLP BERT pretraining), before the stall and, in the near miss, after it.
HVD_STEP = ("INFO:root:[step {}]  mlm_loss=1.40024        nsp_loss= 0.02  throughput=14.5K tks/s lr=0.0004484 "
            "time=3693.76, latency=3693.8 ms/batch")
# horovod/horovod#534 (0.13-0.15 operations.cc): `Stalled ops:` then one line per tensor with its missing ranks.
HVD_OPS = [" WARNING: One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are "
           "waiting for remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying to "
           "submit different tensors or that only subset of ranks is submitting tensors, which will cause deadlock. ",
           "Stalled ops:",
           "HorovodBroadcast_fully_connected_weights_0 [missing ranks: 0]",
           "HorovodBroadcast_fully_connected_1_weights_0 [missing ranks: 0]"]
# OptimalScale/LMFlow#219: DeepSpeed loads its ops; each root line is followed by the build/load (then training).
EXT_LOAD = ["Using /root/.cache/torch_extensions/py39_cu117 as PyTorch extensions root...",
            "Emitting ninja build file /root/.cache/torch_extensions/py39_cu117/utils/build.ninja...",
            "Building extension module utils...",
            "Allowing ninja to set a default number of workers... (overridable by setting the environment variable MAX_JOBS=N)",
            "ninja: no work to do.",
            "Loading extension module utils...",
            "Time to load utils op: 0.37459588050842285 seconds",
            "Using /root/.cache/torch_extensions/py39_cu117 as PyTorch extensions root...",
            "No modifications detected for re-loaded extension module utils, skipping build step...",
            "Loading extension module utils...",
            "Time to load utils op: 0.0003552436828613281 seconds"]
# Lightning docs ('stuck initializing at startup') / lightning_fabric: one registration line per process of 4.
MEMBERS = [f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4" for r in range(4)]
# Lightning's tqdm bars (tqdm format_meter, as in Lightning-AI/pytorch-lightning#3866): a finished epoch, the next one's first draw.
BAR_DONE = "Epoch 0: 100%|██████████| 500/500 [01:02<00:00,  8.01it/s, loss=0.231, v_num=3]"
BAR_FRESH = "Epoch 1:   0%|          | 0/500 [00:00<?, ?it/s]"
# A save the checkpoint_saved signature knows (yu-changqian/TorchSeg#59's Furnace engine).
SAVED = "10 14:38:47 Save checkpoint to file /log/snapshot/epoch-0.pth, Time usage:"


def _analyze(tmp_path: Path, lines: list[str], name: str = "console.log") -> tuple[Analysis, pl.DataFrame]:
    run = write_run(tmp_path, {name: "\n".join(lines) + "\n"})
    ctx = Context(ingest(run))
    return analyze(ctx), ctx.events


def _problems(a: Analysis) -> list:
    return [f for f in a.findings if f.severity > Severity.INFO]


def test_horovod_stalled_ranks_list_names_the_missing_rank(tmp_path):
    a, ev = _analyze(tmp_path, [HVD_STEP.format(83999), HVD_WARNING, *HVD_RANKS])
    head = ev.filter(pl.col("code") == "horovod_stall_list").row(0, named=True)
    assert (head["line"], head["end_line"], json.loads(head["fields"])["missing_ranks"]) == (3, 4, "6")
    top = _problems(a)[0]
    assert top.id == "collective-mismatch" and "rank 6 never submitted" in top.summary and top.onset.rank == 6
    assert {("console.log", 2), ("console.log", 3)} <= {(e.file, e.line) for e in top.evidence}


def test_horovod_stalled_ops_each_line_is_evidence(tmp_path):
    a, _ = _analyze(tmp_path, HVD_OPS)
    top = _problems(a)[0]
    assert top.id == "collective-mismatch" and "rank 0 never submitted" in top.summary
    assert {e.line for e in top.evidence} == {1, 2, 3, 4}


def test_horovod_stall_the_run_got_past_is_quiet(tmp_path):
    # horovod/horovod#2315: stall warnings while one rank runs a long evaluation, then training goes on.
    a, _ = _analyze(tmp_path, [HVD_STEP.format(83999), HVD_WARNING, *HVD_RANKS, HVD_STEP.format(84000), HVD_STEP.format(84001)])
    assert "collective-mismatch" not in {f.id for f in _problems(a)}


def test_log_stopping_at_extensions_root_is_a_stale_lock(tmp_path):
    a, ev = _analyze(tmp_path, EXT_LOAD[:1])
    assert ev.filter(pl.col("code") == "log_end").get_column("fields").to_list() == ['{"form":"extension_build"}']
    top = _problems(a)[0]
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.MEDIUM, "stale_build_lock")


def test_extension_build_that_goes_on_is_quiet(tmp_path):
    a, ev = _analyze(tmp_path, EXT_LOAD)
    assert ev.filter(pl.col("code") == "log_end").height == 0
    assert not _problems(a)


def test_two_processes_per_rank_and_missing_ranks_never_complete_start_up(tmp_path):
    # Lightning-AI/pytorch-lightning#4389's shape: srun started each of ranks 0-3 twice, ranks 4-7 never.
    lines = [f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8" for r in (1, 1, 2, 2, 3, 3, 0, 0)]
    top = _problems(_analyze(tmp_path, lines)[0])[0]
    assert top.id == "silent-hang" and top.causes[0].cause.id == "duplicate_ranks"
    assert "ranks 4-7 of 8 never registered" in top.summary


def test_restart_that_registers_every_rank_twice_is_quiet(tmp_path):
    assert not _problems(_analyze(tmp_path, MEMBERS + MEMBERS)[0])


def test_one_process_log_of_a_bigger_group_is_quiet(tmp_path):
    # A rank-0 log names only its own registration (the others print to their own streams).
    assert not _problems(_analyze(tmp_path, [MEMBERS[0], "[rank: 0] Seed set to 1"])[0])


def test_fresh_bar_after_a_saved_epoch_is_a_medium_hang(tmp_path):
    a, _ = _analyze(tmp_path, [BAR_DONE, SAVED, BAR_FRESH])
    top = _problems(a)[0]
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.MEDIUM, "stuck_dataloader")
    assert top.evidence[0].line == 3


def test_fresh_bar_without_a_finished_loop_before_is_quiet(tmp_path):
    assert not _problems(_analyze(tmp_path, ["GPU available: True (cuda), used: True", BAR_FRESH])[0])


def test_advanced_bar_after_a_save_is_quiet(tmp_path):
    assert not _problems(_analyze(tmp_path, [BAR_DONE, SAVED, BAR_FRESH, "Epoch 1:  10%|█         | 50/500 [00:06<00:54,  8.3it/s]"])[0])


def test_joined_small_logs_each_get_their_own_last_line(tmp_path):
    # Many small logs are parsed joined (textlog.parse_many): each file's stop is its own, at its own line.
    from forensics.parsers import textlog

    logs = [("a.log", (BAR_DONE + "\n" + SAVED + "\n" + BAR_FRESH + "\n\n").encode()),
            ("b.log", "\n".join(EXT_LOAD).encode()),
            ("c.log", (EXT_LOAD[0] + "\n").encode())]
    tables, _ = textlog.parse_many(logs, 2024)
    ends = pl.from_arrow(tables["events"]).filter(pl.col("code") == "log_end")
    assert ends.select(pl.col("file").cast(pl.String), "line", "fields").rows() == [
        ("a.log", 3, '{"form":"fresh_bar"}'), ("c.log", 1, '{"form":"extension_build"}')]


def test_flight_recorder_analysis_of_a_collective_some_ranks_never_joined(tmp_path):
    """The flight recorder analyzer's report (PyTorch tutorial output) is a hang's stack evidence: silent-hang."""
    text = ("Not all ranks joining collective 5 at entry 4\n"
            "group info: 0:default_pg\n"
            "collective: nccl:all_reduce\n"
            "missing ranks: {1}\n"
            "input sizes: [[3, 4]]\n"
            "output sizes: [[3, 4]]\n"
            "expected ranks: 2\n"
            "collective state: scheduled\n"
            "collective stack trace:\n"
            "  all_reduce at /home/cpio/local/pytorch/torch/distributed/distributed_c10d.py:2696\n")
    a = analyze(Context(ingest(write_run(tmp_path, {"fr_trace.txt": text}))))
    top = [f for f in a.findings if f.severity > Severity.INFO][0]
    assert top.id == "silent-hang" and "Not all ranks joining collective" in top.summary
    assert [(e.file, e.line) for e in top.evidence][:1] == [("fr_trace.txt", 1)]

"""The engine: causal chains, ranking, first failing rank, advice lines, thresholds and selection."""

from __future__ import annotations

import datetime as dt

import pytest

from forensics.config import Config, ConfigError, parse_set
from forensics.contracts.context import Context
from forensics.contracts.model import Onset
from forensics.engine import analyze, not_later
from forensics.ingest import ingest
from tests.helpers import write_run

OOM = ("[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
       "79.15 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in use. "
       "Of the allocated memory 74.51 GiB is allocated by PyTorch, and 2.95 GiB is reserved by PyTorch but unallocated. "
       "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
       "fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def _watchdog(rank: int) -> str:
    return (f"[rank{rank}]:[E810 02:21:05.{rank}61727749 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) "
            f"ran for 600020 milliseconds before timing out.")


def _cascade(tmp_path):
    files = {}
    for r in range(4):
        lines = [f"[rank{r}]:[I810 02:00:0{r}.000000000 train.py:10] starting"]
        # Each rank sees its own data, so per-rank losses differ.
        lines += [f"step {s} loss {2.5 - s * 0.01 + r * 0.003:.3f} lr 3e-4" for s in range(1, 121)]
        if r == 3:
            lines += ["[rank3]: Traceback (most recent call last):",
                      '[rank3]:   File "/ws/train.py", line 270, in <module>',
                      "[rank3]:     loss.backward()",
                      OOM.replace("[rank3]: ", "[rank3]: ", 1)]
            lines.insert(len(lines) - 4, "[rank3]:[W810 02:11:05.000000000 train.py:99] about to fail")
        else:
            lines.append(_watchdog(r))
        files[f"rank{r}.log"] = "\n".join(lines) + "\n"
    return write_run(tmp_path, files)


def test_oom_on_one_rank_is_the_root_of_the_timeouts(tmp_path):
    run = ingest(_cascade(tmp_path))
    a = analyze(Context(run))
    ids = [f.id for f in a.findings]
    assert ids[0] == "cuda-oom", ids
    oom = a.findings[0]
    assert oom.root_cause and oom.onset.rank == 3 and oom.onset.step == 120
    assert oom.onset.file == "rank3.log"
    nccl = next(f for f in a.findings if f.id == "nccl-timeout")
    assert nccl.explained_by == ["cuda-oom"] and not nccl.root_cause
    assert nccl.ranks == [0, 1, 2]
    # The explaining OOM confirms the timeout's "a peer died first" cause.
    assert nccl.causes[0].cause.id == "peer_died_first"
    assert nccl.causes[0].evidence[0].file == "rank3.log"
    # The chain follows its root directly.
    assert ids.index("nccl-timeout") == ids.index("cuda-oom") + 1
    # The OOM numbers decide the cause: 2 GiB requested with 1.06 GiB free -> demand.
    assert oom.causes[0].cause.id == "demand_above_capacity"
    assert "2.00 GiB" in oom.summary and "rank 3" in oom.summary


def test_not_later_compares_time_then_step():
    t0 = dt.datetime(2024, 8, 10, 2, 11, 5, tzinfo=dt.timezone.utc)
    t1 = t0 + dt.timedelta(minutes=10)
    assert not_later(Onset(time=t0), Onset(time=t1))
    assert not not_later(Onset(time=t1), Onset(time=t0))
    assert not_later(Onset(step=5), Onset(step=9)) and not not_later(Onset(step=9), Onset(step=5))
    assert not_later(Onset(), Onset(step=3))  # nothing comparable: direction stands


def test_advice_lines_alone_are_no_finding(tmp_path):
    root = write_run(tmp_path, {"train.log": "\n".join([
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
        "Killed",
        "step 1 loss 2.0",
    ]) + "\n"})
    a = analyze(Context(ingest(root)))
    assert [f.id for f in a.findings if f.severity > 0] == []


def test_selection_and_threshold_overrides(tmp_path):
    run = ingest(_cascade(tmp_path))
    a = analyze(Context(run), Config(select=["distributed"]))
    assert {f.id for f in a.findings} == {"nccl-timeout"}
    a = analyze(Context(run), Config(ignore=["cuda-oom"]))
    assert "cuda-oom" not in {f.id for f in a.findings}
    # Raising the fragmentation share above 2.95/79.15 keeps allocator-fragmentation quiet; lowering it makes it fire.
    low = analyze(Context(run), overrides=parse_set(("allocator-fragmentation.reserved_share=0.03",)))
    assert "allocator-fragmentation" in {f.id for f in low.findings}
    high = analyze(Context(run), overrides=parse_set(("allocator-fragmentation.reserved_share=0.5",)))
    assert "allocator-fragmentation" not in {f.id for f in high.findings}
    with pytest.raises(ConfigError):
        analyze(Context(run), overrides=parse_set(("cuda-oom.no_such_threshold=1",)))


def test_playbook_without_its_tables_is_skipped_not_passed(tmp_path):
    csv = ("timestamp, index, utilization.gpu [%], memory.used [MiB]\n"
           "2024/05/01 10:00:00.000, 0, 97 %, 40000 MiB\n2024/05/01 10:00:01.000, 0, 98 %, 40010 MiB\n")
    run = ingest(write_run(tmp_path, {"gpu.csv": csv}))
    assert run.table("files").column("kind").to_pylist() == ["nvsmi_query_csv"]
    a = analyze(Context(run))
    assert "cuda-oom" in a.skipped and "events" in a.skipped["cuda-oom"]
    assert "cuda-oom" not in a.ran


def test_a_clean_log_is_checked_not_skipped(tmp_path):
    run = ingest(write_run(tmp_path, {"train.log": "step 1 loss 2.0\nstep 2 loss 1.9\n"}))
    a = analyze(Context(run))
    assert "cuda-oom" in a.ran and "cuda-oom" not in a.skipped and a.findings == []

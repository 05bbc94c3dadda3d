"""collective-mismatch: ranks issued different collectives (sequence numbers, op types or shapes differ)."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
from forensics.playbooks.base import Playbook, declare
from forensics.playbooks.distributed.nccl_timeout import TIMEOUT_CODES
from forensics.playbooks.evidence import detection, events, first_message, ranks_text
from forensics.playbooks.fields import field

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

MISMATCH_CODES = ("collective_mismatch",)
# PyTorch's desync report names ranks that never joined the collective the others wait in: ranks that ran another
# sequence of collectives, or ranks that crashed first (NVIDIA/nccl#2213: a SIGSEGV inside NCCL on the lagging rank).
# After a crash signal in the run, the crash is the finding, not a mismatch.
DESYNC_FORM = "desync_report"
CRASH_CODES = ("shell_signal_exit",)

PLAYBOOK = declare(
    Playbook(
        id="collective-mismatch",
        title="Ranks issued different collectives",
        category="distributed",
        severity=Severity.HIGH,
        tables=("events",),
        explains=("nccl-timeout", "silent-hang"),
        codes=("collective_mismatch", "gloo_error", "horovod_stall_warning", "horovod_stall_list", "horovod_stalled_tensor", "gloo_monitored_barrier_failed", "nccl_dump_signal",
               "nccl_heartbeat_timeout", "nccl_watchdog_timeout", "nccl_work_status", "shell_signal_exit",
               "store_socket_timeout", "store_timeout", "train_loop_done"),
        causes=(
            Cause("divergent_code_path", "A rank took a different code path (a collective inside a rank-dependent condition, early exit, extra eval step)",
                  verify="TORCH_DISTRIBUTED_DEBUG=DETAIL prints the collective fingerprint of each rank; compare per-rank SeqNum",
                  fix="Issue every collective on every rank, in the same order; move rank-conditional work outside collectives", prior=0.6),
            Cause("uneven_data", "Ranks got a different number of batches, so one ran an extra step",
                  verify="Print len(dataloader) on every rank",
                  fix="DistributedSampler(drop_last=True) or the Join context manager for uneven inputs", prior=0.4),
        ),
        verify="TORCH_DISTRIBUTED_DEBUG=DETAIL; compare per-rank SeqNum and op types",
        fix="Make every rank issue the same collectives with the same shapes in the same order",
        thresholds={},
        doc="""\
## Symptom
An explicit collective-mismatch report (`Detected mismatch between collectives on ranks`, fingerprint
or size mismatches, accelerate's debug-mode `Cannot apply desired operation due to shape mismatches`, TensorFlow's
`Shape mismatch in the collective instance N`, PyTorch's desync report `[r] finished collective #N, but didn't join
collective #N+1`), or watchdog timeouts whose op types differ between ranks at the same point; or
Horovod's stall report (`One or more tensors were submitted to be reduced, gathered or broadcasted by
subset of ranks …`, then the stalled tensors with their ready or missing ranks) with no progress after it. Or a
collective timeout logged after the trainer said its loop ended on every rank (Lightning's `` `Trainer.fit`
stopped: `max_epochs=N` reached.``, transformers' `Training completed.`) with no other error between them: the
collective belongs to code after fit that not every rank ran (a save, test or barrier under a rank-0 condition).

## Why it matters
Mismatched collectives deadlock or corrupt data; the timeout that follows hides the real bug.

## Evidence
`events`: mismatch reports; watchdog timeouts with `SeqNum` and `OpType` per rank. When several ranks
report, each names the rank it disagrees with (`…, but Rank 2 is running collective: …`): the rank
named by most reports is the odd one, and its own report leads the evidence.

## Known false positives
A Horovod stall the run gets past (one rank evaluating longer than the warning time) is followed by
progress lines and is no finding. A desync report's ranks that never joined may have crashed instead: after a crash
signal (`*** SIGSEGV received at time=…`, `Segmentation fault`) in the run the report is not read. Different SeqNums alone can also mean one rank is merely slow: that is reported by `nccl-timeout`
(cause desync_or_straggler); here the op types must differ or a mismatch must be reported. A timeout after the end of the loop that follows
another error (a peer's crash in the post-fit code) is that error's finding, not this one.
""",
    )
)


def _odd_rank(ev: pl.DataFrame) -> int | None:
    """The rank the others' reports name (`…, but Rank 2 is running collective: …`) more often than any other rank."""
    named = ev.with_columns(field("other_rank").cast(pl.Int64, strict=False).alias("o")).get_column("o").drop_nulls()
    if named.len() < 2:
        return None
    counts = named.value_counts(sort=True)
    top = counts.row(0)
    if counts.height > 1 and counts.row(1)[1] >= top[1]:
        return None
    return int(top[0])


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Explicit mismatch reports, or timeouts whose op types differ across ranks."""
    ev = events(ctx, MISMATCH_CODES)
    if ev.height and events(ctx, CRASH_CODES).height:
        ev = ev.filter(field("form").fill_null("") != DESYNC_FORM)
    if ev.height:
        odd = _odd_rank(ev)
        reported = ranks_text(sorted({r for r in ev["rank"].to_list() if r is not None})) or "the job"
        if odd is not None:
            # The odd rank's own report first: its collective is the one that differs.
            mine = ev.filter(pl.col("rank") == odd)
            ev = pl.concat([mine, ev.filter(pl.col("rank").is_null() | (pl.col("rank") != odd))], how="vertical_relaxed")
        found = detection(ev, f"collective mismatch on {reported}"
                              f"{f' (rank {odd} runs a different collective from the others)' if odd is not None else ''}: {first_message(ev)}",
                          {"divergent_code_path": 0.8, "uneven_data": 0.4}, confidence=0.95,
                          facts={"odd_rank": odd} if odd is not None else None)
        if odd is not None and found.onset.rank != odd:
            found.onset = replace(found.onset, rank=odd)
        return found
    to = events(ctx, TIMEOUT_CODES).with_columns(field("op").alias("op")).filter(pl.col("op").is_not_null() & pl.col("rank").is_not_null())
    per_rank = to.group_by("rank").agg(pl.col("op").first())
    if per_rank.get_column("op").n_unique() <= 1:
        return _different_sizes(to)
    ops = dict(per_rank.sort("rank").iter_rows())
    desc = ", ".join(f"rank {r}: {op}" for r, op in ops.items())
    return detection(to, f"ranks timed out in different collectives ({desc})", {"divergent_code_path": 0.7, "uneven_data": 0.5},
                     confidence=0.8, facts={"op_by_rank": {str(k): v for k, v in ops.items()}})


def _different_sizes(to: pl.DataFrame) -> Detection | None:
    """Ranks whose watchdogs each timed out in one collective of the same type but of different sizes.

    A collective is matched by its order on the communicator, so every rank's N-th one carries the same element
    count; ranks stuck in collectives of different sizes (`NumelIn=544997376` on one, `NumelIn=2560` on the others,
    as in 2U1/Qwen-VL-Series-Finetune#17, where text-only batches skipped the vision tower on some ranks) issued
    different collectives. Only when each rank reports a single work of one process group: a rank that reports
    several (pytorch/pytorch#118369: one per process group) may be stuck in another group's collective, and the
    same size at different SeqNums is a rank that fell behind (nccl-timeout's desync_or_straggler).
    """
    sized = to.with_columns(field("numel_in").alias("n_in"), field("numel_out").alias("n_out"), field("seq").alias("seq"),
                            field("pg").alias("pg")).filter(pl.col("n_in").is_not_null())
    if sized.height < 2 or sized.get_column("pg").n_unique() > 1:
        return None
    works = sized.unique(["rank", "seq", "op", "n_in", "n_out"], maintain_order=True)
    if works.get_column("rank").n_unique() < 2 or works.get_column("rank").is_duplicated().any():
        return None
    groups = works.group_by("op", "n_in", "n_out", maintain_order=True).agg(pl.col("rank").sort(), pl.col("seq").first())
    if groups.height < 2:
        return None
    # The smallest group is the odd one out: its ranks are named first, and its first report leads the evidence.
    groups = groups.with_columns(pl.col("rank").list.len().alias("n")).sort("n", maintain_order=True)
    desc = "; ".join(f"{ranks_text(g['rank'])}: {g['op']} of {g['n_in']} elements (SeqNum {g['seq']})"
                     for g in groups.iter_rows(named=True))
    odd = groups.row(0, named=True)["rank"]
    lead = sized.filter(pl.col("rank").is_in(odd)).head(1)
    return detection(sized.drop("n_in", "n_out", "seq", "pg"), f"ranks timed out in collectives of different sizes ({desc}): "
                     "they issued different collectives", {"divergent_code_path": 0.8, "uneven_data": 0.4},
                     confidence=0.8, lead=lead.drop("n_in", "n_out", "seq", "pg"))

"""collective-mismatch from Horovod's stall report: tensors some ranks submitted wait for ranks that never do."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
from forensics.playbooks.distributed.collective_mismatch import PLAYBOOK
from forensics.playbooks.evidence import detection, events, ranks_text
from forensics.playbooks.failure_signals import progress_after
from forensics.playbooks.fields import field

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# The warning sentences, one line per stalled tensor (`[ready ranks: …]` / `[missing ranks: …]`), and the
# `Stalled ranks:` / `Missing ranks:` list (its `<rank>: [tensors]` lines read into `missing_ranks`).
STALL_CODES = ("horovod_stall_warning", "horovod_stalled_tensor", "horovod_stall_list")


def _ranks(ev: pl.DataFrame, name: str) -> list[int]:
    """The distinct ranks a comma-separated field lists over the rows."""
    vals = ev.select(field(name).alias("v")).get_column("v").drop_nulls().str.split(", ").explode()
    return sorted({int(v) for v in vals.to_list() if v and v.isdigit()})


@PLAYBOOK.detector(("events",))
def detect_horovod_stall(ctx: Context, th: dict) -> Detection | None:
    """Horovod's stall check reports tensors submitted by a subset of ranks, and the run makes no progress after.

    A stall the run got past (rank 0 evaluating for longer than the warning time while the others wait,
    horovod#2315) is followed by progress lines: that is a slow rank, not ranks submitting different tensors.
    """
    ev = events(ctx, STALL_CODES)
    if ev.height == 0:
        return None
    ev = ev.filter(~progress_after(ctx, ev))
    if ev.height == 0:
        return None
    missing, ready = _ranks(ev, "missing_ranks"), _ranks(ev, "ready_ranks")
    tensors = ev.select(field("tensor").alias("t")).get_column("t").drop_nulls().unique(maintain_order=True).to_list()
    who = (f"{ranks_text(missing)} never submitted" if missing
           else f"only {ranks_text(ready)} submitted" if ready else "a subset of ranks submitted")
    what = f" ({len(tensors)} tensors, e.g. {tensors[0]})" if tensors else ""
    found = detection(ev, f"Horovod stall: {who} the tensors{what} the other ranks wait on, and the run makes no progress "
                          "after it: ranks submit different (differently named) collectives, or some never reach them",
                      {"divergent_code_path": 0.8, "uneven_data": 0.4}, confidence=0.85,
                      facts={"missing_ranks": missing, "ready_ranks": ready, "stalled_tensors": len(tensors)})
    if len(missing) == 1:
        # The rank the others wait for is where to look (the report itself comes from the coordinator, rank 0).
        found.onset = replace(found.onset, rank=missing[0])
    return found

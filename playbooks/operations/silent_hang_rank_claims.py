"""silent-hang from process-group registration lines: two processes claim one rank, others never register."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import detection, events, ranks_text
from forensics.playbooks.failure_signals import progress_after
from forensics.playbooks.fields import field
from forensics.playbooks.operations.silent_hang import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# One line per process as it joins: Lightning's `initializing ddp: GLOBAL_RANK: r, MEMBER: r+1/N` (<=1.2) and
# `Initializing distributed: GLOBAL_RANK: r, MEMBER: r+1/N`.
MEMBER_CODES = ("dist_member_init",)
# Whatever follows a completed start-up: a later error explains the stop better than the registration does.
ERROR_SEVERITIES = ("error",)


@PLAYBOOK.detector(("events",))
def detect_duplicate_rank_claims(ctx: Context, th: dict) -> Detection | None:
    """Per file and world size: some rank registered more often than any other rank, while ranks of 0..N-1 never
    registered, and no progress or error follows. The group waits for N distinct members that never come.

    A restarted job prints every rank again (each rank the same number of times): no rank is missing, no finding.
    """
    ev = events(ctx, MEMBER_CODES).with_columns(
        field("global_rank").cast(pl.Int64, strict=False).alias("_r"), field("world_size").cast(pl.Int64, strict=False).alias("_n"))
    ev = ev.filter(pl.col("_r").is_not_null() & pl.col("_n").is_not_null() & (pl.col("_r") < pl.col("_n")))
    if ev.height == 0:
        return None
    for (file, world), grp in ev.group_by("file", "_n", maintain_order=True):
        counts = grp.group_by("_r").len()
        seen = set(counts.get_column("_r").to_list())
        missing = sorted(set(range(int(world))) - seen)
        twice = sorted(counts.filter(pl.col("len") > 1).get_column("_r").to_list())
        if not missing or not twice:
            continue
        last = grp.tail(1)
        if progress_after(ctx, last).item():
            continue
        later = ctx.events_where((pl.col("file") == file) & (pl.col("line") > last.item(0, "line"))
                                  & pl.col("severity").is_in(ERROR_SEVERITIES))
        if later.height:
            continue  # the run failed after registering: the error's playbook says why
        return detection(grp.drop("_r", "_n"),
                         f"process-group start-up never completes: {ranks_text(twice)} registered by more than one process, "
                         f"{ranks_text(missing)} of {world} never registered, and nothing follows",
                         {"duplicate_ranks": 0.9, "dead_peer": 0.2}, confidence=0.7,
                         facts={"world_size": int(world), "duplicate_ranks": twice, "missing_ranks": missing})
    return None

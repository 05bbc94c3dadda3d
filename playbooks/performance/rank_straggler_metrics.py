"""rank-straggler from per-rank timing metrics: one rank's median step/compute time well above the others'."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.performance.rank_straggler import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Per-rank durations where the slow rank is the one with the larger value. Waiting times (comm, sync,
# all-reduce) are the opposite: the fast ranks wait for the straggler, so they are left out.
TIMES = r"step_time|compute|fwd|bwd|forward|backward|iter_time|data_time|batch_time|time_ms|elapsed"
NOT_TIMES = r"comm|wait|all_?reduce|sync|eta|total|wall|per_s"



@PLAYBOOK.detector(("metrics",))
def detect_metrics(ctx: Context, th: dict) -> Detection | None:
    """The rank and timing series with the largest median ratio to the other ranks."""
    best = None
    for name in M.names_like(ctx, TIMES, exclude=NOT_TIMES):
        # Each rank's statistics, one rank at a time; the slow rank's steps and the rows quoted are read at the end.
        g = M.ts.per_rank_over(M.series_ranks(ctx, name, finite=True, cols=("rank", "step", "value")))
        if g.get_column("rank").drop_nulls().len() < 2:
            continue
        g = g.filter(pl.col("rank").is_not_null() & (pl.col("points") >= th["min_steps"]))
        if g.height < 2:
            continue
        top = g.sort("ratio", descending=True).row(0, named=True)
        gap = top["median"] - top["others_median"]
        if top["ratio"] >= th["slow_ratio"] and gap >= th["min_gap_ms"] and (best is None or top["ratio"] > best[0]["ratio"]):
            best = (top, name)
    if best is None:
        return None
    top, name = best
    rank = top["rank"]
    # Its steps against the other ranks' median at the same step, a window of steps at a time.
    slow_steps, first_step = 0, None
    for w in M.series_steps(ctx, name, finite=True):
        mine = w.filter(pl.col("rank") == rank)
        if mine.height == 0:
            continue
        others = w.filter(pl.col("rank") != rank).group_by("step").agg(pl.col("value").median().alias("o"))
        slow = mine.join(others, on="step").filter(pl.col("value") >= th["slow_ratio"] * pl.col("o"))
        slow_steps += slow.height
        if first_step is None:
            first_step = slow.get_column("step").min() if slow.height else None
    share = slow_steps / max(top["points"], 1)
    # The first slow step, else the rank's first step: its row and every rank's rows there are quoted.
    step = first_step if first_step is not None else top["first_step"]
    at = M.series_where(ctx, name, pl.col("step") == step, finite=True)[0].sort("rank")
    first = at.filter(pl.col("rank") == rank).row(0, named=True)
    summary = (f"rank {rank} is slower: median {name} {M.fmt(top['median'])} vs {M.fmt(top['others_median'])} on the other ranks "
               f"({top['ratio']:.2f}x), slower on {share:.0%} of its {top['points']} logged steps")
    return Detection(
        summary=summary,
        onset=M.onset_at(first),
        evidence=M.quote(at),
        evidence_count=slow_steps,
        causes={"slow_node": 0.7, "uneven_data": 0.4, "hung_rank": 0.2},
        confidence=0.85 if share >= 0.5 else 0.7,
        facts={"rank": rank, "series": name, "ratio": top["ratio"], "median_ms": top["median"], "others_median_ms": top["others_median"],
               "share": share},
        ranks=[rank],
    )

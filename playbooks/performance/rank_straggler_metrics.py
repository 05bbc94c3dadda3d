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
        # Ranks, steps and values decide; the slow rank's rows and the rows quoted are read at the end.
        s = M.series_columns(ctx, name, ("rank", "step", "value"), finite=True)
        if s.get_column("rank").drop_nulls().n_unique() < 2:
            continue
        g = M.ts.per_rank(s).filter(pl.col("rank").is_not_null() & (pl.col("points") >= th["min_steps"]))
        if g.height < 2:
            continue
        top = g.sort("ratio", descending=True).row(0, named=True)
        gap = top["median"] - top["others_median"]
        if top["ratio"] >= th["slow_ratio"] and gap >= th["min_gap_ms"] and (best is None or top["ratio"] > best[0]["ratio"]):
            best = (top, name, s, g)
    if best is None:
        return None
    top, name, s, g = best
    rank = top["rank"]
    mine = M.series_rank(ctx, name, rank, finite=True).sort("step")
    others = s.filter(pl.col("rank") != rank)
    slow = mine.join(others.group_by("step").agg(pl.col("value").median().alias("o")), on="step").sort("step")
    slow = slow.filter(pl.col("value") >= th["slow_ratio"] * pl.col("o"))
    share = slow.height / max(mine.height, 1)
    first = (slow if slow.height else mine).row(0, named=True)
    summary = (f"rank {rank} is slower: median {name} {M.fmt(top['median'])} vs {M.fmt(top['others_median'])} on the other ranks "
               f"({top['ratio']:.2f}x), slower on {share:.0%} of its {mine.height} logged steps")
    at = M.series_where(ctx, name, pl.col("step") == first["step"], finite=True)[0].sort("rank")
    return Detection(
        summary=summary,
        onset=M.onset_at(first),
        evidence=M.quote(at),
        evidence_count=slow.height,
        causes={"slow_node": 0.7, "uneven_data": 0.4, "hung_rank": 0.2},
        confidence=0.85 if share >= 0.5 else 0.7,
        facts={"rank": rank, "series": name, "ratio": top["ratio"], "median_ms": top["median"], "others_median_ms": top["others_median"],
               "share": share},
        ranks=[rank],
    )

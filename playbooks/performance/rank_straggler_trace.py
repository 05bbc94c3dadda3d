"""rank-straggler from per-rank profiler traces of one job: step time, and who the others wait for in NCCL."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import trace_spans as S
from forensics.playbooks.performance.rank_straggler import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection


def rank_steps(sp: pl.DataFrame) -> pl.DataFrame:
    """Per rank trace and step: step time and communication-kernel time."""
    st = S.steps(sp).filter(pl.col("rank").is_not_null())
    comm = sp.filter((pl.col("kind") == "kernel") & pl.col("name").str.contains(S.COMM_KERNEL) & pl.col("step").is_not_null())
    if comm.height:
        cu = S.union_us(comm, ["file", "step"]).rename({"union_us": "comm_us"})
        st = st.join(cu, on=["file", "step"], how="left")
    else:
        st = st.with_columns(pl.lit(None, dtype=pl.Float64).alias("comm_us"))
    return st


@PLAYBOOK.detector(("spans",))
def detect_trace(ctx: Context, th: dict) -> Detection | None:
    """Compare the rank traces over the steps they share."""
    sp = S.spans(ctx)
    if sp.height == 0:
        return None
    st = rank_steps(sp)
    if st.height == 0 or st["rank"].n_unique() < 2:
        return None
    # Only steps every rank trace recorded (one job, one profiling window).
    ranks = st["rank"].n_unique()
    shared = st.group_by("step").agg(pl.col("rank").n_unique().alias("r")).filter(pl.col("r") == ranks)["step"]
    st = st.filter(pl.col("step").is_in(shared.implode()))
    if shared.len() < th["trace_min_steps"]:
        return None
    per = st.group_by("rank").agg(pl.col("step_us").median().alias("step_us"), pl.col("comm_us").median().alias("comm_us"),
                                  pl.col("file").first()).sort("rank")
    med_all = float(per["step_us"].median())
    slow = per.filter(pl.col("step_us") > th["slow_ratio"] * med_all)
    who, how, facts = None, "", {}
    if slow.height:
        w = slow.sort("step_us", descending=True).row(0, named=True)
        who = w["rank"]
        how = f"its median ProfilerStep is {S.ms(w['step_us'])} vs {S.ms(med_all)} across {ranks} ranks ({w['step_us'] / med_all:.2f}x, threshold {th['slow_ratio']:.1f}x)"
    elif per["comm_us"].is_not_null().all():
        # In synchronous training everyone's step is the same length; the straggler is the rank the
        # others wait for: the one with the least time inside collectives.
        w = per.sort("comm_us").row(0, named=True)
        others = per.filter(pl.col("rank") != w["rank"])
        extra = float(others["comm_us"].median()) - w["comm_us"]
        if extra / med_all >= th["wait_share"]:
            who = w["rank"]
            how = (f"the other ranks spend a median {S.ms(float(others['comm_us'].median()))} per step in NCCL kernels vs "
                   f"{S.ms(w['comm_us'])} on rank {who}: they wait {S.ms(extra)} per step ({extra / med_all:.0%} of a "
                   f"{S.ms(med_all)} step; threshold {th['wait_share']:.0%}) for it")
    if who is None:
        return None
    facts = {"straggler_rank": who, "ranks": ranks, "shared_steps": shared.len(),
             "median_step_us": {int(r): round(float(x), 1) for r, x in zip(per["rank"], per["step_us"], strict=True)},
             "median_comm_us": {int(r): (None if x is None else round(float(x), 1)) for r, x in zip(per["rank"], per["comm_us"], strict=True)}}
    rows = sp.filter(pl.col("name").str.contains(S.STEP_NAME) & (pl.col("kind") != "gpu_user_annotation")
                     & pl.col("step").is_in(shared.implode()))
    quoted = rows.filter(pl.col("rank") == who).sort("ts_us").head(2).vstack(rows.filter(pl.col("rank") != who).sort("ts_us").head(2))
    text = pl.format("rank {}: {} took {} µs", pl.col("rank"), pl.col("name"), pl.col("dur_us").round(0))
    return Detection(
        summary=f"rank {who} is the straggler among {ranks} rank traces ({shared.len()} shared profiled steps): {how}",
        onset=S.onset(quoted.row(0, named=True)), evidence=S.quote(quoted, text), evidence_count=rows.height,
        causes={"slow_node": 0.6, "uneven_data": 0.4, "hung_rank": 0.2}, confidence=0.65, facts=facts, ranks=[who],
    )

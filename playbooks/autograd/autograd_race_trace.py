"""autograd-race from VizTracer traces: backward calls on several threads open at the same time."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import trace_spans as S
from forensics.playbooks.autograd.autograd_race import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Python entry points of a backward pass as VizTracer names them (func split from `qualname (file:line)`).
BACKWARD = (pl.col("func").is_in(["Tensor.backward", "_engine_run_backward"])
            | ((pl.col("func") == "backward") & pl.col("src_file").str.contains(r"torch/autograd/__init__\.py$"))
            | ((pl.col("func") == "grad") & pl.col("src_file").str.contains(r"torch/autograd/__init__\.py$")))


@PLAYBOOK.detector(("spans",))
def detect_trace(ctx: Context, th: dict) -> list[Detection]:
    """Share of backward time during which two or more threads are inside a backward call."""
    sp = S.spans(ctx)
    if sp.height == 0 or "func" not in sp.columns:
        return []
    bw = sp.filter(BACKWARD.fill_null(False))
    if bw.height == 0:
        return []
    bw = bw.with_columns(pl.coalesce("thread", pl.col("tid").cast(pl.String)).alias("lane"))
    out = []
    for (file, _pid), part in bw.group_by(["file", "pid"], maintain_order=True):
        lanes = part["lane"].unique().to_list()
        if len(lanes) < 2:
            continue
        per_lane = S.merged_intervals(part, ["lane"])
        busy = float(S.union_us(part, ["file"])["union_us"][0])
        both = S.concurrency(per_lane.with_columns(pl.lit(file).alias("file")), ["file"], 2)
        overlap = float(both["concurrent_us"][0]) if both.height else 0.0
        share = overlap / busy if busy else 0.0
        if share <= th["overlap_share"]:
            continue
        # Quote the first backward call of each thread that overlaps another thread's.
        lanes_iv = per_lane.rename({"_s": "o0", "_e": "o1", "lane": "other"})
        pairs = part.join(lanes_iv, how="cross").filter((pl.col("other") != pl.col("lane")) & (pl.col("ts_us") < pl.col("o1"))
                                                        & (pl.col("end_us") > pl.col("o0")))
        quoted = pairs.sort("ts_us").unique(subset=["line"], keep="first")
        # Quote the outermost call of each overlapping backward (not its nested frames).
        outer = quoted.filter(pl.col("func") == "Tensor.backward")
        quoted = (outer if outer.height else quoted).sort("ts_us").head(6)
        names = sorted(str(x) for x in lanes)
        top = part.filter(pl.col("func") == "Tensor.backward")
        calls = (top if top.height else part).group_by("lane").agg(pl.len().alias("n")).sort("lane")
        summary = (f"backward runs on {len(lanes)} threads at once ({', '.join(names)}): {share:.0%} of backward time "
                   f"({S.ms(overlap)} of {S.ms(busy)}) has two or more threads inside backward "
                   f"(threshold {th['overlap_share']:.0%}); {int(calls['n'].sum())} backward calls")
        text = pl.format("{} ({}:{}) on thread {}: {} µs", pl.col("func"), pl.col("src_file"), pl.col("src_line"), pl.col("lane"),
                         pl.col("dur_us").round(1))
        first = quoted.row(0, named=True) if quoted.height else part.row(0, named=True)
        out.append(Detection(
            summary=summary, onset=S.onset(first), evidence=S.quote(quoted if quoted.height else part.head(4), text),
            evidence_count=part.height, causes={"threads_share_graph": 0.9, "inplace_on_saved_tensor": 0.3},
            confidence=0.85,
            facts={"overlap_share": round(share, 3), "overlap_us": round(overlap, 1), "backward_us": round(busy, 1),
                   "threads": names, "calls_per_thread": dict(zip(calls["lane"], calls["n"], strict=True))},
        ))
    return out

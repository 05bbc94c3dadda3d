"""low-gpu-utilization from nvidia-smi / DCGM samples: the median utilisation of each GPU while training."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import gpu_samples as S
from forensics.playbooks.performance.low_gpu_utilization import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection


def _util(df: pl.DataFrame) -> pl.DataFrame:
    """Utilisation in %: nvidia-smi's utilization.gpu, else DCGM's SM-active fraction."""
    return df.with_columns(pl.coalesce(pl.col("utilization_gpu_pct"), pl.col("sm_active_ratio") * 100).alias("_u")).filter(
        pl.col("_u").is_not_null())


@PLAYBOOK.detector(("gpu",))
def detect_gpu_samples(ctx: Context, th: dict) -> Detection | None:
    """Median utilisation per GPU over the training window (start-up, shutdown and idle GPUs excluded)."""
    g = _util(S.physical(ctx))
    if g.height == 0:
        return None
    window = S.training_window(ctx)
    low = []
    seen: set[int] = set()
    for (_file, _source, gpu), part in S.streams(g):
        if gpu in seen:
            continue  # one printout per GPU is enough (the first, in file order)
        w = S.in_window(part, window, th["trim_share"], active=pl.col("_u") > th["idle_pct"])
        if w.height < th["min_samples"]:
            continue
        mem = w.get_column("memory_used_mib").drop_nulls()
        if mem.len() and mem.max() < th["unused_mib"]:
            continue  # a GPU the job does not use
        seen.add(gpu)
        u = w.get_column("_u")
        med = float(u.median())
        if med < th["util_median"]:
            low.append((gpu, w, med, float((u <= th["idle_pct"]).mean()), float((u >= th["busy_pct"]).mean())))
    if not low:
        return None
    low.sort(key=lambda x: x[2])
    worst = low[0]
    rows = pl.concat([w for _g, w, *_ in low], how="diagonal_relaxed")
    med_all = float(rows.get_column("_u").median())
    idle_share = float((rows.get_column("_u") <= th["idle_pct"]).mean())
    busy_share = float((rows.get_column("_u") >= th["busy_pct"]).mean())
    u_all = rows.get_column("_u")
    iqr = float(u_all.quantile(0.75) - u_all.quantile(0.25))
    bursty = iqr >= th["bursty_iqr_pct"]
    causes = {"data_loading": 0.8, "host_device_sync": 0.4} if bursty else {"launch_bound": 0.5, "communication": 0.4, "data_loading": 0.3}
    w0 = worst[1]
    q1, q3 = float(u_all.quantile(0.25)), float(u_all.quantile(0.75))
    pattern = (f"bursty, half the samples between {q1:.0f}% and {q3:.0f}%, idle (<={th['idle_pct']:.0f}%) in {idle_share:.0%}"
               if bursty else f"steady, half the samples between {q1:.0f}% and {q3:.0f}%, busy (>={th['busy_pct']:.0f}%) in {busy_share:.0%}")
    summary = (f"GPU utilisation median {med_all:.0f}% on {S.gpu_ids(rows)} during training ({S.span(w0)}, {rows.height} samples; "
               f"threshold {th['util_median']:.0f}%): {pattern}")
    # Quote the worst GPU's samples around its median, then one sample of each other low GPU.
    near = w0.with_columns((pl.col("_u") - worst[2]).abs().alias("_d")).sort("_d").head(4).sort("line")
    others = pl.concat([w.head(1) for _g, w, *_ in low[1:]], how="diagonal_relaxed") if len(low) > 1 else w0.clear()
    quoted = pl.concat([near.drop("_d"), others], how="diagonal_relaxed")
    return Detection(
        summary=summary,
        onset=S.onset(w0.row(0, named=True)),
        evidence=S.evidence(quoted),
        evidence_count=rows.height,
        causes=causes,
        confidence=0.85 if bursty else 0.7,
        facts={"median_util_pct": round(med_all, 1), "idle_share": round(idle_share, 3), "busy_share": round(busy_share, 3), "iqr_pct": round(iqr, 1),
               "per_gpu_median": {int(gp): round(m, 1) for gp, _w, m, *_ in low}},
    )

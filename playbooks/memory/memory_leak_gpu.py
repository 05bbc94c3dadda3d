"""memory-leak from nvidia-smi samples: memory.used rising steadily under a steady workload."""

from __future__ import annotations

import numpy as np
import polars as pl
from forensics.playbooks import gpu_samples as S
from forensics.playbooks.memory.memory_leak import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope and R² of y against x."""
    slope, icpt = np.polyfit(x, y, 1)
    resid = y - (slope * x + icpt)
    tot = float(((y - y.mean()) ** 2).sum())
    return float(slope), (1 - float((resid**2).sum()) / tot) if tot > 0 else 0.0


@PLAYBOOK.detector(("gpu",))
def detect_gpu_memory(ctx: Context, th: dict) -> Detection | None:
    """Per GPU: linear trend of memory.used over training (after warm-up), good fit, large growth, no plateau."""
    g = S.physical(ctx).filter(pl.col("memory_used_mib").is_not_null())
    if g.height == 0:
        return None
    window = S.training_window(ctx)
    leaks = []
    for (_file, _source, gpu), part in S.streams(g):
        util = pl.col("utilization_gpu_pct").fill_null(100)
        w = S.in_window(part, window, 0.0, active=(util > 5) & (pl.col("memory_used_mib") > 0))
        w = w.slice(int(w.height * th["warmup_share"]))
        if w.height < th["min_points"]:
            continue
        u = w.get_column("utilization_gpu_pct").drop_nulls()
        if u.len() and float(u.median()) < th["steady_util_pct"]:
            continue
        x = S.x_axis(w).to_numpy()
        y = w.get_column("memory_used_mib").to_numpy().astype(float)
        slope, r2 = _fit(x, y)
        growth = slope * float(x[-1] - x[0])
        cap = w.get_column("memory_total_mib").drop_nulls()
        base = float(cap.max()) if cap.len() else max(float(y[0]), 1.0)
        third = len(x) * 2 // 3
        late_slope, _ = _fit(x[third:], y[third:]) if len(x) - third >= 3 else (slope, r2)
        if slope <= 0 or r2 < th["min_r2"] or growth < th["min_growth_share"] * base or late_slope < th["late_slope_share"] * slope:
            continue
        timed = w.get_column("ts").null_count() == 0
        leaks.append({"gpu": gpu, "w": w, "slope": slope, "r2": r2, "growth": growth, "y0": y[0], "y1": y[-1], "timed": timed,
                      "dur": float(x[-1] - x[0])})
    if not leaks:
        return None
    leaks.sort(key=lambda d: -d["growth"])
    top = leaks[0]
    w = top["w"]
    rate = f"+{top['slope'] * 60 / 1024:.2f} GiB/min" if top["timed"] else f"+{top['slope']:.0f} MiB per sample"
    over = f" over {top['dur'] / 60:.1f} min" if top["timed"] else f" over {w.height} samples"
    summary = (f"GPU {top['gpu']} memory.used rose steadily from {top['y0'] / 1024:.1f} GiB to {top['y1'] / 1024:.1f} GiB{over} "
               f"({rate}, R² {top['r2']:.2f}) under a steady load")
    if len(leaks) > 1:
        summary += f"; also {S.gpu_ids(pl.concat([d['w'] for d in leaks[1:]], how='diagonal_relaxed'))}"
    quoted = pl.concat([w.head(1), w.slice(w.height // 2, 1), w.tail(1)])
    return Detection(
        summary=summary,
        onset=S.onset(w.row(0, named=True)),
        evidence=S.evidence(quoted),
        evidence_count=sum(d["w"].height for d in leaks),
        causes={"loss_kept_with_graph": 0.5, "tensors_kept": 0.5},
        confidence=0.85,
        facts={"gpu": int(top["gpu"]), "slope_mib_per_s" if top["timed"] else "slope_mib_per_sample": round(top["slope"], 3),
               "r2": round(top["r2"], 3), "growth_mib": round(top["growth"], 1)},
    )

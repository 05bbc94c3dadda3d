"""low-gpu-utilization from profiler traces: device busy time (union of kernels and copies) per ProfilerStep."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import trace_spans as S
from forensics.playbooks.performance.low_gpu_utilization import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection


def step_busy(sp: pl.DataFrame) -> pl.DataFrame:
    """Per trace, device and step: busy time and the step's wall time on the device.

    Device work of step N (linked through its launch) runs after the host step; the window is the
    longer of the host ProfilerStep and the span of the step's own device activity.
    """
    st = S.steps(sp)
    gpu = sp.filter(pl.col("kind").is_in(S.GPU_ACTIVITY) & pl.col("step").is_not_null())
    if st.height == 0 or gpu.height == 0:
        return pl.DataFrame()
    busy = S.union_us(gpu, ["file", "device", "step"])
    span = gpu.group_by("file", "device", "step").agg((pl.col("end_us").max() - pl.col("ts_us").min()).alias("gpu_span_us"),
                                                      pl.len().alias("activities"))
    out = busy.join(span, on=["file", "device", "step"]).join(st, on=["file", "step"], how="inner")
    return out.with_columns(pl.max_horizontal("step_us", "gpu_span_us").alias("window_us")).with_columns(
        (pl.col("union_us") / pl.col("window_us")).alias("util")).sort("file", "device", "step")


@PLAYBOOK.detector(("spans",))
def detect_trace(ctx: Context, th: dict) -> list[Detection]:
    """Median device utilisation over the profiled steps, per trace and device."""
    sp = S.spans(ctx)
    if sp.height == 0:
        return []
    table = step_busy(sp)
    if table.height == 0:
        return []
    out = []
    limit = th["util_median"] / 100.0
    for (file, device), part in table.group_by(["file", "device"], maintain_order=True):
        if part.height < th["trace_min_steps"]:
            continue
        med = float(part["util"].median())
        if med >= limit:
            continue
        f = sp.filter(pl.col("file") == file)
        kernels = f.filter((pl.col("kind") == "kernel") & (pl.col("device") == device))
        comm = kernels.filter(pl.col("name").str.contains(S.COMM_KERNEL))
        loader = f.filter(pl.col("name").str.contains(r"DataLoader.*__next__"))
        syncs = f.filter(pl.col("name").is_in(["aten::_local_scalar_dense"]) | pl.col("name").str.contains(r"Synchronize$"))
        steps_n = part.height
        med_kernel = float(kernels["dur_us"].median()) if kernels.height else 0.0
        comm_share = float(comm["dur_us"].sum()) / max(float(kernels["dur_us"].sum()), 1e-9) if kernels.height else 0.0
        causes = {
            "data_loading": min(0.9, 0.2 + float(loader["dur_us"].sum()) / max(float(part["step_us"].sum()), 1e-9)),
            "host_device_sync": min(0.8, 0.1 + syncs.height / steps_n / 20),
            "communication": min(0.8, 0.1 + comm_share),
            "launch_bound": 0.7 if med_kernel < 10 else 0.2,
        }
        worst = part.sort("util").row(0, named=True)
        rank = part["rank"][0]
        who = f"rank {rank} " if rank is not None else ""
        summary = (f"{who}GPU {device} busy a median {med:.0%} of each profiled step ({steps_n} steps; threshold "
                   f"{limit:.0%}): step {worst['step']} kept it busy {S.ms(worst['union_us'])} of {S.ms(worst['window_us'])}; "
                   f"{kernels.height} kernels, median {med_kernel:.1f} µs, communication {comm_share:.0%} of kernel time")
        quoted = f.filter(pl.col("name").str.contains(S.STEP_NAME) & (pl.col("kind") != "gpu_user_annotation")).join(
            part.select("step", "util", "union_us"), on="step").sort("util").head(4)
        text = pl.format("{} ({} µs): GPU busy {} µs = {}%", pl.col("name"), pl.col("dur_us").round(0), pl.col("union_us").round(0),
                         (pl.col("util") * 100).round(1))
        out.append(Detection(
            summary=summary, onset=S.onset(quoted.sort("ts_us").row(0, named=True)), evidence=S.quote(quoted, text),
            evidence_count=steps_n, causes=causes, confidence=0.8,
            facts={"median_util": round(med, 3), "device": device, "steps": steps_n,
                   "per_step_util": {int(s): round(float(u), 3) for s, u in zip(part["step"], part["util"], strict=True)},
                   "median_kernel_us": round(med_kernel, 2), "comm_share_of_kernel_time": round(comm_share, 3)},
            ranks=[rank] if rank is not None else [],
        ))
    return out

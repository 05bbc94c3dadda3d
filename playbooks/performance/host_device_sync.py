"""host-device-sync: the host waits for the device inside every step (.item(), .cpu(), explicit synchronize)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import trace_spans as S
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

# Host calls that block until the device has caught up. `aten::item` calls
# `aten::_local_scalar_dense`, so only the latter is counted for it.
SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero")
SYNC_RUNTIME = r"^(cuda|hip)(StreamSynchronize|DeviceSynchronize|EventSynchronize)$"

PLAYBOOK = declare(
    Playbook(
        id="host-device-sync",
        title="Host-device synchronisation inside every step",
        category="performance",
        severity=Severity.MEDIUM,
        tables=("spans",),
        explains=("low-gpu-utilization", "step-time-regression"),
        causes=(
            Cause("item_every_step", "`.item()` / `.cpu()` / printing a tensor inside the step (logging, NaN checks, accumulation)",
                  verify="Profiler: aten::item / aten::_local_scalar_dense per ProfilerStep and the Python line calling it (with_stack=True)",
                  fix="Accumulate on the device (`running += loss.detach()`), read values every N steps", prior=0.6),
            Cause("explicit_sync", "Explicit torch.cuda.synchronize() / stream or event synchronize in the loop",
                  verify="Profiler: cudaDeviceSynchronize / cudaStreamSynchronize calls per step",
                  fix="Remove the synchronize, or keep it only for timing runs", prior=0.25),
            Cause("data_dependent_shapes", "Ops whose output shape depends on data (nonzero, masked_select, unique) force a sync",
                  verify="Profiler: aten::nonzero per step", fix="Fixed-shape alternatives (torch.where with masks), or move them off the hot path", prior=0.15),
        ),
        verify="Count synchronising calls per ProfilerStep in a torch.profiler trace; torch.cuda.set_sync_debug_mode('warn')",
        fix="Log less often, keep values on the device, avoid data-dependent shapes in the step",
        thresholds={
            "syncs_per_step": Threshold(4, "median synchronising calls per profiled step at or above which the step is sync-bound", "ours (one logged loss per step is normal)"),
            "min_steps": Threshold(3, "profiled steps needed before judging", "ours"),
            "idle_share": Threshold(0.05, "on GPU traces, share of step time the GPU idles after syncs (until the next kernel) needed to fire", "ours"),
        },
        doc="""\
## Symptom
Frequent synchronisations inside the training step: `aten::item` -> `aten::_local_scalar_dense`,
`aten::nonzero`, `cudaStreamSynchronize` / `cudaDeviceSynchronize` several times per ProfilerStep,
each followed by the GPU idling until the host launches work again.

## Why it matters
A sync drains the GPU queue: the host stops running ahead, so every sync costs the launch latency
of the next kernels; a handful per step can cost more than the compute.

## Evidence
`spans` from torch.profiler traces: synchronising ops and runtime calls per `ProfilerStep#N`, and
on GPU traces the idle gap from the end of each sync to the next kernel.

## Known false positives
One `.item()` per step for logging is normal and stays under the default threshold of 4 per step.
On CPU-only traces the calls are counted but there is no GPU idle to measure.
""",
    )
)


def sync_rows(sp: pl.DataFrame) -> pl.DataFrame:
    """Synchronising host calls with a step; a runtime sync made by a counted op (item's own
    cudaStreamSynchronize) is part of that call, not another one."""
    ops = sp.filter(pl.col("name").is_in(SYNC_OPS) & pl.col("step").is_not_null())
    rt = sp.filter(pl.col("name").str.contains(SYNC_RUNTIME) & pl.col("step").is_not_null())
    if ops.height and rt.height:
        parent = ops.select("file", "tid", pl.col("ts_us").alias("p0"), pl.col("end_us").alias("p1")).sort("p0")
        j = rt.sort("ts_us").join_asof(parent, left_on="ts_us", right_on="p0", by=["file", "tid"], strategy="backward",
                                       check_sortedness=False)
        rt = j.filter(pl.col("p1").is_null() | (pl.col("end_us") > pl.col("p1"))).drop("p0", "p1")
    return pl.concat([ops, rt], how="diagonal_relaxed").sort("file", "ts_us")


def gpu_idle_after(sp: pl.DataFrame, syncs: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Per file and step: time (union) from the end of each sync to the next device activity, within the step."""
    gpu = sp.filter(pl.col("kind").is_in(S.GPU_ACTIVITY)).select("file", pl.col("ts_us").alias("k0")).sort("k0")
    if gpu.height == 0 or syncs.height == 0:
        return pl.DataFrame()
    j = (syncs.select("file", "step", "end_us").sort("end_us")
         .join_asof(gpu, left_on="end_us", right_on="k0", by="file", strategy="forward", check_sortedness=False)
         .join(steps.select("file", "step", "s1"), on=["file", "step"], how="inner")
         .with_columns(pl.min_horizontal("k0", "s1").alias("gap_end"))
         .filter(pl.col("gap_end") > pl.col("end_us")))
    if j.height == 0:
        return pl.DataFrame()
    return S.union_us(j, ["file", "step"], start="end_us", end="gap_end").rename({"union_us": "idle_after_us"})


@PLAYBOOK.detector(("spans",))
def detect_trace(ctx: Context, th: dict) -> list[Detection]:
    """Median synchronising calls per profiled step, per trace."""
    sp = S.spans(ctx)
    if sp.height == 0:
        return []
    # A trace with no device work at all (no kernel, copy or CUDA runtime call) was recorded without a GPU:
    # `.item()` there reads host memory and waits for nothing, so its calls are no evidence of a sync.
    on_gpu = sp.filter(pl.col("kind").is_in([*S.GPU_ACTIVITY, "cuda_runtime", "cuda_driver"])).get_column("file").unique()
    st = S.steps(sp)
    syncs = sync_rows(sp).filter(pl.col("file").is_in(on_gpu.implode()))
    if st.height == 0 or syncs.height == 0:
        return []
    per = syncs.group_by("file", "step").agg(pl.len().alias("n"))
    table = st.join(per, on=["file", "step"], how="left").with_columns(pl.col("n").fill_null(0))
    idle = gpu_idle_after(sp, syncs, st)
    if idle.height:
        table = table.join(idle, on=["file", "step"], how="left")
    out = []
    for (file,), part in table.group_by(["file"], maintain_order=True):
        if part.height < th["min_steps"]:
            continue
        med = float(part["n"].median())
        if med < th["syncs_per_step"]:
            continue
        rows = syncs.filter(pl.col("file") == file)
        top = rows.group_by("name").agg(pl.len().alias("calls")).sort("calls", descending=True)
        sites = ", ".join(f"{r['name']} x{r['calls']}" for r in top.head(3).iter_rows(named=True))
        idle_share = None
        if "idle_after_us" in part.columns and part["idle_after_us"].is_not_null().any():
            idle_share = float(part["idle_after_us"].fill_null(0).sum()) / float(part["step_us"].sum())
        if idle_share is not None and idle_share < th["idle_share"]:
            continue  # the syncs cost the GPU little: the host is still ahead
        explicit = rows.filter(pl.col("name").str.contains(SYNC_RUNTIME)).height
        item = rows.filter(pl.col("name") == "aten::_local_scalar_dense").height
        nonzero = rows.filter(pl.col("name") == "aten::nonzero").height
        total = max(rows.height, 1)
        causes = {"item_every_step": 0.3 + 0.6 * item / total, "explicit_sync": 0.2 + 0.6 * explicit / total,
                  "data_dependent_shapes": 0.1 + 0.6 * nonzero / total}
        rank = part["rank"][0]
        gpu_txt = f"; the GPU then idles {idle_share:.1%} of step time until the next kernel" if idle_share is not None else ""
        who = f"rank {rank}: " if rank is not None else ""
        summary = (f"{who}{med:.0f} host-device syncs per step (median over "
                   f"{part.height} profiled steps; threshold {th['syncs_per_step']:.0f}): {sites}{gpu_txt}")
        quoted = rows.sort("ts_us").head(6)
        out.append(Detection(
            summary=summary, onset=S.step_onset(sp, file, quoted["step"][0]) or S.onset(quoted.row(0, named=True)), evidence=S.quote(quoted, S.span_text()),
            evidence_count=rows.height, causes=causes, confidence=0.85,
            facts={"median_syncs_per_step": med, "steps": part.height, "sync_calls": dict(zip(top["name"], top["calls"], strict=True)),
                   "gpu_idle_after_sync_share": None if idle_share is None else round(idle_share, 4)},
            ranks=[rank] if rank is not None else [],
        ))
    return out

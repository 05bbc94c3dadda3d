"""kernel-launch-bound: many tiny kernels; the host spends longer launching them than the GPU runs them."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import trace_spans as S
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

LAUNCH = r"^(cudaLaunchKernel|cudaLaunchKernelExC|cuLaunchKernel|cuLaunchKernelEx|hipLaunchKernel|hipExtModuleLaunchKernel|hipModuleLaunchKernel|cudaLaunchCooperativeKernel)$"

PLAYBOOK = declare(
    Playbook(
        id="kernel-launch-bound",
        title="GPU starved by kernel launch overhead",
        category="performance",
        severity=Severity.MEDIUM,
        tables=("spans",),
        explains=("low-gpu-utilization",),
        causes=(
            Cause("small_batch", "Batch or model too small: each kernel finishes before the next is launched",
                  verify="Profiler: median kernel duration and GPU busy share; try a larger batch",
                  fix="Larger batch per GPU, or fewer GPUs", prior=0.45),
            Cause("unfused_ops", "Many unfused elementwise ops, each its own kernel",
                  verify="Profiler: count of short elementwise kernels per step",
                  fix="torch.compile, fused optimizers (foreach/fused=True), fused layers", prior=0.35),
            Cause("no_cuda_graphs", "Per-step launch overhead that CUDA graphs would remove",
                  verify="Time a step with torch.cuda.graphs / torch.compile(mode='reduce-overhead')",
                  fix="Capture the step in a CUDA graph", prior=0.2),
        ),
        verify="torch.profiler: compare total cudaLaunchKernel time with total kernel time; GPU busy share between launches",
        fix="Larger batches, torch.compile / fused ops, CUDA graphs",
        thresholds={
            "min_kernels": Threshold(50, "kernels a trace needs before it is judged", "ours"),
            "busy_share": Threshold(0.5, "GPU busy share (union of device activity over its time window) below which the GPU counts as starved", "ours; PLAYBOOKS.md low-gpu-utilization target"),
            "launch_ratio": Threshold(1.0, "total launch-call time relative to total kernel time at or above which launching dominates", "PLAYBOOKS.md kernel-launch-bound (launch overhead exceeds kernel time)"),
        },
        doc="""\
## Symptom
Many tiny kernels: the host's kernel-launch calls (cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel)
take as long as or longer than the kernels themselves, and the GPU sits idle between launches.

## Why it matters
The GPU can only run as fast as the host feeds it; at a few µs per kernel, launch overhead caps
throughput no matter how fast the GPU is.

## Evidence
`spans` from torch.profiler traces: runtime/driver launch calls against kernel durations and the
union of device activity.

## Known false positives
CUDA-graph replays launch many kernels from one call and are not launch-bound; inference traces of
tiny models are launch-bound by nature.
""",
    )
)


@PLAYBOOK.detector(("spans",))
def detect_trace(ctx: Context, th: dict) -> list[Detection]:
    """Launch time vs kernel time and GPU busy share, per trace and device."""
    sp = S.spans(ctx)
    if sp.height == 0:
        return []
    kernels = sp.filter(pl.col("kind") == "kernel")
    if kernels.height < th["min_kernels"]:
        return []
    out = []
    for (file,), k in kernels.group_by(["file"], maintain_order=True):
        if k.height < th["min_kernels"]:
            continue
        f = sp.filter(pl.col("file") == file)
        launches = f.filter(pl.col("name").str.contains(LAUNCH))
        dev = f.filter(pl.col("kind").is_in(S.GPU_ACTIVITY))
        busy = float(S.union_us(dev, ["file"])["union_us"][0])
        window = float(dev["end_us"].max() - dev["ts_us"].min())
        share = busy / window if window > 0 else 1.0
        ktime, ltime = float(k["dur_us"].sum()), float(launches["dur_us"].sum())
        ratio = ltime / ktime if ktime > 0 else float("inf")
        if share >= th["busy_share"] or ratio < th["launch_ratio"] or launches.height == 0:
            continue
        med = float(k["dur_us"].median())
        tiny = float((k["dur_us"] < 10).mean())
        rank = k["rank"][0]
        who = f"rank {rank}: " if rank is not None else ""
        summary = (f"{who}{k.height} kernels, median {med:.1f} µs ({tiny:.0%} under 10 µs); launching them took "
                   f"{S.ms(ltime)} on the host vs {S.ms(ktime)} of kernel time ({ratio:.1f}x, threshold {th['launch_ratio']:.1f}x); "
                   f"the GPU is busy {share:.0%} of its active window (threshold {th['busy_share']:.0%})")
        quoted = launches.sort("dur_us", descending=True).head(3).vstack(k.sort("ts_us").head(3).select(launches.columns))
        out.append(Detection(
            summary=summary, onset=S.step_onset(sp, file) or S.onset(k.sort("ts_us").row(0, named=True)), evidence=S.quote(quoted, S.span_text()),
            evidence_count=k.height + launches.height,
            causes={"small_batch": 0.6, "unfused_ops": 0.4 + 0.4 * tiny, "no_cuda_graphs": 0.4}, confidence=0.75,
            facts={"kernels": k.height, "median_kernel_us": round(med, 2), "tiny_kernel_share": round(tiny, 3),
                   "launch_us": round(ltime, 1), "kernel_us": round(ktime, 1), "launch_to_kernel": round(ratio, 2),
                   "gpu_busy_share": round(share, 3)},
            ranks=[rank] if rank is not None else [],
        ))
    return out

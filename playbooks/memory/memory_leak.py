"""memory-leak: device or host memory grows steadily across steps (declaration; detectors per evidence source)."""

from __future__ import annotations

from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.model import Cause, Severity

PLAYBOOK = declare(
    Playbook(
        id="memory-leak",
        title="Memory grows steadily across steps",
        category="memory",
        severity=Severity.HIGH,
        tables=("metrics", "gpu"),
        explains=("cuda-oom", "host-memory-exhaustion", "step-time-regression"),
        causes=(
            Cause("loss_kept_with_graph", "A loss or output is accumulated without .item()/.detach(), keeping every step's graph alive",
                  verify="Print torch.cuda.memory_allocated() each step; search for `total_loss += loss` without .item()",
                  fix="total_loss += loss.item(); .detach() anything kept across steps", prior=0.45),
            Cause("tensors_kept", "Tensors appended to a list or cache every step (metrics, predictions, hooks)",
                  verify="torch.cuda.memory_snapshot() / tracemalloc: which allocation site grows",
                  fix="Move kept tensors to CPU with .detach().cpu(), bound caches, remove leaking hooks", prior=0.35),
            Cause("pinned_or_host_buffers", "Pinned-memory or host buffers grow (prefetch queues, pin_memory threads)",
                  verify="Track process RSS and pinned memory per step",
                  fix="Bound prefetch_factor; reuse buffers", prior=0.2),
        ),
        verify="print torch.cuda.memory_allocated() per step",
        fix=".item(), .detach(), drop references",
        thresholds={
            "min_r2": Threshold(0.8, "goodness of fit (R²) of the linear trend of memory against step", "PLAYBOOKS.md memory-leak (good linear fit)"),
            "min_growth_share": Threshold(0.10, "total growth over the window as a share of the starting level (or of capacity for GPU memory)", "ours"),
            "min_points": Threshold(10, "samples needed before a trend is judged", "ours"),
            # warmup_share and late_slope_share serve the gpu and the metrics detector alike (both modules used
            # to add them, with two wordings; the gpu module loaded first, so its wording is the one kept).
            "warmup_share": Threshold(0.1, "share of the training samples at the start left out: the caching allocator fills up there", "ours"),
            "late_slope_share": Threshold(0.5, "slope over the last third as a share of the overall slope below which the growth has plateaued", "ours"),
            "short_min_points": Threshold(4, "samples of a short series (fewer than min_points) that decide when memory rises at every one of them", "issue 13 (short series decide when the signal is blatant)"),
            "short_growth_share": Threshold(0.5, "growth over a short series as a share of its first sample", "ours"),
            "steady_util_pct": Threshold(50, "median utilisation (%) for the workload to count as steady (a busy GPU)", "ours"),
        },
        doc="""\
## Symptom
Device or host memory (logged allocated/reserved/RSS series, host `used` memory of pasted procps `free`
tables, or nvidia-smi memory.used under a steady workload) grows steadily across steps: positive slope,
good linear fit, no plateau. A short series (4 to 9 samples: `free -s 1800` printed a few times) decides
when memory rises at every sample and by half its first value or more.

## Why it matters
A leak ends in an out-of-memory crash hours into the run; the OOM's own numbers then look like plain demand.

## Evidence
`metrics` (`mem_allocated_mib`, `mem_reserved_mib`, RSS) and `gpu` (`memory_used_mib`).

## Known false positives
Warm-up growth that plateaus (the caching allocator filling, first evaluation) is not a leak: the fit
is judged after the plateau check. A peak counter (`max`/`peak` memory) only ever rises, so a short series
of one is not judged.
""",
    )
)

"""low-gpu-utilization: the GPU is mostly idle during training (declaration; detectors per evidence source)."""

from __future__ import annotations

from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.model import Cause, Severity

PLAYBOOK = declare(
    Playbook(
        id="low-gpu-utilization",
        title="GPU mostly idle during training",
        category="performance",
        severity=Severity.MEDIUM,
        tables=("gpu", "spans"),
        explains=(),
        causes=(
            Cause("data_loading", "The input pipeline cannot keep up", verify="Profile one step: DataLoader __next__ share of step time",
                  fix="More DataLoader workers, pin_memory, prefetch, cache preprocessing", prior=0.4, playbook="dataloader-bottleneck"),
            Cause("host_device_sync", "Host-device synchronisations every step stall the GPU", verify="Count cudaStreamSynchronize / aten::item per step in a profiler trace",
                  fix="Log less often; keep values on the device", prior=0.25, playbook="host-device-sync"),
            Cause("communication", "Waiting on collectives that do not overlap compute", verify="HTA comm/compute overlap on a profiler trace",
                  fix="Bucket tuning, overlap, fewer/larger collectives", prior=0.2, playbook="comm-compute-no-overlap"),
            Cause("launch_bound", "Batch too small: kernels are tiny and launch overhead dominates", verify="Profiler kernel statistics: median kernel duration",
                  fix="Larger batch, torch.compile / CUDA graphs", prior=0.15, playbook="kernel-launch-bound"),
        ),
        verify="nvidia-smi dmon -s u; a torch.profiler trace of a few steps",
        fix="See the ranked cause",
        thresholds={
            "util_median": Threshold(50, "median GPU utilisation (%) during the training window below which the GPU counts as underused", "PLAYBOOKS.md low-gpu-utilization (target >70%)"),
            "trim_share": Threshold(0.1, "share of samples at the start and end of the window excluded as start-up and shutdown", "ours"),
            "min_samples": Threshold(20, "samples of a GPU during training needed before its utilisation is judged", "ours"),
            "idle_pct": Threshold(10, "utilisation (%) at or below which a sample counts as idle (waiting)", "ours"),
            "busy_pct": Threshold(70, "utilisation (%) at or above which a sample counts as busy", "PLAYBOOKS.md low-gpu-utilization (target >70%)"),
            "bursty_iqr_pct": Threshold(20, "interquartile range of utilisation (percentage points) above which the load comes in bursts (waiting for input) rather than steadily", "ours"),
            "unused_mib": Threshold(1024, "memory used (MiB) below which a GPU is taken as not used by the job at all", "ours"),
            "trace_min_steps": Threshold(3, "profiled steps with device activity needed before judging a trace", "ours"),
        },
        doc="""\
## Symptom
Median GPU utilisation during training (excluding start-up and shutdown) below 50%, or kernel busy
time a small share of each profiled step.

## Why it matters
An idle GPU is paid for anyway; at 25% utilisation the run takes four times as long as it could.

## Evidence
`gpu` (utilization per sample per GPU) and `spans` (kernel busy time per step).

## Known false positives
Idle during start-up, evaluation or checkpointing is not a finding: the window is trimmed and only
the training phase is judged.
""",
    )
)

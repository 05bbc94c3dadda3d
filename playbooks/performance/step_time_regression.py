"""step-time-regression: step time outliers or a steady rise over the run (declaration; detectors per source)."""

from __future__ import annotations

from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.model import Cause, Severity

PLAYBOOK = declare(
    Playbook(
        id="step-time-regression",
        title="Steps get slower",
        category="performance",
        severity=Severity.MEDIUM,
        tables=("metrics", "spans"),
        explains=(),
        codes=("allocator_cache_flush", "memory_summary_alloc_retries"),
        causes=(
            Cause("gc_or_checkpoint", "Periodic stalls: garbage collection, checkpoint saving, evaluation",
                  verify="Do the slow steps line up with save/eval steps or gc.collect?",
                  fix="Async checkpointing; gc.freeze() after setup; move eval off the critical path", prior=0.3),
            Cause("memory_pressure", "Memory pressure (allocator retries, swapping) slows steps as memory grows",
                  verify="torch.cuda.memory_stats()['num_alloc_retries']; host swap usage",
                  fix="Fix the growth; reduce batch", prior=0.25, playbook="memory-leak"),
            Cause("throttling", "The GPU throttles (thermal or power)", verify="nvidia-smi -q -d PERFORMANCE",
                  fix="Fix cooling/power; move the job", prior=0.25, playbook="gpu-throttling"),
            Cause("straggler", "One rank slows everyone", verify="Per-rank step times", fix="See rank-straggler", prior=0.2,
                  playbook="rank-straggler"),
            Cause("growing_work", "Each step does more work than the last (a cache, queue or history that grows without bound)",
                  verify="Profile an early and a late step and compare where the time goes",
                  fix="Bound the structure (a capped queue), or compute the statistic incrementally", prior=0.3),
        ),
        verify="Plot per-step time; correlate with checkpoints, memory and clocks",
        fix="As the ranked cause says",
        thresholds={
            "rise_ratio": Threshold(1.3, "late-run median step time relative to early-run median that counts as a regression", "ours"),
            "outlier_mads": Threshold(5, "robust z-score (MADs above the rolling median) of an outlier step", "PLAYBOOKS.md loss-spike style; anchors.md"),
            "min_steps": Threshold(20, "steps needed before judging a trend", "ours"),
            "min_r2": Threshold(0.5, "goodness of fit of the linear trend for a steady rise", "ours"),
            "min_outliers": Threshold(10, "outlier steps needed (and 5% of steps)", "anchors.md SMD StepOutlier (> 10 outliers), with median/MAD instead of mean/sigma"),
            "min_step_ms": Threshold(10, "median step time below which outliers are not judged (timer and scheduler jitter dominate)", "ours"),
            "outlier_ratio": Threshold(2.0, "an outlier step also takes at least this many times the rolling median", "ours"),
            "warmup_points": Threshold(3, "first logged steps left out (compilation, warm-up)", "ours"),
            "short_min_points": Threshold(6, "logged step times from which a short paste is judged (fewer than min_steps)", "issue 13 (decide on a few points when blatant)"),
            "tiny_min_points": Threshold(3, "fewest logged step times judged (3 to short_min_points - 1: every one slower than the last)", "issue 13"),
            "short_rise_ratio": Threshold(2.0, "late/early median ratio a short series must reach (noise of +-30% cannot)", "issue 13"),
            "short_min_r2": Threshold(0.9, "fit of the linear trend a short series must reach (a steady rise, not a few slow points)", "ours"),
            "short_min_rising": Threshold(0.8, "share of intervals of a short series that are slower than the one before", "ours"),
            "shift_tail": Threshold(2, "last logged step times that must all sit above the steady first half (a level shift)", "ours"),
            "shift_ratio": Threshold(0.03, "rise of the tail over every point of the first half that counts as a level shift", "ours; bigscience tr11-176B chronicles (a 5% drop from one slow GPU)"),
            "shift_steady_tol": Threshold(0.01, "spread of the first half over its median under which the run is steady enough to show a few-percent shift", "ours"),
            "trace_min_steps": Threshold(5, "profiled steps a trace needs before its step times are judged", "ours (torch.profiler schedules record a few active steps)"),
            "trace_outlier_ratio": Threshold(3.0, "a profiled step this many times the trace's median step time is an outlier", "ours"),
        },
        doc="""\
## Symptom
Step-time outliers (far above the rolling median) or a steady rise of step time over the run.

## Why it matters
A run that slows by 30% costs 30% more; periodic stalls point at checkpoints, GC or throttling.

## Evidence
`metrics` (`step_time_ms`, elapsed time per iteration) and `spans` (ProfilerStep durations).

## Known false positives
The first steps (compilation, warm-up) and evaluation steps are excluded. A short paste (6 to 19 logged
step times) is judged without its first point and only on a blatant, steady rise: the late median at
least twice the early one, a linear fit of R² 0.9 or more, and at least 80% of the intervals slower
than the one before (a slow first interval or noise of +-30% stays quiet). A paste of 3 to 5 step
times is judged with its first point: each one slower than the one before, the last at least twice the
first, on a line (R² 0.9); warm-up (falling times), one slow eval/checkpoint step or noise stays quiet.
""",
    )
)

"""dataloader-bottleneck: waiting for data takes a large share of step time (declaration; detectors per source)."""

from __future__ import annotations

from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.model import Cause, Severity

PLAYBOOK = declare(
    Playbook(
        id="dataloader-bottleneck",
        title="Training waits for the data loader",
        category="performance",
        severity=Severity.MEDIUM,
        tables=("metrics", "spans", "events"),
        explains=("low-gpu-utilization", "step-time-regression", "rank-straggler"),
        codes=("data_queue_wait",),
        causes=(
            Cause("too_few_workers", "num_workers=0 or too few workers for the per-sample work",
                  verify="grep num_workers in the launch config; top -H: are loader processes at 100% CPU?",
                  fix="DataLoader(num_workers=<idle cores per GPU>, persistent_workers=True)", prior=0.45),
            Cause("heavy_transforms", "Heavy per-sample transforms (decoding, augmentation, tokenisation) on the CPU",
                  verify="Time one __getitem__; profile the worker",
                  fix="Pre-process offline, cache decoded samples, move augmentation to the GPU", prior=0.35),
            Cause("no_prefetch", "No pinned memory / prefetch, so copies and loading are not overlapped",
                  verify="Profiler: Memcpy HtoD (Pageable) before each step",
                  fix="pin_memory=True, .to(device, non_blocking=True), prefetch_factor", prior=0.2),
        ),
        verify="Profile one step: DataLoader __next__ share of step time; MetricLogger data time vs time",
        fix="More workers, prefetch, cache preprocessing",
        thresholds={
            "data_share": Threshold(0.20, "share of step time spent waiting for data", "PLAYBOOKS.md dataloader-bottleneck (default >20%)"),
            "min_steps": Threshold(5, "steps needed before the median share is judged", "ours"),
            "blatant_share": Threshold(0.5, "share of the summed step time (or of the running averages) that decides from a few points", "issue 13 (decide on a few points when blatant)"),
            "short_min_points": Threshold(2, "logged points, warm-up left out, needed for the summed share", "ours"),
            "warmup_steps": Threshold(20, "first iterations of training (by the logged step) a few-point summed share leaves out", "detectron2 CommonMetricPrinter (data_time averaged over a 20-iteration window)"),
            "warmup_batches": Threshold(3, "first batches of each epoch left out where the log prints the batch index", "ours"),
            "stall_ms": Threshold(10000, "loader wait (ms) of the first batch and of a later one that make a recurring stall when no step time is logged", "ours; mozilla/TTS#407 (~120 s a batch)"),
            "stall_repeat": Threshold(0.5, "later wait over the first batch's wait that counts as the stall coming back", "ours"),
            "avg_min_batches": Threshold(500, "batch of the epoch from which a running average is judged when the epoch's first batch is not logged", "ours; one slow first batch weighs under 1/500 of it"),
        },
        doc="""\
## Symptom
Data-loader `__next__` spans (profiler) or logged data time (MetricLogger `data:` vs `time:`, the
ImageNet example's `Data` vs `Time`) take a large share of step time (default more than 20%) while the
GPU idles. Caffe counts its waits itself: `Data layer prefetch queue empty` more than once in a log (it is
logged for the first wait and then once per 1000 more) is a note (low): a count says nothing of the waits' length.

## Why it matters
Every millisecond waiting for data is lost throughput; more GPUs do not help.

## Evidence
`spans` (DataLoader `__next__` within `ProfilerStep#N`) and `metrics` (`data_time_ms`, `step_time_ms`).

## Known false positives
The first logged point of each rank and of each epoch (workers starting), and the first 3 batches of an
epoch where the log prints the batch index, are left out. With fewer than 5 points the summed data time
must be at least half the summed step time, and points of the run's first 20 iterations do not count
(a paste of a run's first iterations shows its warm-up: detectron2 / LiBai `data_time` is a 20-iteration
window average that still holds the first batches while `time` leaves them out); a median share between 20% and half the step is reported
at low severity only (the loader costs some throughput but does not dominate). Where a log's data time
exceeds its step time, that step time excludes the data wait and the share is data / (data + step); the running averages (`Data 0.000 (2.393)`) are judged only
500 batches into an epoch or with the epoch's first batch logged and taken out. Caffe's first
`Data layer prefetch queue empty` (the net's start, nothing prefetched yet) and DataReader's `Waiting for data` (the
prefetch thread waiting on the disk reader, not the solver on a batch) are no finding; nor is the time between
`debug_info` lines, which Caffe prints only on display iterations (the gap spans `display` iterations).
""",
    )
)

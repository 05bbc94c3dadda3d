"""rank-straggler: one rank is consistently slower than the others (declaration; detectors per source)."""

from __future__ import annotations

from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.model import Cause, Severity

PLAYBOOK = declare(
    Playbook(
        id="rank-straggler",
        title="One rank is consistently slower",
        category="performance",
        severity=Severity.MEDIUM,
        tables=("metrics", "spans"),
        explains=("nccl-timeout", "low-gpu-utilization"),
        causes=(
            Cause("slow_node", "The node is slower (other load, slower or throttled GPU, CPU contention)",
                  verify="Per-rank step times; nvidia-smi -q -d PERFORMANCE on the slow rank's node",
                  fix="Replace or drain the node; pin processes to CPUs", prior=0.45, playbook="gpu-throttling"),
            Cause("uneven_data", "The rank gets more or longer samples", verify="Log per-rank tokens/samples per step",
                  fix="Balance the sampler (length-grouped, equal tokens per rank)", prior=0.35),
            Cause("hung_rank", "The rank stalls intermittently (I/O, data loader)", verify="py-spy dump during a stall",
                  fix="As the stall's cause says", prior=0.2, playbook="silent-hang"),
        ),
        verify="Compare per-rank step times (or ProfilerStep durations per rank trace)",
        fix="Replace the slow node or balance data",
        thresholds={
            "slow_ratio": Threshold(1.2, "a rank's median step time relative to the median of all ranks", "ours; anchors.md straggler"),
            "min_steps": Threshold(5, "steps per rank needed before comparing", "ours"),
            "min_gap_ms": Threshold(1.0, "smallest absolute gap (ms) between the slow rank's median and the others' that counts", "ours; CPU timer noise"),
            "trace_min_steps": Threshold(2, "ProfilerSteps that rank traces must share before they are compared", "ours"),
            "wait_share": Threshold(0.1, "extra NCCL time per step of the other ranks, as a share of step time, that marks the rank they wait for", "ours; HTA get_potential_stragglers"),
        },
        doc="""\
## Symptom
One rank's step time (logged per rank, or ProfilerStep durations in per-rank traces) is consistently
higher than the others' (default 1.2x the median rank).

## Why it matters
Synchronous training runs at the speed of the slowest rank: every other GPU waits for it.

## Evidence
`metrics` (`step_time_ms` per rank) and `spans` (ProfilerStep spans per rank trace).

## Known false positives
Rank 0 doing extra logging or evaluation is slower by design; single spikes are `step-time-regression`.
""",
    )
)

"""sampler-duplication: every rank logs the same loss at the same step, so every rank trains on the same data."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

PLAYBOOK = declare(
    Playbook(
        id="sampler-duplication",
        title="Every rank sees the same data",
        category="distributed",
        severity=Severity.HIGH,
        tables=("metrics",),
        explains=(),
        causes=(
            Cause("no_distributed_sampler", "The DataLoader has no DistributedSampler, so every rank iterates the whole dataset in the same order",
                  verify="Log the first batch's labels / sample ids on every rank", fix="DataLoader(..., sampler=DistributedSampler(ds)) and sampler.set_epoch(epoch)",
                  prior=0.7),
            Cause("sampler_not_passed", "A distributed sampler exists but is not the one the loader uses (FSDP/accelerate wrappers, a custom loader)",
                  verify="print(type(loader.sampler)) on every rank", fix="Pass the sampler to the loader actually iterated", prior=0.3),
        ),
        verify="Log the first batch's labels (or sample ids) per rank",
        fix="Pass a DistributedSampler and call set_epoch every epoch",
        thresholds={
            "identical_share": Threshold(0.9, "share of common steps at which every rank logs exactly the same loss", "ours; PLAYBOOKS.md sampler-duplication (per-rank losses identical before reduction)"),
            "min_common_steps": Threshold(5, "steps logged by at least two ranks needed", "ours"),
        },
        doc="""\
## Symptom
At least 90% of the steps logged by two or more ranks carry exactly the same per-rank training loss
on every rank. Different data shards never give bit-identical losses; the same batches on identical
replicas always do.

## Why it matters
N GPUs train on the same samples: the effective batch is 1/N of what the config says and each epoch
sees 1/N of the data N times.

## Evidence
`metrics` `loss` per rank (rank from the `[rankN]:`/`[defaultN]:` prefixes or per-rank files).
Values that are identical by design after all-reduce (grad norm, parameter norm) are not used.

## Known false positives
A loop that all-reduces the loss before printing it on every rank logs identical values by design;
check whether the printed loss is the reduced one.
""",
    )
)


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Identical per-rank losses at equal steps."""
    if not M.several_ranks(ctx, M.LOSS, finite=True):
        return None
    # Every rank's values of a window of steps at a time decide; the rows quoted are read at the end.
    ident = M.ts.identical_over(M.series_steps(ctx, M.LOSS, finite=True))
    if len(ident.ranks) < 2:
        return None
    if ident.common_steps < th["min_common_steps"] or ident.fraction < th["identical_share"]:
        return None
    step = ident.first_identical
    later = ident.last_identical
    rows = M.series_where(ctx, M.LOSS, pl.col("step") == step, finite=True)[0].sort("rank")
    quoted = pl.concat([rows, M.series_where(ctx, M.LOSS, pl.col("step") == later, finite=True)[0].sort("rank")]) \
        if later is not None else rows
    summary = (f"ranks {', '.join(str(r) for r in ident.ranks)} log the same loss at {ident.identical_steps} of {ident.common_steps} "
               f"common steps (e.g. {M.fmt(rows.item(0, 'value'))} at step {step} on every rank): they train on the same batches")
    return Detection(
        summary=summary,
        onset=M.onset_at(rows.row(0, named=True)),
        evidence=M.quote(quoted),
        evidence_count=ident.identical_steps,
        causes={"no_distributed_sampler": 0.9, "sampler_not_passed": 0.4},
        confidence=0.9,
        facts={"identical_steps": ident.identical_steps, "common_steps": ident.common_steps, "ranks": ident.ranks, "onset_step": step},
        ranks=ident.ranks,
    )

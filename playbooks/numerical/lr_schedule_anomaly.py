"""lr-schedule-anomaly: the logged learning rate departs from any warmup/decay shape."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context, evidence_rows
from forensics.contracts.model import Cause, Detection, Severity

# Anomaly kind (timeseries.lr_anomalies) -> the cause it points at.
KIND_CAUSE = {
    "staircase": "stepped_per_epoch",
    "zero_while_training": "wrong_total_steps",
    "rising_after_decay": "restarted_on_resume",
    "warmup_jump": "warmup_mismatch",
    "constant_when_scheduled": "scheduler_not_stepped",
}

PLAYBOOK = declare(
    Playbook(
        id="lr-schedule-anomaly",
        title="Learning rate departs from its schedule",
        category="numerical",
        severity=Severity.MEDIUM,
        tables=("metrics",),
        codes=("lr_schedule_configured",),
        explains=("loss-stagnation", "gradient-explosion", "loss-spike"),
        causes=(
            Cause("stepped_per_epoch", "A per-step scheduler (cosine/linear over total steps) is stepped once per epoch: the LR is a staircase that barely decays",
                  verify="Plot LR against step: flat within each epoch, a small drop at each epoch boundary",
                  fix="Call scheduler.step() after every optimizer step (or build the schedule in epochs)", prior=0.3),
            Cause("wrong_total_steps", "The schedule's total steps are smaller than the run: the LR reaches 0 while training goes on",
                  verify="Compare the scheduler's num_training_steps with the steps actually run",
                  fix="Set total steps from len(dataloader) * epochs / grad accumulation", prior=0.25),
            Cause("restarted_on_resume", "The scheduler restarted (state not restored on resume), so the LR climbs again after decaying",
                  verify="Check that scheduler.state_dict() is saved and loaded with the checkpoint",
                  fix="Save and restore the scheduler state; pass the resume step", prior=0.2),
            Cause("warmup_mismatch", "Warmup ends below the main schedule's peak (two schedulers chained with different bases), so the LR jumps",
                  verify="Print the LR around the warmup boundary", fix="Warm up to the main schedule's starting LR (SequentialLR with matching values)",
                  prior=0.15),
            Cause("scheduler_not_stepped", "A schedule is configured but never stepped", verify="grep scheduler.step()",
                  fix="Step the scheduler", prior=0.1),
            Cause("scheduler_overridden", "Another scheduler replaces the configured one: a DeepSpeed config's `scheduler` block "
                  "(WarmupLR: constant after warmup) wins over the trainer's `lr_scheduler_type`",
                  verify="Look for a `scheduler` block in the DeepSpeed JSON the run passed",
                  fix="Remove the DeepSpeed `scheduler` block (or set a decaying type there)", prior=0.1),
        ),
        verify="Plot the logged LR against step next to the configured schedule",
        fix="Step the scheduler per optimizer step, set the total steps, restore the scheduler state on resume",
        thresholds={
            "zero_early_share": Threshold(0.5, "share of the printed total epochs (`epoch: 5/50`) by which an LR that decayed to 0 ended its schedule too early", "ours; issue 13"),
            "min_points": Threshold(3, "logged points of a zero-LR stretch that count (a decay reaching 0 only at its last point is normal)", "ours"),
            "jump_factor": Threshold(3.0, "one warmup increment this many times the median increment is a jump", "ours"),
            "jump_share": Threshold(0.25, "and at least this share of the peak LR", "ours"),
            "rise_tol": Threshold(0.05, "rise above the lowest LR since decay began, as a share of the peak, that counts as rising again", "ours"),
            "decay_tol": Threshold(0.1, "fall below the peak (share) after which decay has begun", "ours"),
            "stair_min_levels": Threshold(3, "flat LR levels needed for a staircase", "ours"),
            "stair_min_points": Threshold(3, "logged points per level of a staircase", "ours"),
            "stair_small_drop": Threshold(0.7, "every staircase drop keeps more than this share of the LR (StepLR's x0.1/x0.5 drops are planned)", "ours"),
            "zero_min_points": Threshold(2, "logged points, all exactly 0, for an LR at zero from the start while the loss moves", "ours; issue 13 (decide on a few points when blatant)"),
            "zero_stagnation_points": Threshold(8, "loss points from which a zero LR throughout is left to loss-stagnation (its min_points)", "loss-stagnation min_points"),
            "const_min_points": Threshold(5, "logged points an LR must hold its peak, to the end, under a configured decaying schedule", "ours; issue 13"),
        },
        doc="""\
## Symptom
The logged LR (lowest rank) shows one of: exactly 0 for 3+ logged points while training goes on
(other than a warmup's first point or a decay's last); one warmup increment 3x larger than the others
and 25%+ of the peak (jump at the warmup boundary); a rise of 5%+ of the peak after the LR had
decayed 10% below it (restarted schedule); a staircase of 3+ flat levels whose drops are all small
(new/old > 0.7: a per-step schedule stepped per epoch); an LR that holds its peak (from the first
point or the end of a warmup) to the end, over 5+ logged points, while the log names a decaying
schedule (`lr_scheduler_type` cosine/linear/polynomial/inverse_sqrt in a TrainingArguments dump, a
launch command or YAML; DeepSpeed `WarmupDecayLR`/`WarmupCosineLR`).

An LR that decayed to exactly 0 at an epoch the log prints as at most half of the run's total
(`epoch: 5/50`) ends its schedule early, even at its last logged point.

## Why it matters
A wrong schedule trains at the wrong LR for most of the run without any error.

## Evidence
`metrics` `lr` (HF `learning_rate`, Megatron `learning rate`, DeepSpeed `lr=[...]`, MetricLogger
`lr:`, plain loops). An LR that is 0 from the first to the last logged point over a long run is
reported by `loss-stagnation` (cause `lr_zero`) when the loss is flat; over a short paste (2+ points, fewer than 8
loss points) with a loss that still changes it is reported here (an LR decayed to 0 from the first print on).
An LR printed as zero with 2-5 decimals (`lr:0.0000`) is a rounding of the print format and is not read as 0;
`0`, `0.0`, 6+ decimals (`0.00000000`) and scientific notation (`0.000E+00`) are.

## Known false positives
Cosine with warm restarts (SGDR) and cyclic/one-cycle schedules rise after decaying by design.
StepLR/MultiStepLR staircases (drops of x0.1-x0.5) are planned and not reported.
A constant LR with no decaying schedule named in the log (constant, constant_with_warmup, DeepSpeed
WarmupLR, or nothing printed) is a choice, not an anomaly. An LR printed with few digits over a short
stretch of a long schedule can look constant while it decays: the rule needs the schedule named and
5+ identical points.
""",
    )
)


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Anomalies of the LR series' shape, the earliest first."""
    # The LR as numbers (rank, step, value): the rows quoted get their file and line at the end.
    s = M.series_columns(ctx, M.LR, M.NUMBERS, finite=True)
    if s.height >= th["zero_min_points"] and float(s.get_column("value").abs().max()) == 0.0:
        return _zero_throughout(ctx, s, th)
    if s.height < 3:
        return None
    early = _zero_early(ctx, s, th)
    if early is not None:
        return early
    configured = ctx.events_of("lr_schedule_configured")
    found = M.ts.lr_anomalies(
        s, scheduled=configured.height > 0, const_min_points=int(th["const_min_points"]), min_points=int(th["min_points"]), jump_factor=th["jump_factor"], jump_share=th["jump_share"],
        rise_tol=th["rise_tol"], decay_tol=th["decay_tol"], stair_min_levels=int(th["stair_min_levels"]),
        stair_min_points=int(th["stair_min_points"]), stair_small_drop=th["stair_small_drop"],
    )
    if not found:
        return None
    first = found[0]
    causes: dict[str, float] = {}
    for a in found:
        causes[KIND_CAUSE[a.kind]] = max(causes.get(KIND_CAUSE[a.kind], 0.0), 0.9)
    if "constant_when_scheduled" in {a.kind for a in found}:
        causes["scheduler_overridden"] = 0.6
    summary = "; ".join(f"{a.detail} (from step {a.step})" for a in found)
    rows = M.provenance(ctx, M.LR, M.pick(s, [a.step for a in found]), finite=True)
    before = M.provenance(ctx, M.LR, s.filter(pl.col("step") < first.step).sort("step").tail(1), finite=True)
    return Detection(
        summary=summary,
        onset=M.onset_of_step(rows, first.step, first.rank),
        evidence=M.quote(pl.concat([before, rows], how="diagonal_relaxed"))
        + (evidence_rows(configured.head(1)) if "constant_when_scheduled" in {a.kind for a in found} else []),
        evidence_count=len(found),
        causes=causes,
        confidence=0.85,
        facts={"anomalies": [a.kind for a in found], "onset_step": first.step, **{f"{first.kind}_{k}": v for k, v in first.numbers.items()}},
    )


def _zero_throughout(ctx: Context, s: pl.DataFrame, th: dict) -> Detection | None:
    """An LR read as exactly 0 at every logged point while the loss moves: the optimizer steps change nothing. A long
    flat loss is left to loss-stagnation (cause lr_zero); rounded zeros (`lr:0.0000`) never reach here (metric_lines)."""
    loss = M.series(ctx, M.LOSS, finite=True)
    if loss.height < th["zero_min_points"] or loss.get_column("value").n_unique() < 2:
        return None
    if loss.height >= th["zero_stagnation_points"]:
        return None  # enough points for loss-stagnation to judge the loss itself (lr_zero)
    summary = (f"the LR reads 0 at all {s.height} logged points while the loss still changes "
               f"({M.fmt(float(loss.item(0, 'value')))} -> {M.fmt(float(loss.item(-1, 'value')))}): no update moves the weights")
    shown = M.provenance(ctx, M.LR, s.head(2), finite=True)
    return Detection(summary=summary, onset=M.onset_at(shown.row(0, named=True)), evidence=M.quote(shown), evidence_count=s.height,
                     causes={"wrong_total_steps": 0.8, "scheduler_not_stepped": 0.3}, confidence=0.75,
                     facts={"anomalies": ["zero_throughout"], "lr_points": s.height, "loss_points": loss.height})


def _zero_early(ctx: Context, s: pl.DataFrame, th: dict) -> Detection | None:
    """The LR decayed to 0 at an epoch the log prints as at most `zero_early_share` of the total epochs."""
    total = M.series(ctx, ("epoch_total",), finite=True)
    if total.height == 0:  # the epochs (a long series) are read only where the log prints their total
        return None
    epoch = M.series(ctx, ("epoch",), finite=True)
    if epoch.height == 0:
        return None
    ranks = s.get_column("rank").drop_nulls()
    lr = (s.filter(pl.col("rank") == ranks.min()) if ranks.len() else s).sort("step")
    decayed = lr.filter((pl.col("value") == 0) & (pl.col("value").shift(1) > 0))
    if decayed.height == 0:
        return None
    at = decayed.join(epoch.select("rank", "step", pl.col("value").alias("_e")), on=["rank", "step"], nulls_equal=True).join(
        total.select("rank", "step", pl.col("value").alias("_t")), on=["rank", "step"], nulls_equal=True)
    at = at.filter((pl.col("_t") > 0) & ((pl.col("_e") + 1) <= th["zero_early_share"] * pl.col("_t")))
    if at.height == 0:
        return None
    at = M.provenance(ctx, M.LR, at, finite=True)
    row = at.row(0, named=True)
    before = M.provenance(ctx, M.LR, lr.filter(pl.col("step") < row["step"]).tail(1), finite=True)
    summary = (f"the LR decayed to 0 at epoch {int(row['_e'])} of {int(row['_t'])} (step {row['step']}) while training goes on: "
               f"the schedule ends after {(row['_e'] + 1) / row['_t']:.0%} of the epochs")
    return Detection(summary=summary, onset=M.onset_at(row), evidence=M.quote(pl.concat([before, at.head(1)], how="diagonal_relaxed")),
                     evidence_count=lr.filter(pl.col("step") >= row["step"]).height, causes={"wrong_total_steps": 0.9}, confidence=0.8,
                     facts={"epoch": row["_e"], "epochs_total": row["_t"], "onset_step": row["step"]})

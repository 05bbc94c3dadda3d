"""loss-scale-runaway: the dynamic loss scale keeps doubling without a single overflow to back it off."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

PLAYBOOK = declare(
    Playbook(
        id="loss-scale-runaway",
        title="Loss scale grows without bound",
        category="numerical",
        severity=Severity.MEDIUM,
        tables=("metrics",),
        explains=("loss-stagnation",),
        causes=(
            Cause("zero_grads", "The gradients the scaler checks are zero (zeroed before the check, detached loss, frozen model), so no overflow is ever seen",
                  verify="Print a parameter's .grad norm right before scaler.step(); check the order zero_grad / backward / step",
                  fix="Call optimizer.zero_grad() before backward, not between backward and step; make sure the loss has a graph", prior=0.6),
            Cause("tiny_grads", "The gradients are so small that even a huge scale does not overflow (vanishing gradients, a tiny loss)",
                  verify="Log the unscaled grad norm", fix="Fix the vanishing cause; cap the scale (GradScaler growth settings)",
                  prior=0.4, playbook="vanishing-gradient"),
        ),
        verify="Check that gradients are non-zero right before the optimizer step",
        fix="Fix the zero-gradient cause (zero_grad placement, detached loss, frozen parameters)",
        thresholds={
            "min_doublings": Threshold(10, "consecutive doublings of the scale with no halving in between, up to the end of the run", "ours"),
            "max_scale": Threshold(2.0**24, "scale the run must exceed (16,777,216 = 2**24: far past any fp16 gradient's need)", "ours; PLAYBOOKS.md loss-scale-runaway (keeps doubling past the fp16 range)"),
            "zero_share": Threshold(0.9, "share of logged grad norms exactly 0 that points at zero gradients", "ours"),
        },
        doc="""\
## Symptom
The logged loss scale doubles at least 10 times in a row without a single halving, and is still
growing at the end of the run, past 2**24. A scaler that never sees an overflow is not measuring
real gradients.

## Why it matters
The scale is a symptom: the optimizer step sees zero (or tiny) gradients, so the model does not train.

## Evidence
`metrics` `loss_scale` (lowest rank; the scale is global), `grad_norm` (exact zeros point at zeroed
gradients).

## Known false positives
A run that starts from a small initial scale (1 or 128) doubles many times in a row before its first
overflow; that growth is followed by halvings and ends far below 2**24.
""",
    )
)


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """The last run of doublings reaching the end of the series, long and high enough."""
    # Every rule reads the lowest rank (the scale is global): only its rows are kept, read one rank at a time.
    s, points = M.series_lowest_rank(ctx, M.LOSS_SCALE, finite=True)
    if points < 3:
        return None
    r = M.ts.scale_runs(s)
    if r is None or r.longest_up < th["min_doublings"] or r.last.value < th["max_scale"]:
        return None
    ranks = s.get_column("rank").drop_nulls()
    part = s.filter(pl.col("rank") == ranks.min()) if ranks.len() else s
    part = part.sort("step").with_columns((pl.col("value") / pl.col("value").shift(1)).alias("f"))
    changes = part.filter(pl.col("f").is_not_null() & (pl.col("f") != 1.0))
    downs = changes.filter(pl.col("f") <= 0.75)
    last_down = downs.item(-1, "step") if downs.height else None
    ups_after = changes.filter(pl.col("f") >= 1.5)
    if last_down is not None:
        ups_after = ups_after.filter(pl.col("step") > last_down)
    if ups_after.height < th["min_doublings"]:
        return None
    start = ups_after.row(0, named=True)
    prev = part.filter(pl.col("step") < start["step"]).tail(1)
    g = M.series_columns(ctx, M.GRAD_NORM, M.NUMBERS, where=pl.col("step") >= start["step"], finite=True)
    zero_share = float((g.get_column("value") == 0).mean()) if g.height else 0.0
    causes = {"zero_grads": 0.9, "tiny_grads": 0.3} if zero_share >= th["zero_share"] else {"zero_grads": 0.5, "tiny_grads": 0.5}
    grads = f"; grad_norm is exactly 0 on {zero_share:.0%} of those steps" if g.height and zero_share > 0 else ""
    summary = (f"loss scale doubled {ups_after.height} times in a row with no overflow, "
               f"{M.fmt(prev.item(0, 'value') if prev.height else start['value'] / 2)} -> {M.fmt(r.last.value)} "
               f"from step {start['step']} to {r.last.step}{grads}")
    # With no halving anywhere before the run, the scaler never saw an overflow from its first point.
    onset_row = part.row(0, named=True) if last_down is None else start
    return Detection(
        summary=summary,
        onset=M.onset_at(onset_row),
        evidence=M.quote(pl.concat([prev, ups_after.head(2), part.tail(1)], how="diagonal_relaxed"))
        + M.quote(M.provenance(ctx, M.GRAD_NORM, g.filter(pl.col("value") == 0).head(1), finite=True)),
        evidence_count=ups_after.height,
        causes=causes,
        confidence=0.9 if zero_share >= th["zero_share"] else 0.75,
        facts={"doublings": ups_after.height, "final_scale": r.last.value, "onset_step": onset_row["step"], "zero_grad_share": zero_share},
    )

"""loss-stagnation from one record: a training loss of exactly 0 from its first point beside a perfect evaluation."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.gradient.loss_stagnation import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# The evaluation's own loss, and the scores whose ceiling is a perfect prediction (fraction 1 or percent 100).
EVAL_LOSS = r"^(?:eval|val|valid|validation|test|dev)_loss$"
SCORE = r"^(?:(?:eval|val|valid|validation|test|dev)_)?(?:miou|m_iou|mean_iou|iou|acc|accuracy|dice|f1|map|acc_seg|macc)$"


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Every logged training loss is exactly 0, from the first point (never a value learned down to 0), and an
    evaluation is perfect as well: its loss exactly 0 or a score exactly at its ceiling. A model that has learned
    nothing yet cannot be perfect on held-out data; the objective carries no target: one class only (a 1-class
    softmax is 0 whatever it predicts) or every foreground label mapped to the ignore index
    (sthalles/deeplab_v3#21: `Average train loss: 0.0  Global Validation Avg Loss: 0.0  MIoU: 1.0` from the start,
    foreground labelled 255; DrSleep/light-weight-refinenet#32: loss 0 and `mIOU=1` with the foreground at 255;
    open-mmlab/mmsegmentation#304: a one-class config, every loss 0.0000). Quiet when a NaN grad norm is logged
    (a masked NaN loss, nan-loss's) or when any logged loss was above 0 (a run that learned, or memorised, its set)."""
    if not ctx.has("metrics"):
        return None
    # The values first, one rank at a time, up to the first one that is not 0: a run that learned is never read whole.
    points = 0
    for part in M.series_ranks(ctx, M.LOSS, cols=("rank", "value")):
        if bool((part.get_column("value") != 0.0).any()):
            return None
        points += part.height
    if points == 0:
        return None
    loss = M.series(ctx, M.LOSS)
    if M.series(ctx, M.GRAD_NORM).filter(pl.col("value").is_nan()).height:
        return None
    proof: pl.DataFrame | None = None
    for name in M.names_like(ctx, EVAL_LOSS):
        s = M.series(ctx, name)
        if s.height and bool((s.get_column("value") == 0.0).all()):
            proof = s
            break
    if proof is None:
        for name in M.names_like(ctx, SCORE):
            s = M.series(ctx, name)
            if s.height and bool(s.get_column("value").is_in([1.0, 100.0]).all()):
                proof = s
                break
    if proof is None:
        return None
    first = loss.row(0, named=True)
    what = str(proof.item(0, "name"))
    return Detection(
        summary=(f"the training loss is exactly 0 at every one of its {loss.height} logged point(s), from the first, and "
                 f"{what} is {M.fmt(proof.item(0, 'value'))}: a perfect score before anything was learned means the "
                 "objective sees no target (one class only, or the labels mapped to the ignore index)"),
        onset=M.onset_at(first),
        evidence=M.quote(pl.concat([loss.head(2), proof.head(2)], how="diagonal_relaxed")),
        evidence_count=loss.height + proof.height,
        causes={"labels_masked": 0.9},
        confidence=0.75,
        # One record decides the shape, not which mistake made the labels vanish: an alarm, not an incident.
        severity=Severity.MEDIUM,
        facts={"points": loss.height, "series": what},
    )

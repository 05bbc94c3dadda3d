"""bad-input-data from an overlap score above 1 beside a loss far below zero: segmentation masks outside [0, 1]."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.data.bad_input_data import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# Overlap scores of segmentation (Dice, IoU/Jaccard) under any split prefix: `validation_dice_coeff`, `val_dice`, `miou`.
OVERLAP = r"(?:^|_)(?:dice|iou|jaccard)(?:_coeff?|_coefficient|_score)?$"
# Losses in their spellings; an evaluation loss counts as well (the same objective on other samples).
LOSSES = (*M.LOSS, "eval_loss", "val_loss", "valid_loss", "test_loss")


@PLAYBOOK.detector(("metrics",))
def detect_overlap_above_one(ctx: Context, th: dict) -> Detection | None:
    """A Dice/IoU above 1 (and at most 2) and `negative_loss_points` loss lines below `overlap_loss_below`: masks loaded
    as 0-255 (or any scale past 1) make a binary cross-entropy go far below zero and a Dice exceed 1, which neither
    can with 0/1 targets (milesial/Pytorch-UNet#78: `0.0526 --- loss: -2474.71` and `Validation Dice Coeff: 1.972`,
    'please ensure mask is 0-1, not 0-255'; milesial/Pytorch-UNet#84: `loss (batch)=-9.27e+5` and `Validation Dice
    Coeff: 1.9721606236237745` from PNG masks; milesial/Pytorch-UNet#173: 'the loss is negative ... and Dice coeff is
    > 1', masks loaded wrong). Objectives negative by design stay above -1 (a soft-Dice loss `-dice`, nnU-Net's
    `-soft_dice + CE`, MIC-DKFZ/nnUNet#666), and a Dice above 1 with a loss at or above zero is an averaging bug
    rather than the data's (milesial/Pytorch-UNet#56: `total / index + 1`): both stay quiet here."""
    scores = M.names_like(ctx, OVERLAP)
    losses = M.present(ctx, LOSSES)
    if not scores or not losses:
        return None
    # A Dice of 2|X∩Y|/(|X|+|Y|) with targets scaled by k > 1 nears 2 from below; a percent score is far above 2.
    over = (ctx.metrics_select("file", "line", "ts", "rank", "step", "name", "value", names=scores)
            .filter((pl.col("value") > 1.0) & (pl.col("value") <= 2.0)).sort("file", "line"))
    if over.height == 0:
        return None
    neg = (ctx.metrics_select("file", "line", "ts", "rank", "step", "name", "value", names=losses)
           .filter(pl.col("value") < th["overlap_loss_below"]).sort("file", "line")
           .unique(["file", "line"], keep="first", maintain_order=True))
    if neg.height < th["negative_loss_points"]:
        return None
    first, score = neg.row(0, named=True), over.row(0, named=True)
    summary = (f"{score['name']} is {M.fmt(score['value'])} (an overlap score is at most 1) and {first['name']} is below "
               f"{M.fmt(th['overlap_loss_below'])} on {neg.height} lines (from {M.fmt(first['value'])}): a binary "
               "cross-entropy or Dice with 0/1 targets can do neither, so the masks are loaded outside [0, 1] (0-255 images)")
    return Detection(
        summary=summary,
        onset=M.onset_at(first),
        evidence=M.quote(pl.concat([neg.head(2), neg.tail(1), over.head(1)]).unique(["file", "line"], maintain_order=True)),
        evidence_count=neg.height + over.height,
        causes={"targets_outside_loss_range": 0.9},
        confidence=0.85,
        severity=Severity.HIGH,
        facts={"score": score["name"], "score_value": score["value"], "negative_lines": neg.height,
               "first_loss": first["value"]},
    )

"""bad-input-data from a perfect score at the first logged point: accuracy 1 with a loss at float-precision zero (one-class labels)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.data.bad_input_data import PLAYBOOK
from forensics.playbooks.data.bad_input_data_negative_loss import ACC

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# A split's accuracy and the loss of the same split, by the canonical names' prefix (Keras `val_accuracy`/`val_loss`
# are read as eval_accuracy/eval_loss).
SPLITS = {"": M.LOSS, "eval_": ("eval_loss", "val_loss", "valid_loss", "validation_loss"), "val_": ("val_loss", "eval_loss"),
          "valid_": ("valid_loss", "eval_loss"), "validation_": ("validation_loss", "eval_loss"), "test_": ("test_loss",)}
# An accuracy at or above this (as a fraction) is perfect as printed to four digits.
PERFECT = 0.99995


@PLAYBOOK.detector(("metrics",))
def detect_one_class(ctx: Context, th: dict) -> Detection | None:
    """A split whose accuracy is 1 and whose loss is above 0 but at most `perfect_loss_below` on every logged line from
    the first, `perfect_points` lines or more: a cross-entropy of 1e-9 means every sample is predicted with certainty
    1 - 1e-9, which a model that has seen its data for one epoch reaches only when the target is trivial, every
    label the same class (lyhue1991/eat_tensorflow2_in_30_days#23: `val_loss: 1.2626e-09 - val_accuracy: 1.0000`
    at epoch 1 of a cat/dog example whose load_image gave every image label 0 under Windows paths). A healthy run that
    fits its data reaches such a loss, if ever, after its first logged points, so its first line keeps it quiet."""
    accs = M.names_like(ctx, ACC)
    if not accs:
        return None
    for acc_name in accs:
        split = next((p for p in sorted(SPLITS, key=len, reverse=True) if p and acc_name.startswith(p)), "")
        losses = M.present(ctx, SPLITS[split])
        if not losses:
            continue
        rows = ctx.metrics_select("file", "line", "ts", "rank", "step", "name", "value", names=[acc_name, losses[0]])
        a = rows.filter(pl.col("name") == acc_name).select("file", "line", "ts", "rank", "step", pl.col("value").alias("acc"))
        both = a.join(rows.filter(pl.col("name") == losses[0]).select("file", "line", "name", "value"), on=["file", "line"],
                      maintain_order="left").sort("file", "line")
        if both.height < th["perfect_points"]:
            continue
        acc = M.fraction_of("acc")
        perfect = (acc >= PERFECT) & (pl.col("value") > 0.0) & (pl.col("value") <= th["perfect_loss_below"])
        if not both.select(perfect.all()).item():
            continue
        first = both.row(0, named=True)
        return Detection(
            summary=(f"{acc_name} is 1 and {losses[0]} {M.fmt(first['value'])} (zero to float precision) from the first logged "
                     f"line on, at all {both.height}: a model predicts every sample with certainty from its first logged point only "
                     "when the target is trivial, every label the same class"),
            onset=M.onset_at(first),
            evidence=M.quote_ends(both),
            evidence_count=both.height,
            causes={"single_class_labels": 0.9, "wrong_class_count": 0.2},
            confidence=0.7,
            severity=Severity.MEDIUM,
            facts={"accuracy": acc_name, "loss": losses[0], "first_loss": first["value"], "points": both.height},
        )
    return None

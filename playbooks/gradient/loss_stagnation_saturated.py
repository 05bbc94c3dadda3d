"""loss-stagnation from a cross-entropy equal to -ln(epsilon)·(1 - accuracy): every output a clipped one-hot, no learning."""

from __future__ import annotations

import math

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.gradient.loss_stagnation import PLAYBOOK
from forensics.playbooks.gradient.loss_stagnation_chance import ACC, EVAL_LOSS, split_of

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Keras clips predicted probabilities to [epsilon, 1 - epsilon] before its cross-entropies (backend epsilon() = 1e-7,
# tf.keras and Keras 3 alike): an output that is one-hot scores 0 on the samples it gets right and -ln(1e-7) =
# 16.118 on the others, so the mean loss is 16.118·(1 - accuracy) exactly, whatever the class count (categorical:
# `loss: 14.5063 - acc: 0.1000` on 10 classes, binary: `loss: 8.0590 - acc: 0.5000`).
SATURATED = -math.log(1e-7)


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """A split whose loss equals 16.118·(1 - accuracy) within `saturated_tol` on every line that prints both, on
    `saturated_min_points` lines or more, with the accuracy below `saturated_acc_ceiling`: the model's softmax is
    saturated to one-hot outputs, so every gradient through it is zero and the loss and accuracy stay where they
    are (kcct-fujimotolab/3DCNN#2: `loss: 13.8352 - acc: 0.1416 - val_loss: 13.4866 - val_acc: 0.1633` epoch after
    epoch, ReLUs before the pooling layers; Keras users' `loss: 14.5063 - acc: 0.1000 - val_loss: 14.5063 -
    val_acc: 0.1000` on CIFAR-10 and `loss: 8.0590 - acc: 0.5000` on binary tasks, every epoch). The identity is
    arithmetic: a model whose outputs are probabilities, learning or not, prints a loss off that line."""
    if not ctx.has("metrics"):
        return None
    accs = M.names_like(ctx, ACC)
    if not accs:
        return None
    losses = M.present(ctx, M.LOSS)[:1] + M.present(ctx, EVAL_LOSS)
    rows = ctx.metrics_select("file", "line", "ts", "rank", "step", "name", "value", names=losses + accs)
    for loss in losses:
        split = split_of(loss)
        for acc in (a for a in accs if split_of(a) == split):
            found = _saturated(rows, loss, acc, th)
            if found is not None:
                return found
    return None


def _saturated(rows: pl.DataFrame, loss: str, acc: str, th: dict) -> Detection | None:
    """The detection when every line printing both `loss` and `acc` sits on the clipped one-hot line (see detect)."""
    a = rows.filter(pl.col("name") == acc).select("file", "line", pl.col("value").alias("acc"))
    both = rows.filter(pl.col("name") == loss).join(a, on=["file", "line"], maintain_order="left").filter(
        pl.col("value").is_finite() & pl.col("acc").is_finite()).sort("file", "line")
    if both.height < th["saturated_min_points"]:
        return None
    frac = M.fraction_of("acc")
    expected = SATURATED * (1.0 - frac)
    on_line = ((pl.col("value") - expected).abs() <= th["saturated_tol"] * expected) & (frac < th["saturated_acc_ceiling"])
    if not both.select(on_line.all()).item():
        return None
    first, last = both.row(0, named=True), both.row(-1, named=True)
    return Detection(
        summary=(f"{loss} equals {SATURATED:.3f}·(1 - {acc}) on all {both.height} lines that print both ({M.fmt(last['value'])} at "
                 f"{acc} {M.fmt(last['acc'])}): the cross-entropy of outputs that are one-hot, clipped at Keras' epsilon 1e-7, "
                 "wrong on every sample it misses with full certainty; a saturated softmax passes no gradient, the model "
                 "has stopped learning"),
        onset=M.onset_at(first),
        evidence=M.quote_ends(both),
        evidence_count=both.height,
        causes={"vanishing_gradient": 0.5, "lr_zero": 0.1, "weights_frozen": 0.2, "labels_masked": 0.05},
        confidence=0.75,
        facts={"loss": loss, "accuracy": acc, "points": both.height, "epsilon_loss": SATURATED},
    )

"""loss-stagnation from an evaluation that proves a constant prediction: accuracy and F1 frozen at one class's scores."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.gradient.loss_stagnation import PLAYBOOK
from forensics.playbooks.gradient.loss_stagnation_chance import ACC

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# An F1 score printed beside the accuracy (ABSA-PyTorch `test_acc: 0.6500, f1: 0.2626`, sklearn's f1_score(average=
# 'macro') in its train.py; `val_f1`, `macro_f1`, `f1_macro`, `test_f1`).
F1 = r"^(?:eval_|val_|valid_|validation_|test_)?(?:macro_)?f1(?:_macro|_score)?$"
# Class counts a macro-F1 is read against: a classifier reporting macro-F1 has a handful of classes.
MAX_CLASSES = 20
# Relative distance of the printed F1 from a constant prediction's (rounding of 2-4 printed digits).
F1_TOL = 0.01


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """An accuracy and an F1 printed on the same lines, each identical as printed over `exact_min_points` or more
    lines, with the F1 exactly what predicting one class for every sample scores at that accuracy p: that class
    has precision p and recall 1, so F1 = 2p/(1+p) for it and 0 for the others, i.e. a macro-F1 of 2p/((1+p)K)
    over K classes, a weighted F1 of 2p²/(1+p) (songyouwei/ABSA-PyTorch#46: `test_acc: 0.6500, f1: 0.2626` at every
    evaluation of epoch 10, 0.2626 = 2·0.65/1.65/3 over 3 sentiment classes). The identity is arithmetic, not a
    threshold: a model that learns anything predicts more than one class and breaks it, however flat its scores."""
    if not ctx.has("metrics"):
        return None
    f1s, accs = M.names_like(ctx, F1), M.names_like(ctx, ACC)
    if not f1s or not accs:
        return None
    rows = ctx.metrics_select("file", "line", "ts", "rank", "step", "name", "value", names=f1s + accs)
    for acc_name in accs:
        a = rows.filter(pl.col("name") == acc_name)
        for f1_name in f1s:
            f = rows.filter(pl.col("name") == f1_name).select("file", "line", pl.col("value").alias("f1"))
            both = a.join(f, on=["file", "line"], maintain_order="left").filter(
                pl.col("value").is_finite() & pl.col("f1").is_finite())
            found = _constant(both, acc_name, f1_name, th)
            if found is not None:
                return found
    return None


def _constant(both: pl.DataFrame, acc_name: str, f1_name: str, th: dict) -> Detection | None:
    """The detection when `both` (accuracy rows with the line's F1) shows a constant prediction (see detect)."""
    if both.height < th["exact_min_points"] or both.get_column("value").n_unique() != 1 or both.get_column("f1").n_unique() != 1:
        return None
    acc, f1 = float(both.item(0, "value")), float(both.item(0, "f1"))
    # Percentages (`Acc: 65.00  F1: 26.26`) -> fractions.
    p, f = (acc / 100.0, f1 / 100.0) if acc > 1.0 or f1 > 1.0 else (acc, f1)
    if not 0.0 < p < th["exact_acc_ceiling"] or f <= 0.0:
        return None
    one_class = 2 * p / (1 + p)
    # K = 1: a binary task's F1 of the positive class when every sample is predicted positive.
    ks = [k for k in range(1, MAX_CLASSES + 1) if abs(f - one_class / k) <= F1_TOL * one_class / k]
    weighted = abs(f - p * one_class) <= F1_TOL * p * one_class
    if not ks and not weighted:
        return None
    if ks and ks[0] == 1:
        how = f"the predicted class's F1 of 2p/(1+p) = {one_class:.4g}"
    elif ks:
        how = f"a macro-F1 over {ks[0]} classes of 2p/((1+p)·{ks[0]}) = {one_class / ks[0]:.4g}"
    else:
        how = f"a weighted F1 of 2p²/(1+p) = {p * one_class:.4g}"
    first = both.row(0, named=True)
    return Detection(
        summary=(f"{acc_name} is {M.fmt(acc)} and {f1_name} {M.fmt(f1)} on every one of {both.height} lines, and that F1 is "
                 f"what predicting one class for every sample scores at accuracy p = {p:.4g} ({how}): the model outputs "
                 "the same class whatever the input, it has learned nothing"),
        onset=M.onset_at(first),
        evidence=M.quote_ends(both),
        evidence_count=both.height,
        causes={"weights_frozen": 0.4, "vanishing_gradient": 0.4, "zero_gradients": 0.3, "labels_masked": 0.3},
        confidence=0.8,
        facts={"accuracy": acc, "f1": f1, "classes": ks[0] if ks else None, "points": both.height, "series": acc_name},
    )

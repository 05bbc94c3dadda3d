"""loss-stagnation from a handful of points: the loss and the accuracy repeat exactly, as printed (no weight changed)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.gradient.loss_stagnation import PLAYBOOK
from forensics.playbooks.gradient.loss_stagnation import detect as detect_window
from forensics.playbooks.gradient.loss_stagnation_chance import ACC, ERROR

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Training-split accuracies only (Keras `acc`/`accuracy`/`binary_accuracy`): a frozen model on a fixed
# evaluation set repeats its eval metrics whatever happened to the training.
TRAIN_ACC = r"^(?:acc|accuracy|binary_accuracy|categorical_accuracy|sparse_categorical_accuracy|top1|acc1|acc@1|prec@1|prec1|error)$"


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """The last `exact_min_points` losses identical and the training accuracy identical at the same lines
    (keras-team/keras#4784: `loss: 4.4380 - acc: 0.7247` for 13 epochs). Quiet when a logged grad norm moves
    over those points (a loss normalised by design, JeffWang987/OpenOccupancy#22), at a memorised training set
    (accuracy at its ceiling, loss 0), or where the window rule already decides."""
    if not ctx.has("metrics"):
        return None
    k = int(th["exact_min_points"])
    s, points = M.lowest_rank_numbers(ctx, M.LOSS, finite=True)  # numbers: the lines are fetched for `same` only
    if points < k:
        return None
    s = s.sort("step")
    tail = s.tail(k)
    level = float(tail.item(0, "value"))
    if tail.get_column("value").n_unique() != 1 or level <= 0:  # a negative loss is bad-input-data's
        return None
    # The repeated record extends back as far as the loss stays identical.
    same = s.with_columns((pl.col("value") != level).cum_sum(reverse=True).alias("_d")).filter(pl.col("_d") == 0).drop("_d")
    same = M.provenance(ctx, M.LOSS, same, finite=True)
    acc_name, acc = _accuracy(ctx, same)
    if acc is None or acc.height < k or acc.get_column("value").n_unique() != 1:
        return None
    a = float(acc.item(0, "value"))
    frac = M.as_fraction(a)
    if (1.0 - frac if acc_name.endswith("error") else frac) >= th["exact_acc_ceiling"]:
        return None
    g = M.series_columns(ctx, M.GRAD_NORM, ("value",), where=pl.col("step") >= same.item(0, "step"), finite=True)
    if g.height >= 2 and g.get_column("value").n_unique() > 1:
        return None  # gradients still move the weights: a constant loss by construction
    if detect_window(ctx, th) is not None:
        return None
    first = same.row(0, named=True)
    return Detection(
        summary=(f"loss {M.fmt(level)} and {acc_name} {M.fmt(a)} repeat exactly, as printed, over the last {same.height} "
                 f"logged points (from step {first['step']}): no weight changed between them"),
        onset=M.onset_at(first),
        evidence=M.quote(pl.concat([same.head(1), same.tail(1), acc.tail(1)], how="diagonal_relaxed")),
        evidence_count=same.height,
        causes={"weights_frozen": 0.6, "vanishing_gradient": 0.5, "zero_gradients": 0.4, "labels_masked": 0.2},
        confidence=0.85,
        facts={"level": level, "accuracy": a, "points": same.height, "series": acc_name},
    )


def _accuracy(ctx: Context, same: pl.DataFrame) -> tuple[str, pl.DataFrame | None]:
    """The training accuracy (or error rate) logged on the lines of the repeated losses."""
    lines = same.select("file", "line")
    for name in M.names_like(ctx, TRAIN_ACC) or M.names_like(ctx, ACC, exclude=r"^(?:eval|val|valid|validation|test)_") \
            or M.names_like(ctx, ERROR, exclude=r"^(?:eval|val|valid|validation|test)_"):
        rows = M.series(ctx, name, finite=True).join(lines, on=["file", "line"], how="semi")
        if rows.height:
            return name, rows
    return "", None

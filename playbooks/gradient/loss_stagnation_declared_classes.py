"""loss-stagnation from the class count the log announces: the training loss ends at ln(K) of that K (a uniform guess)."""

from __future__ import annotations

import math

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.evidence import events
from forensics.playbooks.fields import field
from forensics.playbooks.gradient.loss_stagnation import PLAYBOOK
from forensics.playbooks.gradient.loss_stagnation_chance import ACC

from forensics.contracts.context import Context, evidence_rows
from forensics.contracts.model import Detection

CLASS_CODES = ("declared_class_count",)
# A progress column that reaches 100 on the loss's line (fastText's `Progress: 100.0%`): the run's last report, whose
# loss fastText averages over every example the thread trained on, not one batch.
PROGRESS = ("progress",)


@PLAYBOOK.detector(("events", "metrics"))
def detect(ctx: Context, th: dict) -> Detection | None:
    """The training loss at ln(K) for the K the log itself announces (fastText's `Number of labels: 2`, Keras'
    `Found 730 images belonging to 10 classes.`), where the common-class rule must guess K. Decided on the last point
    when it closes the run (a progress of 100% on its line; fastText prints its loss as the average over all of
    training, so a final 0.6949 with 2 labels is a model that never left the uniform guess: facebookresearch/fastText#853,
    every prediction __label__0 at p 0.5001, 5 epochs too few) and sits within `chance_late_tol` of ln(K); or on
    `chance_min_points_loss_only` points all within `chance_tol`. An accuracy logged beside it must be at 1/K too
    (amarchenkova/yoga-pose-CNN#1: loss 2.2847 near ln 10 after one epoch with accuracy 0.21, learning: quiet). One
    class count only: a log that announces different counts (two datasets) names no K."""
    ev = events(ctx, CLASS_CODES)
    if ev.height == 0 or not ctx.has("metrics"):
        return None
    ks = ev.select(field("classes").cast(pl.Int64, strict=False).alias("k")).get_column("k").drop_nulls().unique()
    if ks.len() != 1 or int(ks.item()) < 2:
        return None
    k = int(ks.item())
    ln_k = math.log(k)
    loss = M.ts.lowest_rank(M.series(ctx, M.LOSS, finite=True)).sort("file", "line")
    if loss.height == 0:
        return None
    last = loss.tail(1)
    done = M.series(ctx, PROGRESS, finite=True).join(last.select("file", "line"), on=["file", "line"], how="semi")
    closing = done.height > 0 and float(done.get_column("value").max()) >= 100.0
    off = (loss.get_column("value") - ln_k).abs() / ln_k
    if closing and float(off.tail(1).item()) <= th["chance_late_tol"]:
        judged, why = last, "on the run's closing report (progress 100%), which averages the loss over all of training"
    elif loss.height >= th["chance_min_points_loss_only"] and float(off.max()) <= th["chance_tol"]:
        judged, why = loss, f"at every one of its {loss.height} logged points"
    else:
        return None
    for name in M.names_like(ctx, ACC):
        if name.startswith(("eval_", "val_", "valid_", "validation_", "test_")):
            continue
        a = M.series(ctx, name, finite=True).get_column("value")
        if a.len():
            acc = float(a.tail(1).item()) / (100.0 if float(a.max()) > 1.0 else 1.0)
            if abs(acc - 1 / k) > th["chance_acc_tol"] / k:
                return None
    first = judged.row(0, named=True)
    name = str(first["name"])
    return Detection(
        summary=(f"{name} at {M.fmt(float(judged.item(-1, 'value')))} ≈ ln({k}) = {ln_k:.4g}, the loss of a uniform guess "
                 f"over the {k} classes the log announces, {why}: the model did not learn (too few epochs or too low a "
                 "learning rate for this data, or inputs that carry no signal)"),
        onset=M.onset_at(first),
        evidence=evidence_rows(ev.head(1)) + M.quote(pl.concat([judged.head(1), judged.tail(1)]).unique(["file", "line"], maintain_order=True)),
        evidence_count=judged.height + 1,
        causes={"lr_zero": 0.3, "weights_frozen": 0.3, "vanishing_gradient": 0.3, "labels_masked": 0.2},
        confidence=0.75,
        facts={"classes": k, "ln_classes": ln_k, "level": float(judged.item(-1, "value")), "points": loss.height, "series": name},
    )

"""bad-input-data from a classification loss below zero: cross-entropy beside an accuracy cannot be negative with valid targets."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.data.bad_input_data import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# The training loss in its spellings, and the evaluation loss printed on the same line (Keras `val_loss`).
LOSSES = (*M.LOSS, "eval_loss", "val_loss", "valid_loss", "test_loss")
# An accuracy on the line makes the objective a classification one (the same family loss-stagnation reads).
ACC = r"^(?:eval_|val_|valid_|validation_|test_)?(?:acc|accuracy|top1|acc1|acc@1|prec@1|prec1)$"
# Terms of objectives that may be negative by design: a line logging one of them is not judged.
NEGATIVE_OK = (r"reward|return|(?:^|_)kld?(?:_|$)|elbo|nll|likelihood|log_?prob|logp|policy|(?:^|_)value(?:_|$)|(?<!cross_)entropy"
               r"|(?:^|_)(?:g|d|gen|disc|adv)_|contrast|(?:^|_)(?:info_?)?nce(?:_|$)|margin")


@PLAYBOOK.detector(("metrics",))
def detect_negative_loss(ctx: Context, th: dict) -> Detection | None:
    """Lines whose loss is below zero beside an accuracy that does not rise: targets outside the loss's range."""
    accs = M.names_like(ctx, ACC)
    losses = M.present(ctx, LOSSES)
    if not accs or not losses:
        return None
    rows = ctx.metrics_select("file", "line", "ts", "rank", "step", "name", "value", names=losses + accs)
    odd = M.names_like(ctx, NEGATIVE_OK)
    if odd:
        # A line that logs a term of a negative-by-design objective is not judged.
        mixed = ctx.metrics_select("file", "line", names=odd).unique()
        rows = rows.join(mixed, on=["file", "line"], how="anti")
    neg = rows.filter(pl.col("name").is_in(losses) & (pl.col("value") < th["negative_loss_below"]))
    acc = rows.filter(pl.col("name").is_in(accs)).group_by("file", "line").agg(pl.col("value").first().alias("acc"))
    # One row per line: the first negative loss of the line, with the line's accuracy.
    lines = (neg.sort("file", "line").unique(["file", "line"], keep="first", maintain_order=True)
             .join(acc, on=["file", "line"], maintain_order="left"))
    if lines.height < th["negative_loss_points"]:
        return None
    a = lines.get_column("acc")
    if float(a.max()) - float(a.item(0)) > th["negative_loss_acc_rise"] or float(a.median()) < th["negative_loss_min_acc"]:
        return None  # the accuracy rises (a likelihood objective that learns), or is no classification accuracy
    first = lines.row(0, named=True)
    summary = (f"{first['name']} is below zero ({M.fmt(first['value'])}) on {lines.height} lines that also report an accuracy "
               f"({M.fmt(float(a.item(0)), 3)} to {M.fmt(float(a.item(-1)), 3)}, not rising): a classification loss is never negative "
               "with valid targets, so the labels are outside the range the loss assumes")
    return Detection(
        summary=summary,
        onset=M.onset_at(first),
        evidence=M.quote_ends(lines),
        evidence_count=lines.height,
        causes={"targets_outside_loss_range": 0.9, "wrong_class_count": 0.6},
        confidence=0.8,
        severity=Severity.HIGH,
        facts={"negative_lines": lines.height, "first_loss": first["value"], "accuracy_first": float(a.item(0)),
               "accuracy_last": float(a.item(-1))},
    )

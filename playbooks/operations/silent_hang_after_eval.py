"""silent-hang from a log that ends in an evaluation run between epochs while much of the training remained."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import combine, detection, events
from forensics.playbooks.fields import field
from forensics.playbooks.operations.silent_hang import PLAYBOOK, run_errored

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# A trainer's announcement that it evaluates between epochs, and its progress lines with the time it still expects
# (parsers/signatures.toml: eval_in_training, progress_eta; yolact's train.py prints both).
EVAL_CODES = ("eval_in_training",)
PROGRESS_CODES = ("progress_eta",)
# The same evaluation also runs once after the last iteration (the ETA is then about zero): only an ETA this long says
# training had to go on after it (ours: far beyond the few seconds' rounding of a finished run).
MIN_ETA_S = 600


def _eta_seconds() -> pl.Expr:
    """`4 days, 0:01:33` / `0:10:00` -> seconds."""
    eta = field("eta")
    days = eta.str.extract(r"^(\d+) days?, ", 1).cast(pl.Int64, strict=False).fill_null(0)
    hms = eta.str.extract_groups(r"(\d+):(\d\d):(\d\d)$")
    return (days * 86400 + hms.struct.field("1").cast(pl.Int64) * 3600 + hms.struct.field("2").cast(pl.Int64) * 60
            + hms.struct.field("3").cast(pl.Int64))


@PLAYBOOK.detector(("events",))
def detect_end_in_eval(ctx: Context, th: dict) -> Detection | None:
    """The last thing a log shows is an evaluation between epochs (no progress line after it), the progress line before
    it expected far more training (its ETA at least ten minutes), and the run logged no error: training never resumed
    after the evaluation (dbolya/yolact#428, #623, #678: the next epoch's data-loader workers stuck, fixed by
    num_workers=0).

    Circumstantial (a paste may end with the evaluation's result), so low. The evaluation after the last iteration
    (ETA about zero) and one followed by progress or an error are no finding.
    """
    evals = events(ctx, EVAL_CODES)
    if evals.height == 0 or run_errored(ctx):
        return None
    progress = events(ctx, PROGRESS_CODES).with_columns(_eta_seconds().alias("_eta"))
    for file, last_eval in evals.group_by("file").agg(pl.col("line").max()).sort("file").iter_rows():
        mine = progress.filter(pl.col("file") == file)
        if mine.filter(pl.col("line") > last_eval).height:
            continue  # training went on after it
        before = mine.filter(pl.col("line") < last_eval).sort("line").tail(1)
        if before.height == 0 or (before.item(0, "_eta") or 0) < MIN_ETA_S:
            continue
        stop = evals.filter((pl.col("file") == file) & (pl.col("line") == last_eval))
        eta = before.select(field("eta")).item()
        return detection(combine(before.drop("_eta"), stop),
                         f"the log ends in an evaluation between epochs although the last progress line expected {eta} "
                         "more training, with no error: training never resumed after the evaluation (the next epoch's "
                         "data-loader workers or a collective stuck); unproven, as a paste may simply stop there",
                         {"stuck_dataloader": 0.7, "collective_deadlock": 0.3}, confidence=0.3, severity=Severity.LOW,
                         lead=stop)
    return None

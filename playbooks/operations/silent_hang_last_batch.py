"""silent-hang from a log that ends on a Keras progress bar one step short of its total (the epoch end never came)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import detection
from forensics.playbooks.fields import field
from forensics.playbooks.operations.silent_hang import PLAYBOOK, quiet_end

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity


# The log's last line is a Keras Progbar line (an `at_end` signature: parsers/signatures.toml, form keras_bar).
@PLAYBOOK.detector(("events",))
def detect_last_batch_end(ctx: Context, th: dict) -> Detection | None:
    """The log's last line is a Keras bar at `total - 1` of `total` steps, with no error in the run.

    Keras 2's ProgbarLogger draws a bar on each batch end only while fewer than `target` were seen, and the bar at the
    target in on_epoch_end, after the validation pass: a bar left one step short is an epoch whose end (the last batch,
    the hand-off to the validation generator) never finished, fit_generator's multiprocessing enqueuers being the usual
    deadlock (keras-team/keras#8595, matterport/Mask_RCNN#1588). A paste may stop there and a long validation pass looks
    the same for a while, so low. A bar anywhere else in the epoch is a paste cut mid-epoch: no finding.
    """
    bars = quiet_end(ctx, "keras_bar")
    if bars.height == 0:
        return None
    done = field("done").cast(pl.Int64, strict=False)
    total = field("total").cast(pl.Int64, strict=False)
    stop = bars.filter((total > 1) & (done == total - 1))
    if stop.height == 0:
        return None
    last = stop.select(done.alias("d"), total.alias("t")).row(0)
    return detection(stop, f"the log ends on a Keras progress bar at {last[0]}/{last[1]}, one step short of the epoch's "
                           "end, with no error: the last batch or the hand-off to validation never finished (a data "
                           "generator's worker deadlock); unproven, as a paste may simply stop there",
                     {"stuck_dataloader": 0.8, "collective_deadlock": 0.1}, confidence=0.35, severity=Severity.LOW)

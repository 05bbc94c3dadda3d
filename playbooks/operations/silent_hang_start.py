"""silent-hang from a log that stops on the start of training (or a finished restore) before any step was logged."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import detection
from forensics.playbooks.operations.silent_hang import PLAYBOOK, quiet_end

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity


# The log stops on `Starting training...`, `Restoring... Done.`, `Restoring parameters from <ckpt>`, or a trainer's last
# line before its first batch (YOLOX's `init prefetcher, …`, mmcv's runner start; not tf.data's `Shuffle buffer
# filled.`, which healthy runs end on too)
# (`at_end` signatures: parsers/signatures.toml, form train_start), at most a few number-free lines from its end.
@PLAYBOOK.detector(("events", "metrics"))
def detect_train_start_end(ctx: Context, th: dict) -> Detection | None:
    """A log that ends on a start-of-training announcement or a finished checkpoint restore, with no step or metric
    line anywhere in that log and no error in the run: the first step may never have come (a data pipeline that
    delivers no batch: tensorflow-wavenet#130's missing data_dir, light_head_rcnn#17's image loop; a deadlock in the
    first step: DEFT#17's import order).

    Circumstantial: a paste may stop there, and a first step can take minutes (detectron2#767), so low. A log with any
    metric line has made progress (an end there is a later phase a paste cut), and an error means the run crashed.
    """
    stop = quiet_end(ctx, "train_start")
    if stop.height == 0:
        return None
    files = stop.get_column("file").unique().to_list()
    progressed = (ctx.metric_lines().filter(pl.col("file").cast(pl.String).is_in(files))
                  .select(pl.col("file").cast(pl.String).unique()).collect().get_column("file").to_list())
    stop = stop.filter(~pl.col("file").is_in(progressed))
    if stop.height == 0:
        return None
    last = stop.row(0, named=True)
    return detection(stop, "the log stops at `" + str(last["message"]).strip()[:120] + "` with no step or metric line "
                           "logged and no error: the first step may never have come (a data pipeline that delivers no "
                           "batch, a deadlock in the first step); unproven, as a paste may simply stop there",
                     {"stuck_dataloader": 0.7, "collective_deadlock": 0.3}, confidence=0.3, severity=Severity.LOW)

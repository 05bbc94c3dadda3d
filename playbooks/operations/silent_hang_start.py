"""silent-hang from a log that stops on the start of training (or a finished restore) before any step was logged."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import detection
from forensics.playbooks.fields import field
from forensics.playbooks.operations.silent_hang import PLAYBOOK, quiet_end

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# A start announcement that names a non-zero iteration, step or epoch (`Starting training from iteration:600000`) is a
# resume: a resumed loop with nothing left to run (the checkpoint at or past the configured total) ends right there
# with no error and nothing more printed ([OBS] jingyuanli001/RFR-Inpainting#44: 600k restored, num_iters 450k;
# facebookresearch/detectron2#4885 and ibab/tensorflow-wavenet#151: a resume past max_iter / num_steps). Where such a
# log stops proves no wait; `... from iteration 0` or `from epoch 1` (a fresh start, counted from 0 or 1) still reads
# as one.
RESUMED = r"(?i)\bfrom (?:the )?(?:iter(?:ation)?|step|epoch)\b\s*[:=#]?\s*0*(?:[2-9]|[1-9]\d+)\b"


# The log stops on `Starting training...`, `Restoring... Done.`, `Restoring parameters from <ckpt>`, the first epoch's
# header, tf.distribute's all-reduce set-up of the first step, or a trainer's last line before its first batch (YOLOX's `init prefetcher, …`, mmcv's runner start; not tf.data's `Shuffle buffer
# filled.`, which healthy runs end on too)
# (`at_end` signatures: parsers/signatures.toml, form train_start), at most a few number-free lines from its end.
@PLAYBOOK.detector(("events", "metrics"))
def detect_train_start_end(ctx: Context, th: dict) -> Detection | None:
    """A log that ends on a start-of-training announcement (not a resume from a later iteration) or a finished
    checkpoint restore, with no step or metric line anywhere in that log and no error in the run: the first step may never have come (a data pipeline that
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
    stop = stop.filter(~pl.col("file").is_in(progressed) & ~pl.col("message").str.contains(RESUMED))
    if stop.height == 0:
        return None
    last = stop.row(0, named=True)
    # tf.distribute's all-reduce set-up is the first step's collective across replicas: a wait there is in it first.
    collective = stop.select(field("framework")).item(0, 0) == "tensorflow"
    causes = {"collective_deadlock": 0.7, "stuck_dataloader": 0.4} if collective else {"stuck_dataloader": 0.7, "collective_deadlock": 0.3}
    return detection(stop, "the log stops at `" + str(last["message"]).strip()[:120] + "` with no step or metric line "
                           "logged and no error: the first step may never have come (a data pipeline that delivers no "
                           "batch, a deadlock in the first step); unproven, as a paste may simply stop there",
                     causes, confidence=0.3, severity=Severity.LOW)

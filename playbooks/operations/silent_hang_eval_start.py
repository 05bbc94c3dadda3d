"""silent-hang from a log that stops at the start of a validation pass after training progress."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import detection
from forensics.playbooks.operations.silent_hang import PLAYBOOK, quiet_end

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity


# The log stops on `starting validation …` / `Running validation...` (an `at_end` signature: parsers/signatures.toml,
# form eval_start), at most a few number-free lines from its end.
@PLAYBOOK.detector(("events", "metrics"))
def detect_eval_start_end(ctx: Context, th: dict) -> Detection | None:
    """A log that ends on the announcement of a validation pass, after metric lines of training earlier in the same
    log, with no error in the run: the validation loader never yielded (MIC-DKFZ/medicaldetectiontoolkit#35: the
    class-balanced sampler loops forever over a validation split that lacks a class; data-loader workers stuck at the
    turn from training to validation).

    Circumstantial (a paste may stop there, and a long validation prints nothing until it ends), so low. A log with no
    training progress before the announcement (nothing shows training went on) and a run with an error are no finding.
    """
    stop = quiet_end(ctx, "eval_start")
    if stop.height == 0:
        return None
    firsts = stop.group_by("file").agg(pl.col("line").min().alias("_stop"))
    trained = (ctx.metric_lines().select(pl.col("file").cast(pl.String), "line").collect()
               .join(firsts, on="file").filter(pl.col("line") < pl.col("_stop"))
               .get_column("file").unique().to_list())
    stop = stop.filter(pl.col("file").is_in(trained))
    if stop.height == 0:
        return None
    return detection(stop, "the log stops at the start of a validation pass (`" + str(stop.item(0, "message")).strip()[:100]
                     + "`) after training progress, with no error: the validation loader or sampler never yielded a "
                       "batch; unproven, as a paste may simply stop there",
                     {"stuck_dataloader": 0.8, "collective_deadlock": 0.2}, confidence=0.3, severity=Severity.LOW)

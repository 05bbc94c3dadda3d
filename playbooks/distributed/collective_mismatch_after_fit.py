"""collective-mismatch from a collective that timed out after the training loop had ended (post-fit code on one rank)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.distributed.collective_mismatch import PLAYBOOK
from forensics.playbooks.distributed.nccl_timeout import TIMEOUT_CODES
from forensics.playbooks.evidence import combine, detection, events

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# The trainer's own line that its loop finished (Lightning's `Trainer.fit` stopped: …, transformers' `Training
# completed.`): parsers/signatures.toml, code train_loop_done.
DONE_CODES = ("train_loop_done",)


@PLAYBOOK.detector(("events",))
def detect_timeout_after_fit(ctx: Context, th: dict) -> Detection | None:
    """A collective timeout logged after the trainer said its loop was done, with no other error between them.

    Every collective of the loop completed on every rank by then (the trainer only ends the loop when all ranks reach
    the limit together), so the one left waiting was issued by code after fit that not every rank ran: a save, test or
    barrier inside `if trainer.is_global_zero:` / `rank == 0` (alan-turing-institute/autocast#381: save_checkpoint, a
    collective, called on rank 0 only). A crash of a peer after fit would show its own error first: not this rule.
    """
    done = events(ctx, DONE_CODES)
    if done.height == 0:
        return None
    first_done = done.group_by("file").agg(pl.col("line").min().alias("_done"))
    after = ctx.events_where(pl.col("file").is_in(first_done.get_column("file").to_list())).join(first_done, on="file").filter(pl.col("line") > pl.col("_done")).drop("_done")
    timeouts = after.filter(pl.col("code").is_in(TIMEOUT_CODES))
    if timeouts.height == 0:
        return None
    first = timeouts.sort("file", "line").row(0, named=True)
    # Another error before the timeout (a peer's crash, an exception in the post-fit code) is that error's finding.
    other = after.filter((pl.col("file") == first["file"]) & (pl.col("line") < first["line"])
                         & (pl.col("severity") == "error") & ~pl.col("code").is_in(TIMEOUT_CODES))
    if other.height:
        return None
    lead = timeouts.sort("file", "line").head(1)
    mark = done.filter(pl.col("file") == first["file"]).sort("line").head(1)
    return detection(combine(mark, timeouts), "a collective timed out after the training loop had ended ("
                     + str(mark.row(0, named=True)["message"]).strip()[:100] + "): it was issued by code after fit that "
                     "not every rank ran (a checkpoint save, test or barrier under a rank-0 condition)",
                     {"divergent_code_path": 0.9, "uneven_data": 0.1}, confidence=0.7, lead=lead)

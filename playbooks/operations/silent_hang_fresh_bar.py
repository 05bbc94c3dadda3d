"""silent-hang from a log that ends on a progress bar that never advanced, after an earlier loop finished."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import combine, detection, events
from forensics.playbooks.fields import field
from forensics.playbooks.operations.silent_hang import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# An earlier loop finished: its checkpoint was saved (the run did go round once; the next loop's loader is new).
DONE_CODES = ("checkpoint_saved",)
# The log's last line is tqdm's first draw of a bar (an `at_end` signature: parsers/signatures.toml, form fresh_bar).
END_CODES = ("log_end",)


@PLAYBOOK.detector(("events",))
def detect_fresh_bar_end(ctx: Context, th: dict) -> Detection | None:
    """The log's last line is a bar at 0 items and 0 seconds, and a checkpoint was saved before it in the same file:
    the next loop's first batch never came (data-loader workers stuck at the epoch boundary).

    A paste that simply ends at a new bar looks the same, so this is medium at most; a bar at the start of a
    run (no finished loop before it: sanity checks, the first epoch) is nothing.
    """
    ends = events(ctx, END_CODES).filter(field("form") == "fresh_bar")
    if ends.height == 0:
        return None
    done = events(ctx, DONE_CODES)
    for end in ends.iter_rows(named=True):
        before = done.filter((pl.col("file") == end["file"]) & (pl.col("line") < end["line"]))
        if before.height == 0:
            continue
        stop = ends.filter((pl.col("file") == end["file"]) & (pl.col("line") == end["line"]))
        return detection(combine(before.tail(1), stop),
                         "the log ends on a progress bar that never advanced (0 items after 0 s) after a checkpoint "
                         "was saved: the next loop's first batch never came", {"stuck_dataloader": 0.9, "collective_deadlock": 0.3},
                         confidence=0.5, severity=Severity.MEDIUM, lead=stop)
    return None

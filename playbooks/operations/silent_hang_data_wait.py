"""silent-hang from a log that stops on a data layer's announcement that it waits for a batch."""

from __future__ import annotations

from forensics.playbooks.evidence import detection
from forensics.playbooks.operations.silent_hang import PLAYBOOK, quiet_end

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity


# The log stops on Caffe's `Data layer prefetch queue empty` (an `at_end` signature: parsers/signatures.toml, form
# data_wait): the solver began waiting for a batch and nothing was logged after.
@PLAYBOOK.detector(("events",))
def detect_data_wait_end(ctx: Context, th: dict) -> Detection | None:
    """A log whose last line says the net waits for its data layer's next batch, with no error in the run: the batch
    never came (weiliu89/caffe#863 and chuanqi305/MobileNet-SSD#172: the annotated data layer's prefetch thread stuck,
    the program standing still forever after this line).

    Mid-log the line is an ordinary wait (the first at every net's start, then one per 1000 waits); only where a log
    stops does it say the batch never came, and a paste may stop there too, so low.
    """
    stop = quiet_end(ctx, "data_wait")
    if stop.height == 0:
        return None
    return detection(stop, "the log stops at the data layer's wait for a batch (`" + str(stop.item(0, "message")).strip()[:100]
                     + "`) with nothing after it and no error: the batch never came (its prefetch thread stuck); "
                       "unproven, as a paste may simply stop there",
                     {"stuck_dataloader": 0.9}, confidence=0.3, severity=Severity.LOW)

"""silent-hang from a Ctrl-C traceback whose innermost frame is a blocking wait (a hang the user interrupted)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import detection, events
from forensics.playbooks.failure_signals import CTRL_C
from forensics.playbooks.fields import field
from forensics.playbooks.operations.silent_hang import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# Innermost frames that block until something else happens: a queue or pipe read, a lock, a thread join, a select,
# a collective or a device synchronisation. Interrupting a run there shows where it waited when it was stopped.
WAIT_FUNCTIONS = (r"^(?:wait|_wait\w*|wait_for\w*|get|_get_data|_try_get_data|poll|_poll|recv|recv_bytes|_recv\w*|select|"
                  r"acquire|join|barrier|monitored_barrier|all_reduce|all_gather\w*|broadcast|reduce_scatter\w*|"
                  r"synchronize|_store_based_barrier)$")
DATA_TEXT = r"(?i)dataloader|data/_utils|_worker"
COLLECTIVE_TEXT = r"(?i)distributed|c10d|nccl|all_reduce|barrier|all_gather|broadcast"


@PLAYBOOK.detector(("events",))
def detect_interrupted_wait(ctx: Context, th: dict) -> Detection | None:
    """A KeyboardInterrupt (or a `^C` pasted before the traceback) raised inside a blocking wait.

    An interrupt is how people stop a run that hangs, and also how they stop a healthy one: alone it proves no
    hang, so the finding is low severity and names the frame it waited in; an interrupt in ordinary work is
    nothing at all.
    """
    tb = events(ctx, ("python_traceback",))
    if tb.height == 0:
        return None
    interrupted = tb.filter((field("exc_type").fill_null("").str.contains(r"KeyboardInterrupt$") | pl.col("text").str.contains(CTRL_C))
                            & field("function").fill_null("").str.contains(WAIT_FUNCTIONS))
    if interrupted.height == 0:
        return None
    row = interrupted.row(0, named=True)
    frame = ctx.events.filter((pl.col("file") == row["file"]) & (pl.col("line") == row["line"])).select(
        field("function").alias("function"), field("file").alias("src"), field("line").alias("src_line")).row(0, named=True)
    where = f"{frame['function']} ({frame['src'].replace(chr(92), '/').rsplit('/', 1)[-1]}:{frame['src_line']})"
    text = row["text"] or ""
    if pl.Series([text]).str.contains(DATA_TEXT).item():
        causes = {"stuck_dataloader": 0.9}
    elif pl.Series([text]).str.contains(COLLECTIVE_TEXT).item():
        causes = {"collective_deadlock": 0.7, "dead_peer": 0.4}
    else:
        causes = {"stuck_dataloader": 0.4, "collective_deadlock": 0.4}
    step = f" after step {row['step']}" if row.get("step") is not None else ""
    return detection(interrupted, f"the run was interrupted (Ctrl-C){step} while blocked in {where}: if its progress had "
                                  "stopped before the interrupt, this is where it hung", causes,
                     confidence=0.4, severity=Severity.LOW)

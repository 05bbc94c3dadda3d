"""silent-hang from a Ctrl-C traceback whose innermost frame is a blocking wait (a hang the user interrupted)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import detection, events
from forensics.playbooks.failure_signals import CTRL_C, INTERRUPT_CODES, after_interrupt
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
# A log that ends in frames with neither opener nor exception line (parsers/blocks/tails.py cut_stacks).
STACK_CODES = ("python_stack",)
# The frames every child process's traceback starts with (multiprocessing/process.py `_bootstrap` -> `run`): no frame
# of the child's own work; the file names a child process's traceback.
BOOTSTRAP_FUNCTIONS = r"^(?:_bootstrap|run)$"
CHILD_TEXT = r"multiprocessing[/\\]process\.py"


@PLAYBOOK.detector(("events",))
def detect_interrupted_wait(ctx: Context, th: dict) -> Detection | None:
    """A KeyboardInterrupt (or a `^C` echoed before the traceback) raised inside a blocking wait; a log that ends in a
    stack (no opener, no exception line) whose innermost frame is such a wait; or a `^C` that interrupted worker
    processes whose tracebacks show no frame of work.

    An interrupt is how people stop a run that hangs, and also how they stop a healthy one: alone it proves no
    hang, so the finding is low severity and names the frame it waited in; an interrupt in ordinary work (a forward,
    a worker's `__getitem__`) is nothing at all.
    """
    tb = events(ctx, ("python_traceback",))
    interrupted = tb.filter(field("exc_type").fill_null("").str.contains(r"KeyboardInterrupt$") | pl.col("text").str.contains(CTRL_C)
                            | after_interrupt(ctx, tb))
    waits = field("function").fill_null("").str.contains(WAIT_FUNCTIONS)
    waiting = interrupted.filter(waits)
    if waiting.height:
        return _waiting(ctx, waiting, "the run was interrupted (Ctrl-C){step} while blocked in {where}: if its progress had "
                                      "stopped before the interrupt, this is where it hung")
    stack = events(ctx, STACK_CODES).filter(waits)
    if stack.height:
        return _waiting(ctx, stack, "the log ends in a Python stack with no exception line whose innermost frame is a "
                                    "blocking wait, {where}{step}: where the process waited when the stack was printed "
                                    "(a Ctrl-C traceback cut by the paste, or a dump of a stuck process)")
    return _interrupted_idle_workers(ctx, interrupted, waits)


def _waiting(ctx: Context, found: pl.DataFrame, summary: str) -> Detection:
    """The finding for the first of `found` (tracebacks or stacks whose innermost frame waits), naming that frame."""
    row = found.row(0, named=True)
    frame = ctx.events_where((pl.col("file") == row["file"]) & (pl.col("line") == row["line"])
                              & (pl.col("code") == row["code"])).select(
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
    return detection(found, summary.format(step=step, where=where), causes, confidence=0.4, severity=Severity.LOW)


def _interrupted_idle_workers(ctx: Context, interrupted: pl.DataFrame, waits: pl.Expr) -> Detection | None:
    """A `^C` after which worker processes print their `Process <name>:` tracebacks, none of which (nor the main
    process's) reaches a frame of work: every innermost frame known is the children's bootstrap or a wait, or the
    paste cut the frames (chainer/chainer#2903: MultiprocessIterator workers deadlocked in OpenCV's threads).

    The thinnest of these proofs (an interrupt whose tracebacks say little): low, naming the data-loading workers.
    """
    echo = ctx.events_of(*INTERRUPT_CODES)
    if echo.height == 0 or interrupted.height == 0:
        return None
    first = echo.get_column("line").min()
    after = interrupted.filter(pl.col("line") >= first)
    # Worker processes: the echo names one (`^CProcess Process-8:`), or a traceback after it runs in a child.
    names = echo.select(field("process")).to_series().drop_nulls().unique(maintain_order=True).to_list()
    if after.height == 0 or not (names or after.filter(pl.col("text").str.contains(CHILD_TEXT)).height):
        return None
    fn = field("function").fill_null("")
    if after.filter(~(fn.str.contains(BOOTSTRAP_FUNCTIONS) | (fn == "") | waits)).height:
        return None  # a traceback shows work under way (a forward, a worker's __getitem__): an ordinary interrupt
    named = f" ({', '.join(names[:4])})" if names else ""
    return detection(pl.concat([echo.head(1), after], how="vertical_relaxed"),
                     f"the run was interrupted (Ctrl-C) while its worker processes{named} were alive, and no traceback "
                     "shows work under way: if its progress had stopped before the interrupt, the data-loading workers "
                     "are where it hung", {"stuck_dataloader": 0.7, "collective_deadlock": 0.2},
                     confidence=0.3, severity=Severity.LOW)

"""silent-hang from a log that stops inside a JIT extension build or load (it waits on a stale lock file)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import detection, events
from forensics.playbooks.fields import field
from forensics.playbooks.operations.silent_hang import PLAYBOOK, run_errored

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# torch.utils.cpp_extension's `Using <root> as PyTorch extensions root...` (printed before it takes the build
# directory's lock), and a project's own warning that the `lock` file is already there.
BUILD_CODES = ("torch_extensions_root", "torch_extension_lock")
# The log's last line is one of those, or StyleGAN's `Setting up PyTorch plugin "<name>"...` with no `Done.` after it
# (an `at_end` signature: parsers/signatures.toml, form extension_build); or a later line of the same build sequence
# (`Emitting ninja build file`, `Building extension module X...`, `Loading extension module X...`: step build_or_load).
END_CODES = ("log_end",)


@PLAYBOOK.detector(("events",))
def detect_extension_lock(ctx: Context, th: dict) -> Detection | None:
    """The log's last line is the extensions-root line, the lock warning or a plugin set-up line with no `Done.`: no
    build, load or training after.

    A healthy load goes on (`Emitting ninja build file`, `Loading extension module X...`, `... Done.`, the first steps),
    so the same line anywhere but at the end is nothing. With the lock warning the cause is in the log (high); with the
    root or plugin line alone the end of the log is the only proof (medium). A later line of the sequence as the last
    line is reported apart (`_stopped_in_build_or_load`).
    """
    stop = events(ctx, END_CODES).filter(field("form") == "extension_build")
    if stop.height == 0:
        return None
    if stop.filter(field("step") == "build_or_load").height:
        return _stopped_in_build_or_load(ctx, stop)
    files = stop.get_column("file").cast(pl.String).implode()
    ev = events(ctx, BUILD_CODES).filter(pl.col("file").cast(pl.String).is_in(files))
    lock = ev.filter(pl.col("code") == "torch_extension_lock")
    root = ev.select(field("root").alias("r")).get_column("r").drop_nulls()
    plugin = stop.select(field("plugin").alias("p")).get_column("p").drop_nulls()
    where = (f"; the lock warned of: {lock.select(field('lock')).item(0, 0)}" if lock.height
             else f" (look for a `lock` file under {root[0]})" if root.len()
             else f" (look for a `lock` file under the torch_extensions cache's {plugin[0]} folder)" if plugin.len() else "")
    # A plugin line alone (brief verbosity prints no extensions root): the stop itself is the evidence.
    ev = ev if ev.height else stop
    return detection(ev, "the log stops at the JIT extension build's start (`Using … as PyTorch extensions root...` or "
                         "`Setting up PyTorch plugin \"…\"...`) with no build, load or progress after it: the build "
                         f"waits on a stale lock file{where}",
                     {"stale_build_lock": 0.9}, confidence=0.75 if lock.height else 0.6,
                     severity=None if lock.height else Severity.MEDIUM,
                     lead=lock if lock.height else None)


def _stopped_in_build_or_load(ctx: Context, stop: pl.DataFrame) -> Detection | None:
    """The log's last line is a later line of the same JIT sequence (`Emitting ninja build file …`, `Building extension
    module X...`, `Allowing ninja …`, `Loading extension module X...`): the build or the import of the built library
    never returned.

    Low: a compile may still be running when a paste is taken, and a program may send its output elsewhere right after
    the load (Matrix-ASC/DeLA#14). An error anywhere in the run means it crashed, and its playbook says why.
    """
    if run_errored(ctx):
        return None
    last = stop.row(0, named=True)
    files = stop.get_column("file").cast(pl.String).implode()
    root = events(ctx, BUILD_CODES).filter(pl.col("file").cast(pl.String).is_in(files)).select(field("root").alias("r"))
    root = root.get_column("r").drop_nulls()
    where = f"the extension's folder under {root[0]}" if root.len() else "the torch_extensions cache (~/.cache/torch_extensions)"
    return detection(stop, "the log stops inside torch.utils.cpp_extension's JIT build/load (" + str(last["message"])[:120] +
                           ") with nothing after it: the build or the import of the built library never returned (a "
                           f"stale `lock` or half-written build in {where}; delete it and rerun)",
                     {"stale_build_lock": 0.9}, confidence=0.4, severity=Severity.LOW)

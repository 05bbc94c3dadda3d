"""Progress bars on stderr (tqdm) for ingest and analysis: only on a terminal, and only past a couple of seconds."""

from __future__ import annotations

import os
import sys
from typing import Protocol, TextIO

from tqdm import tqdm


class Meter(Protocol):
    """What ingest and analysis report their progress to (a tqdm bar): a total, then increments."""

    total: float | None

    def update(self, n: float = 1) -> object: ...


# Seconds before a bar shows: a quick run prints nothing extra (FORENSICS_PROGRESS_DELAY overrides it).
DELAY = 2.0


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal a person watches (a pipe, a file or a captured stream is not)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def bar(desc: str, total: int | None = None, unit: str = "B", enabled: bool = True) -> tqdm:
    """A bar of `total` units (bytes by default: shown as MiB/GiB, with rate and ETA) on stderr.

    Disabled (every call a no-op) when `enabled` is false (--quiet, a JSON report on stdout) or stderr
    is not a terminal. It appears only after DELAY seconds and is erased when closed, so what a run
    prints on stderr stays the same with or without it."""
    stream = sys.stderr
    try:
        delay = float(os.environ.get("FORENSICS_PROGRESS_DELAY", DELAY))
    except ValueError:
        delay = DELAY
    return tqdm(
        total=total, desc=desc, unit=unit, unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000,
        file=stream, disable=not (enabled and is_terminal(stream)), delay=delay, leave=False,
        mininterval=0.2,
    )

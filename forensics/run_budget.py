"""A run-wide budget on decompressed bytes: many files each filling their own budget cannot add up past it.

Each compressed file is cut at its own budget (`sources.decompress_budget`: 50x its size, at least 64 MiB), so a
folder of a thousand small bombs would still let through a thousand times 64 MiB. The run folder's total of
decompressed bytes is bounded too (FORENSICS_MAX_RUN_DECOMPRESSED_GB, default 32 GiB; plain files are not counted:
their bytes are on disk). A real run's compressed logs stay far under it, so nothing is measured then. Past it the
files are measured in file order, decompression only, no parsing: the one that crosses the budget is read up to it
and marked `partial`, the later ones are not read and get a `partial` row saying so. File order, not parse order,
decides, so a serial and a parallel ingest cut the same files at the same bytes.
"""

from __future__ import annotations

import os

from forensics.discover import Skipped
from forensics.sources import Source, decompress_budget

DEFAULT_MAX_RUN_DECOMPRESSED_GB = 32


def run_budget() -> int:
    """Decompressed bytes one run folder may let through, at most (read when an ingest starts)."""
    try:
        gb = float(os.environ.get("FORENSICS_MAX_RUN_DECOMPRESSED_GB", DEFAULT_MAX_RUN_DECOMPRESSED_GB))
    except ValueError:
        gb = DEFAULT_MAX_RUN_DECOMPRESSED_GB
    return max(0, int(gb * 1024**3))


def _decompressed(src: Source, cap: int) -> int:
    """The decompressed bytes `src` yields, counted up to `cap` + 1 (its own budget also stops it)."""
    buf = bytearray(4 * 1024 * 1024)
    got = 0
    with src.open() as fh:
        while got <= cap and (n := fh.readinto(buf)):
            got += n
    return got


def apply(sources: list[Source]) -> tuple[list[Source], list[Skipped]]:
    """The sources to parse, each compressed one capped at its share of the run budget, and rows for those that
    the spent budget leaves unread. Sources are in file order."""
    budget = run_budget()
    packed = [s for s in sources if s.compression]
    if sum(min(s.max_decompressed, decompress_budget(s.size)) for s in packed) <= budget:
        return sources, []  # even every file at its own budget fits: nothing to measure
    left = budget
    kept: list[Source] = []
    unread: list[Skipped] = []
    for src in sources:
        if src.compression:
            if left <= 0:
                unread.append(Skipped(src.rel, "partial", f"not read: the run folder's budget of {budget // 1024**2:,} MiB "
                                      "decompressed (FORENSICS_MAX_RUN_DECOMPRESSED_GB) was spent on the files before it",
                                      src.size))
                continue
            src.max_decompressed = min(src.max_decompressed, left)
            try:
                left -= min(_decompressed(src, src.max_decompressed), src.max_decompressed)
            except Exception:  # noqa: BLE001 - the parse reports a file it cannot read; it counts as read whole here
                left -= src.max_decompressed
        kept.append(src)
    return kept, unread

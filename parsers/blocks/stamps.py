"""A block without a time of its own takes the stamp of the error record printed right above it."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
from forensics.parsers.prefixes import split_prefixes

# The record an exception block belongs to when it is printed right under it: Python logging's `logger.exception` /
# `exc_info=True` (`... - ERROR - Training failed: ...` then `Traceback ...`), c10's `[E ...]` / glog `E0626 ...` record
# whose message ends where the C++ dump starts. Read in the prefix that split_prefixes cut off the record.
_ERROR_RECORD = re.compile(r"(?<![A-Za-z])(?:ERROR|CRITICAL|FATAL|EXCEPTION)(?![A-Za-z])|^\[?[EF](?:\d{3,4} | )")


def stamp_from_record_above(frame: pl.DataFrame, rows: list[dict], year: int) -> None:
    """Give a block event without a time the stamp of the error record on the line right above its first line.

    A traceback or dump has no stamp of its own; the record that announced it has (the same moment). Only the
    line right above counts, only an error-level record, and only of the same rank where both name one. The
    few lines looked at are prefix-split together (one per block event, never all lines).
    """
    need = [r for r in rows if r["ts"] is None and r["line"] > 1]
    if not need:
        return
    lines = frame.get_column("line").to_numpy()
    at = np.searchsorted(lines, np.asarray([r["line"] for r in need], dtype=lines.dtype)) - 1
    ok = at >= 0
    if not ok.any():
        return
    above = frame.select("line", "seg", "text")[at[ok].tolist()]
    above = split_prefixes(above, year)
    for r, rec in zip([r for r, k in zip(need, ok, strict=True) if k], above.iter_rows(named=True), strict=True):
        if rec["ts"] is None or rec["line"] != r["line"] - 1:
            continue
        text, msg = rec["text"], rec["msg"] or ""
        head = text[: len(text) - len(msg)] if text.endswith(msg) else text
        if not _ERROR_RECORD.search(head):
            continue
        if r["rank"] is not None and rec["rank"] is not None and r["rank"] != rec["rank"]:
            continue
        r["ts"] = rec["ts"]

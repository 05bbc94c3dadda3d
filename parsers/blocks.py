"""Multi-line blocks as single events: Python tracebacks (more block kinds to come)."""

from __future__ import annotations

import polars as pl

from parsers.signatures import SCHEMA

NEEDLES = ["Traceback (most recent call last)"]


def extract(frame: pl.DataFrame, cand: pl.DataFrame, year: int) -> pl.DataFrame:
    """Block events found in one frame (`cand` holds the prefix-split candidate lines)."""
    return pl.DataFrame(schema=SCHEMA)

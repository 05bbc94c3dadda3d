"""Helpers of the metric tests: ingest text, get (step, name, value) rows with NaN made comparable."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl

from forensics.ingest import ingest
from tests.helpers import frame, write_run

NAN = "nan"


def _v(x: float) -> float | str:
    return NAN if isinstance(x, float) and math.isnan(x) else x


def metrics(tmp: Path, files: dict[str, str | bytes]) -> pl.DataFrame:
    """The metrics table of a run made of `files`, in file/line order."""
    run = ingest(write_run(tmp, files))
    return frame(run, "metrics").sort("file", "line", maintain_order=True)


def rows(tmp: Path, text: str | bytes, name: str = "train.log") -> list[tuple]:
    """(step, name, value) of every metric row of one log, NaN as the string "nan"."""
    m = metrics(tmp, {name: text})
    return [(s, n, _v(v)) for s, n, v in m.select("step", "name", "value").iter_rows()]


def full(tmp: Path, text: str | bytes, name: str = "train.log") -> list[tuple]:
    """(line, rank, step, name, value, source) rows of one log."""
    m = metrics(tmp, {name: text})
    return [(ln, r, s, n, _v(v), src) for ln, r, s, n, v, src in m.select("line", "rank", "step", "name", "value", "source").iter_rows()]

"""Test helpers: write a small run folder and ingest it."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from forensics.ingest import Run, ingest


def write_run(tmp: Path, files: dict[str, str | bytes], name: str = "run") -> Path:
    """Create a run folder `tmp/name` with the given relative paths and contents."""
    root = tmp / name
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)
    return root


def ingest_text(tmp: Path, text: str, name: str = "train.log") -> Run:
    """Ingest one text log held in a string."""
    return ingest(write_run(tmp, {name: text}))


def frame(run: Run, table: str) -> pl.DataFrame:
    """A table of the run as a polars frame with plain (non-categorical) strings."""
    df = pl.from_arrow(run.table(table))
    return df.with_columns(pl.col(pl.Categorical).cast(pl.String))

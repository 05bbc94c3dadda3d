"""Checkpoint saves of the run: the `checkpoint_saved` events (an info row of the signature table), with their step."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

# The step a line names, most specific first (run by polars' linear-time regex engine, one extract each).
STEP = (
    r"(?i)checkpoint[-_](\d+)\b",
    r"(?i)global_step[_ ]?(\d+)",
    r"(?i)\biteration[: ]+(\d+)",
    r"(?i)@ ?(\d+) updates",
    r"(?i)\bstep[_=: -]?(\d+)",
    r"(?i)\b(?:ckpt|iter)[_-]?(\d+)",
)
# Errors that mean a save started on the line before them did not complete.
FAIL_CODES = ("checkpoint_write_failed", "checkpoint_permission_denied", "no_space_left", "permission_denied")
# How many lines after a "saving" line a failure still belongs to it.
FAIL_WINDOW = 40
MAX_TEXT = 300


@dataclass(frozen=True)
class Save:
    """One checkpoint save line."""

    file: str
    line: int
    text: str
    step: int | None
    failed: bool


def _step_of(text: pl.Expr) -> pl.Expr:
    """The step a line names: the first of STEP that matches (one vectorised extract per pattern)."""
    # Digits too long for an Int64 are no step (strict=False gives null, as no match would).
    return pl.coalesce([text.str.extract(rx, 1).cast(pl.Int64, strict=False) for rx in STEP])


def save_rows(events: pl.DataFrame) -> pl.DataFrame:
    """Every checkpoint save line of the logs (the `checkpoint_saved` events ingest found) as the columns of `Save`,
    in file order (step null when the line names none): a long run saves thousands of times."""
    if events.height == 0:
        return pl.DataFrame(schema={"file": pl.String, "line": pl.Int64, "text": pl.String, "step": pl.Int64, "failed": pl.Boolean})
    found = events.filter(pl.col("code") == "checkpoint_saved").select("file", "line", "text").sort("line")
    # The nearest failure at or after the line below each save, in the same file (one as-of join, not a scan per save).
    fails = (events.filter(pl.col("code").is_in(list(FAIL_CODES))).select("file", pl.col("line").alias("_fail"))
             .with_columns(pl.col("_fail").alias("_key")).sort("_key"))
    found = found.with_columns((pl.col("line") + 1).alias("_key")).join_asof(
        fails, on="_key", by="file", strategy="forward", check_sortedness=False).sort("file", "line")
    failed = (pl.col("_fail") - pl.col("line") <= FAIL_WINDOW).fill_null(False)
    return found.select("file", "line", pl.col("text").str.strip_chars().str.slice(0, MAX_TEXT), _step_of(pl.col("text")).alias("step"),
                        failed.alias("failed"))


def find_saves(events: pl.DataFrame) -> list[Save]:
    """Every checkpoint save line of the logs, in file order (step None when the line names none)."""
    return [Save(*r) for r in save_rows(events).iter_rows()]


def last(rows: pl.DataFrame) -> Save | None:
    """The last of some save rows, if any."""
    return Save(*rows.row(-1)) if rows.height else None

"""Headerless numeric columns after a step (`76970 2.6265104`, `10: nan nan`): a loop's `print(step, loss)` read as loss parts.

A training script that prints its counter and its losses with no names (`print(step, loss)`, `print('{}: {} {}'.format(
step, loss_d, loss_g))`) gives lines of bare numbers: the BART pretraining loop of prajdabre/yanmtt#7 (`76970 2.6265104`
then `76980 nan`, with `...` and `Saving the model` lines between), AYLIEN/gan-intro#1 (`0: inf  nan`, the step, the
discriminator and the generator loss every 10 steps). Nothing names the columns, so they are read only when a repeated
shape says what they are: at least MIN_ROWS such lines with the same number of columns, the first an integer that
grows strictly from line to line (a step counter), and some value a float or NaN/Inf (not a table of counts). Each
value column becomes `unnamed_loss` (`unnamed_loss_1`, `_2`, .. with several): a loss part, which only the NaN
detector reads (metric_series.LOSS_PART): an unnamed column is never taken as *the* training loss for spike,
stagnation or divergence rules, since it could be an accuracy or a time; a NaN there is a non-finite training value
either way.

Stepless decimal columns (`2.302583 0.117188`, a loop's `print(loss, acc)`): the purine2 nin_cifar example's
`loss_ = { softmaxloss->loss()[0], acc->loss()[0] }` printed bare, one pair per iteration (purine/purine2#16). With
no step and no name, nothing says which column is which, so they are read only as MIN_STEPLESS_ROWS or more lines of
the same count (2 to 4) of decimal numbers (every value with a point: counts and ids are no such columns), named
`unnamed_1`, `unnamed_2`, .. (no loss part: a NaN there is no NaN loss), the row's place in the log standing in for
the step; only the chance rule of loss-stagnation reads them (a pair of columns at ln(K) and 1/K).
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM
from forensics.parsers.prefixes import unquote

MIN_ROWS = 3
# The step, an optional `:` after it, then one or more numbers; nothing else on the line.
ROW = rf"^\s*(\d+):?\s+((?:{NUM})(?:\s+(?:{NUM}))*)\s*$"
SCHEMA = {"line": pl.Int64, "step": pl.Int64, "name": pl.String, "value": pl.Float64}
MIN_STEPLESS_ROWS = 5
# A decimal number (a point in it), or NaN/Inf; two to four of them and nothing else on the line.
DEC = r"[-+]?(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?i:nan|inf)"
STEPLESS = rf"^\s*((?:{DEC})(?:\s+(?:{DEC})){{1,3}})\s*$"


def from_log(frame: pl.DataFrame) -> pl.DataFrame:
    """Metric rows (line, step, name, value) of the headerless step/value lines of one frame of a text log."""
    text = unquote(frame.get_column("text"))
    # A cheap literal test first: a bare-number line starts with a digit after optional spaces.
    f = frame.select("line", text.alias("text")).filter(pl.col("text").str.contains(r"^\s*\d"))
    # One regex pass gives both groups; a line that does not match has null groups.
    m = f.select("line", pl.col("text").str.extract_groups(ROW).alias("_m")).unnest("_m").filter(pl.col("1").is_not_null())
    if m.height < MIN_ROWS:
        return _stepless(f)
    g = m.select("line", pl.col("1").cast(pl.Int64, strict=False).alias("step"),
                 pl.col("2").str.split(" ").list.eval(pl.element().filter(pl.element() != "")).alias("_vals"))
    g = g.with_columns(pl.col("_vals").list.len().alias("_k"))
    # Per column count: a strictly growing step on every line, some value a float or NaN/Inf, enough lines.
    ok = g.group_by("_k").agg(
        pl.len().alias("_n"),
        (pl.col("step").sort_by("line").diff().drop_nulls() > 0).all().alias("_up"),
        pl.col("_vals").list.eval(pl.element().str.contains(r"[.eE]|(?i:nan|inf)").any()).explode().any().alias("_float"),
    ).filter((pl.col("_n") >= MIN_ROWS) & pl.col("_up") & pl.col("_float"))
    g = g.join(ok.select("_k"), on="_k", how="semi", maintain_order="left")
    if g.height == 0:
        return _stepless(f)
    long = g.with_columns(pl.int_ranges(1, pl.col("_k") + 1).alias("_c")).explode("_vals", "_c")
    name = pl.when(pl.col("_k") == 1).then(pl.lit("unnamed_loss")).otherwise(pl.lit("unnamed_loss_") + pl.col("_c").cast(pl.String))
    return long.select("line", "step", name.alias("name"), pl.col("_vals").cast(pl.Float64, strict=False).alias("value")).filter(
        pl.col("value").is_not_null()).cast(SCHEMA)


def _stepless(f: pl.DataFrame) -> pl.DataFrame:
    """Rows (line, null step, `unnamed_<i>`, value) of the stepless decimal-column lines of a frame (see the module)."""
    c = f.filter(pl.col("text").str.contains(r"^\s*[-+]?\.?\d")).select(
        "line", pl.col("text").str.extract(STEPLESS, 1).alias("_t")).filter(pl.col("_t").is_not_null())
    if c.height < MIN_STEPLESS_ROWS:
        return pl.DataFrame(schema=SCHEMA)
    g = c.select("line", pl.col("_t").str.replace_all(r"\s+", " ").str.split(" ").list.eval(pl.element().filter(pl.element() != "")).alias("_vals"))
    g = g.with_columns(pl.col("_vals").list.len().alias("_k"))
    # One shape only: the column count most lines have, with enough lines.
    top = g.group_by("_k").len().sort(["len", "_k"], descending=True).row(0)
    if top[1] < MIN_STEPLESS_ROWS:
        return pl.DataFrame(schema=SCHEMA)
    g = g.filter(pl.col("_k") == top[0])
    long = g.with_columns(pl.int_ranges(1, pl.col("_k") + 1).alias("_c")).explode("_vals", "_c")
    return long.select("line", pl.lit(None, pl.Int64).alias("step"), (pl.lit("unnamed_") + pl.col("_c").cast(pl.String)).alias("name"),
                       pl.col("_vals").cast(pl.Float64, strict=False).alias("value")).filter(pl.col("value").is_not_null()).cast(SCHEMA)

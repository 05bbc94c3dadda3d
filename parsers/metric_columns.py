"""Column tables of metrics: a header row of names, then rows of bare numbers (chainer PrintReport, tab-separated logs)."""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM
from forensics.parsers.metric_names import prose_names
from forensics.parsers.prefixes import unquote

# A header: two or more names separated by a tab or by two or more spaces (hand-aligned), one of them a loss.
# Names hold words, `/` (chainer's `validation/main/loss`), `@`, dots, dashes and single spaces (`Train Loss`).
_NAME = r"[A-Za-z][\w/@.()%-]*(?: [A-Za-z][\w/@.()%-]*)*"
HEADER = rf"^\s*{_NAME}(?:(?:\t| {{2,}})\s*{_NAME})+\s*$"
# A row: only numbers, separated by whitespace.
ROW = rf"^\s*{NUM}(?:\s+{NUM})+\s*$"
STEP_NAMES = ("epoch", "iteration", "iter", "step")
SCHEMA = {"line": pl.Int64, "step": pl.Int64, "name": pl.String, "value": pl.Float64}


def from_log(frame: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Metric rows (line, step, name, value) of the column tables in one frame of a text log.

    A header is remembered across frames (`state["columns"]`); a numeric row is read only when its count
    of fields equals its header's, so a stray number line or another table's rows give nothing."""
    # A table pasted inside a Markdown quote reads like the original (the raw text keeps the `> ` marks).
    frame = frame.with_columns(unquote(frame.get_column("text")).alias("text"))
    # Cheap literal scans first: most frames have no header, and then no row is looked at.
    heads = frame.filter(pl.col("text").str.contains_any(["loss"], ascii_case_insensitive=True))
    heads = heads.filter(pl.col("text").str.contains(HEADER)).select("line", _split(pl.col("text"), r"\s*(?:\t| {2,})\s*").alias("_names"))
    last = state.get("columns")
    if heads.height:
        state["columns"] = heads.get_column("_names").to_list()[-1]
    elif last is None:
        return pl.DataFrame(schema=SCHEMA)
    body = (frame.filter(pl.col("text").str.contains(r"^\s*[-+.\d]")).filter(pl.col("text").str.contains(ROW))
            .select("line", _split(pl.col("text"), r"\s+").alias("_vals")))
    if body.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    # Each row takes the last header above it (or the one carried from an earlier frame).
    both = pl.concat([heads, body], how="diagonal").sort("line")
    if last is not None:
        carried = pl.DataFrame({"line": [-1], "_names": [last]}, schema={"line": frame.schema["line"], "_names": pl.List(pl.String)})
        both = pl.concat([carried, both], how="diagonal")
    rows = (both.with_columns(pl.col("_names").forward_fill())
            .filter(pl.col("_vals").is_not_null() & pl.col("_names").is_not_null()
                    & (pl.col("_vals").list.len() == pl.col("_names").list.len())))
    if rows.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    long = rows.explode("_names", "_vals").select(
        "line", pl.col("_names").alias("raw"), pl.col("_vals").str.replace_all(",", "").cast(pl.Float64, strict=False).alias("value"))
    names = prose_names(long.get_column("raw"), snake_rest=True)
    long = long.with_columns(pl.col("raw").replace_strict(names, default=None, return_dtype=pl.String).alias("name"))
    step = long.filter(pl.col("name").is_in(STEP_NAMES)).group_by("line").agg(pl.col("value").first().cast(pl.Int64).alias("step"))
    out = long.join(step, on="line", how="left").filter(~pl.col("name").is_in(STEP_NAMES) | pl.col("name").eq("epoch"))
    return out.filter(pl.col("value").is_not_null()).select(list(SCHEMA)).cast(SCHEMA).sort("line")


def _split(text: pl.Expr, sep: str) -> pl.Expr:
    """Fields of a stripped line split on a separator regex (through a unit-separator character)."""
    return text.str.strip_chars().str.replace_all(sep, "\x1f").str.split("\x1f")

"""Column tables of metrics: a header row of names, then rows of bare numbers (chainer PrintReport, fastai fit tables, tab-separated logs)."""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM
from forensics.parsers.metric_names import prose_names
from forensics.parsers.prefixes import unquote

# A header: two or more names separated by a tab or by two or more spaces (hand-aligned), one of them a loss.
# Names hold words, `/` (chainer's `validation/main/loss`), `@`, dots, dashes and single spaces (`Train Loss`).
_NAME = r"[A-Za-z][\w/@.()%-]*(?: [A-Za-z][\w/@.()%-]*)*"
HEADER = rf"^\s*{_NAME}(?:(?:\t| {{2,}})\s*{_NAME})+\s*$"
# fastai's fit results table (`Recorder` printed to a terminal; [OBS] fastai/fastai#2512, #941, timeseriesAI/tsai#204,
# n-waves/ulmfit-multilingual logs): `epoch     train_loss  valid_loss  accuracy  time`, one row per epoch,
# `0         0.453252    0.395130    0.822080  36:45` (v1: no `time`, 1-based epochs; `#na#` where no validation set).
# Pasted into a GitHub issue outside a code block, Markdown collapses the spaces and takes `_loss valid_` as
# italics, leaving `epoch train loss valid loss accuracy_thresh f2_opt` (fastai/fastai#941): a single-spaced header
# that opens with `epoch` is read with the eaten underscores of its `<set> loss` names restored.
FIT_HEADER = r"(?i)^\s*epoch(?: [A-Za-z][\w@.%-]*)+\s*$"
EATEN = r"(?i)\b(train|valid|training|validation) loss\b"
# A cell: a number, fastai's `#na#` (no value: no row), or a clock (`36:45`, fastai's epoch time under `time`).
CLOCK = r"\d+:\d{2}(?::\d{2})?"
CELL = rf"(?:{NUM}|#na#|{CLOCK})"
# A row: only cells, separated by whitespace.
ROW = rf"^\s*{NUM}(?:\s+{CELL})+\s*$"
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
    fit = heads.filter(~pl.col("text").str.contains(HEADER) & pl.col("text").str.contains(FIT_HEADER)).select(
        "line", _split(pl.col("text").str.replace_all(EATEN, "${1}_loss"), r"\s+").alias("_names"))
    heads = heads.filter(pl.col("text").str.contains(HEADER)).select("line", _split(pl.col("text"), r"\s*(?:\t| {2,})\s*").alias("_names"))
    if fit.height:
        heads = pl.concat([heads, fit]).sort("line")
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
    long = rows.explode("_names", "_vals").select("line", pl.col("_names").alias("raw"), "_vals")
    clock = _clock_ms(pl.col("_vals"))
    long = long.with_columns(pl.coalesce(clock, pl.col("_vals").str.replace_all(",", "").cast(pl.Float64, strict=False)).alias("value"))
    names = prose_names(long.get_column("raw"), snake_rest=True)
    # A clock is the duration of the row's interval: under fastai's `time`, one epoch.
    name = pl.col("raw").replace_strict(names, default=None, return_dtype=pl.String)
    long = long.with_columns(pl.when(clock.is_not_null() & (name == "time")).then(pl.lit("epoch_time_ms")).otherwise(name).alias("name"))
    step = long.filter(pl.col("name").is_in(STEP_NAMES)).group_by("line").agg(pl.col("value").first().cast(pl.Int64).alias("step"))
    out = long.join(step, on="line", how="left").filter(~pl.col("name").is_in(STEP_NAMES) | pl.col("name").eq("epoch"))
    return out.filter(pl.col("value").is_not_null()).select(list(SCHEMA)).cast(SCHEMA).sort("line")


def _clock_ms(cell: pl.Expr) -> pl.Expr:
    """`36:45` / `1:02:03` -> milliseconds (mm:ss or h:mm:ss); null for any other cell."""
    g = cell.str.extract_groups(r"^(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d{2})$")
    h, m, sec = (g.struct.field(k).cast(pl.Float64, strict=False) for k in ("h", "m", "s"))
    return (h.fill_null(0.0) * 3600.0 + m * 60.0 + sec) * 1000.0


def _split(text: pl.Expr, sep: str) -> pl.Expr:
    """Fields of a stripped line split on a separator regex (through a unit-separator character)."""
    return text.str.strip_chars().str.replace_all(sep, "\x1f").str.split("\x1f")

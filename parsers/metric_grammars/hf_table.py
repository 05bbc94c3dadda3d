"""The HF Trainer notebook table, pasted as text: a `Step | Training Loss | Validation Loss | ...` header, then rows.

In Jupyter, `NotebookProgressCallback` draws an HTML table instead of printing dicts; pasted into an issue it
becomes a Markdown table ([OBS] m3hrdadfi/soxan#9):

    Step | Training Loss | Validation Loss | Accuracy
    -- | -- | -- | --
    10 | 0.698400 | 0.497485 | 0.813416

or tab-separated text (a copy of the HTML). The first column is the step (or the epoch, when the header says
`Epoch`: then the row has an `epoch` row and no step); `Training Loss` -> loss, `Validation Loss` -> eval_loss,
the other columns are `compute_metrics` results of the evaluation -> `eval_<name>`; `No log` cells give no row.
Rows are read only under a header (carried across chunks in `state`), with as many cells as the header, so a
results table of numbers alone is not read.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import Grammar, empty_rows, num, shape, snake

HEADER = r"(?i)^\s*\|?\s*(?:Step|Epoch)\s*(?:\||\t)\s*Training Loss\s*(?:\||\t)"
CELL = r"(?:[-+]?[\d.]+(?:[eE][-+]?\d+)?|nan|inf|No log)"
ROW = rf"^\s*\|?\s*\d+\s*(?:(?:\||\t)\s*{CELL}\s*)+\|?\s*$"
MATCH = f"{HEADER}|{ROW}"
NAMES = {"training_loss": "loss", "validation_loss": "eval_loss"}


def _cells(text: pl.Expr) -> pl.Expr:
    """`| a | b |` or `a\tb` -> ["a", "b"] (stripped; the outer pipes of a Markdown row dropped)."""
    t = text.str.strip_chars().str.strip_prefix("|").str.strip_suffix("|").str.replace_all("\t", "|", literal=True)
    return t.str.split("|").list.eval(pl.element().str.strip_chars())


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Cells of the rows, named by the last header above them."""
    is_head = pl.col("msg").str.contains(HEADER)
    g = df.with_columns(pl.when(is_head).then(_cells(pl.col("msg"))).alias("_hdr"), is_head.alias("_is_head"))
    prev = state.get("hf_table")
    g = g.with_columns(pl.col("_hdr").forward_fill())
    if prev is not None:
        g = g.with_columns(pl.col("_hdr").fill_null(pl.lit(pl.Series([prev], dtype=pl.List(pl.String)))))
    heads = g.filter(pl.col("_is_head"))
    if heads.height:
        state["hf_table"] = heads.get_column("_hdr").to_list()[-1]
    rows = g.filter(~pl.col("_is_head") & pl.col("_hdr").is_not_null()).with_columns(_cells(pl.col("msg")).alias("_vals"))
    rows = rows.filter(pl.col("_vals").list.len() == pl.col("_hdr").list.len())
    if rows.height == 0:
        return empty_rows()
    first = pl.col("_vals").list.first().cast(pl.Int64, strict=False)
    by_epoch = pl.col("_hdr").list.first().str.to_lowercase() == "epoch"
    rows = rows.with_columns(pl.when(by_epoch).then(None).otherwise(first).alias("step"))
    long = rows.select("_i", "step", pl.col("_hdr").list.slice(1).alias("_c"), pl.col("_vals").list.slice(1).alias("_v")).explode("_c", "_v")
    key = snake(pl.col("_c"))
    name = pl.when(key.is_in(list(NAMES))).then(key.replace(NAMES)).otherwise(pl.lit("eval_") + key)
    cells = long.select("_i", "step", name.alias("name"), num(pl.col("_v")).alias("value"))
    epochs = rows.filter(by_epoch).select("_i", "step", pl.lit("epoch").alias("name"), first.cast(pl.Float64).alias("value"))
    return shape(pl.concat([epochs, cells]).sort("_i", maintain_order=True), "hf_table")


GRAMMAR = Grammar("hf_table", ("Training Loss", " | ", "\t"), MATCH, extract)

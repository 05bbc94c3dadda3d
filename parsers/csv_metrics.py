"""CSV metric logs with a step column (PyTorch Lightning `CSVLogger` `metrics.csv`, formats.md §1.4;
hand-written `metrics.csv`): one row per logged step -> metric rows.

Recognised by content: a header row naming a step column (`step`, `global_step`, `iteration`, ...) and
at least one loss-like or learning-rate column, then comma-separated rows. Lightning writes one row
per `log` call with empty cells for the keys not logged then, so empty cells give no row. Names go
through the same canonical table as JSON metric lines (`train_loss` -> loss, `val_loss` ->
eval_loss, `lr-Adam` keeps its name); the step is the file's own (Lightning's is 0-based).
"""

from __future__ import annotations

import io
import re

import polars as pl
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.metric_grammars.generic import STEP_KEYS, rows_from_pairs
from forensics.parsers.prefixes import QUOTE_MARK

from forensics.contracts.tables import conform

SOURCE = "csv_metrics"
_METRIC_COL = re.compile(r"(?:^|[_/-])(?:loss|lr|learning_rate)(?:$|[_/-])", re.I)
_QUOTE = re.compile(QUOTE_MARK, re.M)


def _unquoted(text: str) -> str:
    """The file without its Markdown quote marks when every non-empty line carries one (a CSV pasted as a
    quote in an issue thread); line numbers are kept."""
    if not text.lstrip().startswith(">"):
        return text
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and all(ln.startswith(">") for ln in lines):
        return _QUOTE.sub("", text)
    return text


def sniff(sn: Sniffed) -> int:
    """Header with a step column and a loss/lr column; data rows with the same number of cells."""
    text = _unquoted(sn.text)
    lines = [ln for ln in text.splitlines()[:6] if ln.strip()]
    if len(lines) < 2:
        return 0
    header = [c.strip().lower() for c in lines[0].split(",")]
    if len(header) < 2 or not any(c in STEP_KEYS for c in header) or not any(_METRIC_COL.search(c) for c in header):
        return 0
    full_rows = lines[1:-1] if not text.endswith("\n") else lines[1:]
    if not full_rows or any(ln.count(",") != len(header) - 1 for ln in full_rows):
        return 0
    return 55


def parse(src, sn: Sniffed) -> ParseResult:
    """Every non-empty numeric cell -> (line, step, name, value)."""
    raw = src.read_all()
    # Decoded and re-encoded only when pasted as a quote: a plain file goes to polars byte for byte.
    if raw.lstrip().startswith(b">"):
        raw = _unquoted(raw.decode("utf-8", errors="replace")).encode("utf-8")
    try:
        df = pl.read_csv(io.BytesIO(raw), infer_schema=False, truncate_ragged_lines=True, ignore_errors=True)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        return ParseResult(status="failed", error=f"CSV metrics file could not be read: {exc}")
    # Data row k (0-based) is on physical line k + 2 (the header is line 1).
    df = df.with_row_index("_i", offset=2)
    long = df.unpivot(index="_i", variable_name="key", value_name="val").filter(
        pl.col("val").is_not_null() & (pl.col("val").str.strip_chars() != ""))
    rows = rows_from_pairs(long.with_columns(pl.col("_i").cast(pl.UInt32)), SOURCE)
    metrics = rows.select(pl.lit(src.rel).alias("file"), pl.col("_i").cast(pl.Int64).alias("line"), "step", "name", "value", "source")
    result = ParseResult()
    result.tables["metrics"] = conform("metrics", metrics.sort("line", maintain_order=True).to_arrow())
    if src.problems:
        result.status = "partial" if src.truncated else "parsed"
        result.error = "; ".join(src.problems)
    return result


PARSER = Parser(kind="csv_metrics", sniff=sniff, parse=parse, description="CSV metric logs (Lightning CSVLogger metrics.csv, ...)")

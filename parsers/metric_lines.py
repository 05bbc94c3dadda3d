"""Per-step metric lines of every trainer family into long-form (name, value) rows.

Each grammar is a function from candidate lines (columns line, seg, rank, ts, msg)
to rows (line, seg, rank, ts, step, name, value, source). Names are canonicalised
by `canonical_name`; NaN and Inf survive as float NaN/Inf.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

SCHEMA = {
    "line": pl.Int64,
    "seg": pl.Int32,
    "ts": pl.Datetime("us", "UTC"),
    "rank": pl.Int32,
    "step": pl.Int64,
    "name": pl.String,
    "value": pl.Float64,
    "source": pl.String,
}

# Substrings (case-insensitive) that every metric line of some grammar contains.
NEEDLES = ["loss", "iteration", "iter ", "step", "lr", "grad_norm"]

# Raw metric names of the frameworks -> canonical names of DESIGN.md.
CANONICAL = {
    "learning_rate": "lr",
    "learning rate": "lr",
    "grad norm": "grad_norm",
    "lm loss": "loss",
    "train_loss": "train_loss",
}


def canonical_name(name: pl.Expr) -> pl.Expr:
    """Lower-case, strip, and map framework spellings to the canonical metric name."""
    low = name.str.strip_chars().str.to_lowercase()
    return low.replace(CANONICAL)


def to_float(value: pl.Expr) -> pl.Expr:
    """Text to float64, keeping nan/inf spellings (`nan`, `NaN`, `inf`, `-Infinity`)."""
    v = value.str.strip_chars().str.strip_chars("'\",%")
    low = v.str.to_lowercase()
    return (
        pl.when(low.is_in(["nan", "-nan", "+nan"]))
        .then(float("nan"))
        .when(low.is_in(["inf", "+inf", "infinity", "+infinity"]))
        .then(float("inf"))
        .when(low.is_in(["-inf", "-infinity"]))
        .then(float("-inf"))
        .otherwise(v.str.replace_all(",", "").cast(pl.Float64, strict=False))
    )


def _hf_dict(cand: pl.DataFrame) -> pl.DataFrame:
    """HF Trainer console dicts: `{'loss': 2.3, 'grad_norm': nan, ...}` (5.x quotes the floats)."""
    rows = cand.filter(pl.col("msg").str.contains(r"^\{'[\w/ .-]+': .*\}$"))
    if rows.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    pairs = rows.with_columns(
        pl.col("msg").str.extract_all(r"'([\w/ .-]+)': ('[^']*'|[-+\w.]+)").alias("kv")
    ).explode("kv")
    return pairs.select(
        "line",
        "seg",
        "rank",
        "ts",
        pl.lit(None, pl.Int64).alias("step"),
        canonical_name(pl.col("kv").str.extract(r"^'([^']+)'", 1)).alias("name"),
        to_float(pl.col("kv").str.extract(r"': (.*)$", 1)).alias("value"),
        pl.lit("hf_dict").alias("source"),
    ).filter(pl.col("value").is_not_null())


GRAMMARS: list[Callable[[pl.DataFrame], pl.DataFrame]] = [_hf_dict]


def extract(cand: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Every metric row found in the candidate lines of one chunk."""
    parts = [g(cand) for g in GRAMMARS]
    parts = [p.select(list(SCHEMA)).cast(SCHEMA) for p in parts if p.height]
    return pl.concat(parts) if parts else pl.DataFrame(schema=SCHEMA)


def finalize(metrics: pl.DataFrame) -> pl.DataFrame:
    """File-level clean-up once all chunks are read (dedupe redraws, ordering)."""
    return metrics.sort("line", "seg")

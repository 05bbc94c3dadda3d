"""Helpers to read event fields (the JSON object of named captures) and convert amounts."""

from __future__ import annotations

import polars as pl

_UNIT_MIB = {"b": 1 / 1024**2, "bytes": 1 / 1024**2, "kib": 1 / 1024, "kb": 1 / 1024, "mib": 1.0, "mb": 1.0,
             "gib": 1024.0, "gb": 1024.0, "tib": 1024.0**2, "tb": 1024.0**2}


def field(name: str) -> pl.Expr:
    """One named capture of an event as a string column (null when absent)."""
    return pl.col("fields").str.json_path_match(f"$.{name}")


def size_mib(expr: pl.Expr) -> pl.Expr:
    """`20.00 MiB`, `1.5 GiB`, `0 bytes` -> MiB as float (null when unparseable)."""
    text = expr.str.strip_chars().str.to_lowercase()
    number = text.str.extract(r"^([\d.]+)", 1).cast(pl.Float64, strict=False)
    unit = text.str.extract(r"^[\d.]+\s*([a-z]+)", 1)
    factor = unit.replace_strict(_UNIT_MIB, default=None, return_dtype=pl.Float64)
    return number * factor


def fmt_mib(mib: float | None) -> str:
    """MiB as a short human amount (`1.50 GiB`, `20.00 MiB`)."""
    if mib is None:
        return "?"
    if mib >= 1024:
        return f"{mib / 1024:.2f} GiB"
    return f"{mib:.2f} MiB"

"""The events table's `fields` column (a JSON object of named captures) and the sizes printed in it."""

from __future__ import annotations

import polars as pl

_UNIT_MIB = {
    "bytes": 1 / 1048576,
    "b": 1 / 1048576,
    "kib": 1 / 1024,
    "kb": 1 / 1024,
    "mib": 1.0,
    "mb": 1.0,
    "gib": 1024.0,
    "gb": 1024.0,
    "tib": 1048576.0,
    "tb": 1048576.0,
    "pib": 1073741824.0,
    "pb": 1073741824.0,
}


def size_to_mib(size: pl.Expr) -> pl.Expr:
    """Size text as printed by PyTorch / DeepSpeed (`546.00 MiB`, `0 bytes`, `4 GB`) to MiB.

    Decimal-looking units (KB/MB/GB) are read as binary, as torch and DeepSpeed compute them.
    Unparseable text gives null.
    """
    number = size.str.extract(r"^\s*([\d.]+)\s*[A-Za-z]", 1).cast(pl.Float64, strict=False)
    unit = size.str.extract(r"^\s*[\d.]+\s*([A-Za-z]+)", 1).str.to_lowercase()
    return number * unit.replace_strict(_UNIT_MIB, default=None, return_dtype=pl.Float64)


def field_expr(name: str) -> pl.Expr:
    """One named field of an event's `fields` JSON as a string expression (null when absent)."""
    return pl.col("fields").str.json_path_match(f"$.{name}")

"""The signature table (signatures.toml) applied to candidate lines: one event per match."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import polars as pl
import tomllib

SCHEMA = {
    "line": pl.Int64,
    "end_line": pl.Int64,
    "ts": pl.Datetime("us", "UTC"),
    "rank": pl.Int32,
    "step": pl.Int64,
    "code": pl.String,
    "severity": pl.String,
    "message": pl.String,
    "text": pl.String,
    "fields": pl.String,
}

TABLE = Path(__file__).with_name("signatures.toml")


@dataclass(frozen=True)
class Signature:
    """One recognisable message form."""

    code: str
    severity: str
    needles: tuple[str, ...]
    regex: str
    source: str = ""


@lru_cache(maxsize=1)
def load() -> tuple[Signature, ...]:
    """The signature table, in file order (earlier rows win nothing: every match is kept)."""
    data = tomllib.loads(TABLE.read_text(encoding="utf-8"))
    return tuple(
        Signature(s["code"], s["severity"], tuple(s["needles"]), s["regex"], s.get("source", ""))
        for s in data["signature"]
    )


def needles() -> list[str]:
    """All prefilter needles of the table."""
    return sorted({n for s in load() for n in s.needles})


def _fields_json(regex: str) -> pl.Expr:
    import re

    names = list(re.compile(regex.replace("(?P<", "(?P<")).groupindex)
    if not names:
        return pl.lit("{}")
    groups = pl.col("msg").str.extract_groups(regex)
    return groups.struct.json_encode()


def extract(cand: pl.DataFrame) -> pl.DataFrame:
    """One event row per (line, signature) match among the candidate lines."""
    parts = []
    for sig in load():
        rows = cand.filter(pl.col("msg").str.contains_any(list(sig.needles), ascii_case_insensitive=True))
        if rows.height == 0:
            continue
        rows = rows.filter(pl.col("msg").str.contains(sig.regex))
        if rows.height == 0:
            continue
        parts.append(
            rows.select(
                "line",
                pl.col("line").alias("end_line"),
                "ts",
                "rank",
                pl.lit(None, pl.Int64).alias("step"),
                pl.lit(sig.code).alias("code"),
                pl.lit(sig.severity).alias("severity"),
                pl.col("msg").alias("message"),
                pl.col("text"),
                _fields_json(sig.regex).alias("fields"),
            )
        )
    return pl.concat(parts).cast(SCHEMA) if parts else pl.DataFrame(schema=SCHEMA)

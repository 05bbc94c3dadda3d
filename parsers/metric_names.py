"""Canonical metric names: the alias table (metric_names.toml) and word rules every metric row passes through."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

import polars as pl

TABLE = Path(__file__).with_name("metric_names.toml")


@cache
def _table() -> dict:
    return tomllib.loads(TABLE.read_text(encoding="utf-8"))


def aliases() -> dict[str, tuple[str, float]]:
    """Exact name -> (canonical name, unit factor)."""
    return {k: (v[0], float(v[1])) for k, v in _table()["alias"].items()}


def apply_aliases(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows (with `name`, `value`) whose names are in the alias table renamed, values scaled to the canonical unit.

    One lookup per distinct name of the chunk (a log repeats a handful of names), then two column expressions."""
    if rows.height == 0:
        return rows
    table = aliases()
    present = [n for n in rows.get_column("name").unique().drop_nulls().to_list() if n in table]
    if not present:
        return rows
    name_map = {n: table[n][0] for n in present}
    factor_map = {n: table[n][1] for n in present}
    factor = pl.col("name").replace_strict(factor_map, default=1.0, return_dtype=pl.Float64)
    return rows.with_columns(
        (pl.col("value") * factor).alias("value"),
        pl.col("name").replace(name_map).alias("name"),
    )


def postfix_names() -> dict[str, str]:
    """Short progress-bar postfix names (GAN losses: `DR`, `DF`, `G`, `GP`, `errD`) -> canonical loss-part names."""
    return dict(_table()["postfix"])


def prose_names(raw: pl.Series, *, snake_rest: bool = False) -> dict[str, str]:
    """Raw hand-printed names -> canonical names by the word rules (`Training Loss` -> loss,
    `validation accuracy` -> eval_accuracy, `validation/main/loss` -> eval_loss, `Acc.` -> acc).

    Returns a mapping for the distinct names given (callers apply it as a column lookup); a name no rule
    rewrites maps to itself, or to its snake_case form with `snake_rest` (raw column headers)."""
    words = _table()["words"]
    prefix: dict[str, str] = words["prefix"]
    stem: dict[str, str] = words["stem"]
    suffix: dict[str, str] = words["suffix"]
    exact = _table()["alias"]
    timing = set(words["suffix_not_after"])
    reduction, sets = set(words["reduction"]), set(words["sets"])
    out: dict[str, str] = {}
    for name in raw.unique().drop_nulls().to_list():
        key = _snake(name)
        parts = [p for p in key.replace("/", " ").replace("_", " ").split() if p]
        if any(p in sets for p in parts[:-1]):
            parts = [p for p in parts if p not in reduction] or parts
        lead = ""
        # Split words in front (`validation/main/`, `training `) give the set the value belongs to.
        while len(parts) > 1 and parts[0] in prefix:
            lead = lead or prefix[parts[0]]
            parts = parts[1:]
        rest = "_".join(parts)
        # Exact aliases (and their unit factors) are applied to every row afterwards (apply_aliases).
        if rest in stem:
            out[name] = lead + stem[rest]
        elif len(parts) > 1 and parts[-1] in suffix and parts[-2] not in timing and key not in exact:
            out[name] = lead + "_".join([*parts[:-1], suffix[parts[-1]]])
        else:
            out[name] = key if snake_rest else name
    return out


def _snake(name: str) -> str:
    """`Avg. Loss` -> `avg_loss`: lower case, word-final dots (abbreviation marks) dropped, spaces and dashes -> `_`."""
    s = name.strip().lower()
    s = " ".join(w.rstrip(".") for w in s.split())
    return s.replace(" ", "_").replace("-", "_")

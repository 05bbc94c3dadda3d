"""Shared pieces of the metric grammars: number parsing, name canonicalisation, unit scaling, row shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl
from forensics.parsers import shapes

# Long-form rows every grammar returns: `_i` points back at the candidate line.
ROW_SCHEMA = {"_i": pl.UInt32, "step": pl.Int64, "name": pl.String, "value": pl.Float64, "source": pl.String}

# A number as printed by Python/printf/tqdm: 1, -2.5, 3e-4, 1.2E+00, 10,050 (thousands commas, groups of
# three only, so `bsz=80, lr=..` does not swallow the separator), nan, inf.
NUM = (
    r"(?:[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
    r"|[-+]?(?:nan|NaN|NAN|Infinity|infinity|inf|Inf|INF)\b)"
)

# Framework spellings -> canonical names (DESIGN.md). Keys are lower-case, spaces already turned into `_`.
CANONICAL: dict[str, str] = {
    "learning_rate": "lr",
    "lr": "lr",
    "grad_norm": "grad_norm",
    "gnorm": "grad_norm",
    "gradient_norm": "grad_norm",
    "grad_norm_total": "grad_norm",
    "loss_scale": "loss_scale",
    "loss_scaler": "loss_scale",
    "scale": "loss_scale",
    "tps": "tokens_per_s",
    "wps": "tokens_per_s",
    "tok/s": "tokens_per_s",
    "tok/sec": "tokens_per_s",
    "tokens/s": "tokens_per_s",
    "tokens/sec": "tokens_per_s",
    "tokens_per_sec": "tokens_per_s",
    "tokens_per_second": "tokens_per_s",
    "toks/s": "tokens_per_s",
    "samples/s": "samples_per_s",
    "samples/sec": "samples_per_s",
    "samples_per_sec": "samples_per_s",
    "samples_per_second": "samples_per_s",
    "img/s": "samples_per_s",
    "images/s": "samples_per_s",
    "step_time_ms": "step_time_ms",
    "data_time_ms": "data_time_ms",
    "mfu": "mfu",
    "ppl": "ppl",
    "perplexity": "ppl",
    "epoch": "epoch",
}


def num(expr: pl.Expr) -> pl.Expr:
    """Text -> float64. Drops surrounding spaces, quotes and `%`, and thousands commas; the cast itself
    reads nan/inf/Infinity in any case and sign. Anything else -> null."""
    v = expr.str.strip_chars(" \t'\"%").str.replace_all(",", "", literal=True)
    return v.cast(pl.Float64, strict=False)


def first_token(expr: pl.Expr) -> pl.Expr:
    """The value before a space: `6.5993 (6.5971)` (current and running average) -> `6.5993`."""
    return expr.str.strip_chars().str.split_exact(" ", 1).struct.field("field_0")


def split_pairs(df: pl.DataFrame, text: pl.Expr, item_sep: str, kv_sep: str) -> pl.DataFrame:
    """Literal-separator pairs (`a: 1 | b: 2`): one row per item with `key` and `val`, no regex.

    Much cheaper than regex pairs for formats whose separators are fixed; items without `kv_sep`
    get a null `val`.
    """
    items = df.with_columns(text.str.split(item_sep).alias("_kv")).explode("_kv")
    kv = items.with_columns(pl.col("_kv").str.splitn(kv_sep, 2).struct.rename_fields(["key", "val"])).unnest("_kv")
    return kv.with_columns(pl.col("key").str.strip_chars()).filter(pl.col("val").is_not_null())


def pairs_after_step(df: pl.DataFrame, head: str, item_sep: str, kv_sep: str) -> pl.DataFrame:
    """`split_pairs` of the text after a line's step marker, with `step` from it.

    `head` is a regex whose group 1 is the step (`\\bstep:(\\d+) - `); everything up to the end of its
    match is cut before the items are split.
    """
    step = pl.col("msg").str.extract(head, 1).cast(pl.Int64, strict=False)
    body = pl.col("msg").str.replace(r"^.*?" + head, "")
    return split_pairs(df.with_columns(step.alias("step")), body, item_sep, kv_sep)


def epoch_iteration(text: pl.Expr, header: str) -> pl.Expr:
    """The global iteration `(e - 1) * n + i` of an `[e/E][i/n]` header (named groups `e`, `i`, `n`; both
    counts printed 1-based, as mmcv-style loops do); null where the header is absent."""
    g = text.str.extract_groups(header)
    e, i, n = (g.struct.field(k).cast(pl.Int64, strict=False) for k in ("e", "i", "n"))
    return (e - 1) * n + i


def snake(expr: pl.Expr) -> pl.Expr:
    """Lower-case a raw metric name and join its words with `_` (`lm loss` -> `lm_loss`)."""
    return expr.str.strip_chars().str.to_lowercase().str.replace_all(r"\s+", "_")


def canonical(expr: pl.Expr, extra: dict[str, str] | None = None) -> pl.Expr:
    """Snake-cased raw name mapped through CANONICAL (+ a grammar's own spellings); unknown names stay."""
    mapping = dict(CANONICAL)
    if extra:
        mapping.update(extra)
    return snake(expr).replace(mapping)


def canonical_of(df: pl.DataFrame, col: str, extra: dict[str, str] | None = None) -> pl.Expr:
    """`canonical` of column `col`, computed once per distinct raw name (a log repeats a few names
    millions of times) and applied as a lookup."""
    uniq = df.get_column(col).unique().drop_nulls()
    mapped = uniq.to_frame().select(canonical(pl.col(col), extra)).to_series()
    return pl.col(col).replace_strict(dict(zip(uniq.to_list(), mapped.to_list(), strict=True)), default=None, return_dtype=pl.String)


# Memory units -> MiB. `GB`/`MB` are read as binary units: DeepSpeed, Megatron and torch users print
# `bytes / 1024**3` (or `/ 2**20`) labelled GB/MB.
MEM_TO_MIB = {"b": 1 / 2**20, "kb": 1 / 1024, "kib": 1 / 1024, "mb": 1.0, "mib": 1.0, "gb": 1024.0, "gib": 1024.0,
              "tb": 1024.0**2, "tib": 1024.0**2}
TIME_TO_MS = {"us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0, "sec": 1000.0, "secs": 1000.0, "m": 60000.0, "min": 60000.0, "h": 3_600_000.0}


def scale_by_unit(value: pl.Expr, unit: pl.Expr, table: dict[str, float]) -> pl.Expr:
    """Multiply `value` by the factor of its (lower-cased) unit; unknown/absent unit -> factor 1."""
    factor = unit.str.to_lowercase().replace_strict(table, default=1.0, return_dtype=pl.Float64).fill_null(1.0)
    return value * factor


def empty_rows() -> pl.DataFrame:
    """No rows, in the grammar row shape."""
    return pl.DataFrame(schema=ROW_SCHEMA)


def shape(df: pl.DataFrame, source: str) -> pl.DataFrame:
    """Keep rows with a value (NaN counts as a value), tag the grammar, cast to ROW_SCHEMA."""
    if df.height == 0:
        return empty_rows()
    return (
        df.filter(pl.col("value").is_not_null() & pl.col("name").is_not_null() & (pl.col("name") != ""))
        .with_columns(pl.lit(source).alias("source"))
        .select(list(ROW_SCHEMA))
        .cast(ROW_SCHEMA)
    )


def wide_to_rows(df: pl.DataFrame, columns: dict[str, pl.Expr], step: pl.Expr, source: str) -> pl.DataFrame:
    """Fixed-field grammars: one expression per metric name -> long rows (absent fields give no row)."""
    if df.height == 0:
        return empty_rows()
    wide = df.select(pl.col("_i"), step.cast(pl.Int64).alias("step"), *[e.cast(pl.Float64).alias(n) for n, e in columns.items()])
    long = wide.unpivot(index=["_i", "step"], variable_name="name", value_name="value")
    return shape(long, source)


# For capturing inside a line its grammar already accepted: the plain character class is much cheaper
# for the capture engine than NUM's alternations, and the float cast rejects anything that is not a number.
NUM_FAST = r"(?:[-+]?[\d.]+(?:,\d{3})*(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|NAN|Infinity|infinity|inf|Inf|INF))"


def groups(df: pl.DataFrame, pattern: str, text: pl.Expr | None = None) -> pl.DataFrame:
    """`df` plus one column per named group of `pattern` (first match; null where it does not match).

    One regex pass for all fields, instead of one `extract` per field; NUM is captured as NUM_FAST.
    """
    pattern = pattern.replace(NUM, NUM_FAST)
    if text is None:
        by_shape = shapes.extract_groups(df, pattern)  # once per distinct line shape when the regex allows
        if by_shape is not None:
            return df.with_columns(by_shape.get_columns())
        text = pl.col("msg")
    return df.with_columns(text.str.extract_groups(pattern).alias("_g")).unnest("_g")


# Inside a string already matched with NUM, any run of number characters is the number: splitting a
# match into its groups with this instead of NUM is several times cheaper (NUM's alternations cost).
NUM_LOOSE = r"[-+]?[\w.,+-]+?"


def pairs(df: pl.DataFrame, pattern: str, text: pl.Expr | None = None) -> pl.DataFrame:
    """Explode every match of `pattern` (groups `key`, `val`, optional others) into one row per pair.

    Returns the columns of `df` plus the pattern's named groups. Matches are found with the strict
    pattern, then split into groups with its loose twin anchored on the whole match.
    """
    text = pl.col("msg") if text is None else text
    exploded = df.with_columns(text.str.extract_all(pattern).alias("_kv")).explode("_kv").filter(pl.col("_kv").is_not_null())
    splitter = "^(?:" + pattern.replace(NUM, NUM_LOOSE) + ")$"
    return exploded.with_columns(pl.col("_kv").str.extract_groups(splitter)).unnest("_kv")


@dataclass(frozen=True)
class Grammar:
    """One metric-line family.

    needles: literal substrings, one of which every line of the family holds (cheap first filter).
    match:   regex a line must match to belong to the family; a matched line is claimed, so grammars
             later in the precedence list never read it again (no metric read twice).
    extract: rows (ROW_SCHEMA) from the claimed lines (columns _i, line, seg, rank, ts, msg, text).
    """

    name: str
    needles: tuple[str, ...]
    match: str
    extract: Callable[[pl.DataFrame, dict], pl.DataFrame]


def epoch_steps(df: pl.DataFrame, epoch: pl.Expr, batch: pl.Expr, state: dict, key: str) -> pl.Series:
    """A global step for lines that print only `(epoch, batch index within the epoch)` (ESPnet2, icefall).

    The step is `batch + offset`, the offset of an epoch being the sum of the largest batch index logged in
    each earlier epoch of the file (kept in `state[key]` across chunks). A log that prints every N batches
    undercounts an epoch by less than N, and a paste that starts mid-run starts its count at its first
    epoch; either way steps grow across epochs instead of restarting, and within an epoch they are exact.
    The Python loop runs once per distinct epoch of the chunk, not per line.
    """
    t = df.select(epoch.cast(pl.Int64, strict=False).alias("e"), batch.cast(pl.Int64, strict=False).alias("b"))
    per = t.drop_nulls().group_by("e", maintain_order=True).agg(pl.col("b").max().alias("mb"))
    last_e, off, mb = state.get(key, (None, 0, 0))
    offsets: dict[int, int] = {}
    for e, m in per.iter_rows():
        if e == last_e:
            mb = max(mb, m)
        else:
            if last_e is not None:
                off += mb
            last_e, mb = e, m
        offsets.setdefault(e, off)
    state[key] = (last_e, off, mb)
    off_col = t.get_column("e").replace_strict(offsets, default=None, return_dtype=pl.Int64)
    return (t.get_column("b") + off_col).alias("step")


def drop_repeats(rows: pl.DataFrame, df: pl.DataFrame, names: list[str], state: dict, key: str) -> pl.DataFrame:
    """`rows` without the rows of `names` whose value equals the last one of that name on the same rank.

    For lines that reprint the last validation result on every training line (NeMo 2 `| val_loss: 4.106`):
    one validation gives one row, at the first line that shows it. The last value per (rank, name) is kept
    in `state[key]` across chunks; the Python loop runs once per (rank, name), not per line.
    """
    sel = pl.col("name").is_in(names)
    if not rows.select(sel.any()).item():
        return rows
    rank = df.select("_i", pl.col("rank").fill_null(-1).cast(pl.Int64).alias("_r"))
    r = rows.with_row_index("_o").join(rank, on="_i", how="left", maintain_order="left")
    last: dict = state.setdefault(key, {})
    seen = pl.DataFrame([(k[0], k[1], v) for k, v in last.items()], schema={"_r": pl.Int64, "name": pl.String, "_last": pl.Float64},
                        orient="row")
    ev = r.filter(sel).join(seen, on=["_r", "name"], how="left", maintain_order="left")
    prev = pl.coalesce(pl.col("value").shift(1).over("_r", "name", order_by="_o"), "_last")
    # NaN repeated is a repeat too (`!=` alone would keep every NaN).
    same = (pl.col("value") == prev) | (pl.col("value").is_nan() & prev.is_nan())
    keep = ev.filter(~same.fill_null(False)).drop("_last")
    for rk, nm, v in ev.group_by("_r", "name").agg(pl.col("value").sort_by("_o").last()).iter_rows():
        last[(rk, nm)] = v
    return pl.concat([r.filter(~sel), keep]).sort("_o").drop("_o", "_r")

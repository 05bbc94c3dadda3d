"""fairseq (`--log-format simple`, pre-2020 `| epoch ...` form, end-of-epoch summaries) and fairseq2 lines.

fairseq (formats.md §1.10): `epoch 001:   2800 / 160368 loss=9.255, ppl=611.12, wps=57.3, ...,
num_updates=2800, lr=2.8e-05, gnorm=3.23, ...` — step is `num_updates`; old lines print
`loss=1.27 (1.50)` (current, running average: the current value is read). Summaries
`epoch 001 | valid on 'valid' subset | valid_loss 8.11 | ... | num_updates 600` -> `eval_*`;
train summaries keep only their epoch-average losses as `train_loss`, `train_nll_loss`, `train_ppl`.
`--log-format json` lines are read by the JSON grammar, tqdm mode by the tqdm grammar.
fairseq2 (§1.11): `Train Metrics (step 100) - Loss: 2.345 | Gradient Norm: 0.81 | ...`, values with
units (`12.3s`, `45%`, `1.2GiB`) converted to ms / MiB; `Validation`/`Evaluation` -> `eval_*`.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import (
    MEM_TO_MIB,
    NUM,
    Grammar,
    canonical,
    canonical_of,
    empty_rows,
    first_token,
    num,
    pairs,
    scale_by_unit,
    shape,
    split_pairs,
)

PROGRESS = r"^\|?\s*epoch (?P<ep>\d+)(?P<mid>.*?):?\s+(?P<i>\d+) / (?P<n>\d+) (?P<rest>.*\S=.*)$"
SUMMARY = r"^\|?\s*epoch (?P<ep>\d+) \| (?P<rest>.*\|.*)$"
FS2 = r"^(?P<title>[A-Z][\w ]*?) Metrics \(step (?P<step>\d+)\)(?: - [\w/ .-]+?)? - (?P<rest>.+)$"
MATCH = "|".join([PROGRESS, SUMMARY, FS2])

NAMES = {"ups": "updates_per_s", "clip": "clip_pct", "gb_free": "mem_free_mib", "valid_loss": "loss"}
FS2_NAMES = {
    "nll_loss": "nll_loss",
    "gradient_norm": "grad_norm",
    "learning_rate": "lr",
    "elements_per_second": "elements_per_s",
    "data_time": "data_time_ms",
    "compute_time": "compute_time_ms",
    "wall_time": "wall_time_ms",
    "peak_active_device_memory": "mem_max_active_mib",
    "peak_reserved_device_memory": "mem_max_reserved_mib",
    "peak_reserved_device_memory_(%)": "mem_max_reserved_pct",
    "peak_active_device_memory_(%)": "mem_max_active_pct",
}


def _step_of(text: pl.Expr, pattern: str) -> pl.Expr:
    return text.str.extract(pattern, 1).cast(pl.Int64, strict=False)


def _progress(df: pl.DataFrame) -> pl.DataFrame:
    g = pl.col("msg").str.extract_groups(PROGRESS)
    base = df.with_columns(
        _step_of(pl.col("msg"), r"\bnum_updates=(\d+)").alias("step"),
        g.struct.field("mid").str.contains("valid on").alias("_valid"),
        g.struct.field("rest").alias("_rest"),
    )
    # `loss=9.255, ppl=611.12, ...` (old: `loss=1.27 (1.50)`: current value, then the running average)
    kv = split_pairs(base, pl.col("_rest"), ", ", "=")
    name = canonical_of(kv, "key", NAMES)
    raw = num(first_token(pl.col("val")))
    value = pl.when(pl.col("key") == "gb_free").then(raw * 1024).otherwise(raw)
    rows = kv.filter(pl.col("key") != "num_updates").select(
        "_i", "step",
        pl.when(pl.col("_valid")).then(pl.lit("eval_") + name).otherwise(name).alias("name"),
        value.alias("value"),
    )
    return shape(rows, "fairseq")


def _summary(df: pl.DataFrame) -> pl.DataFrame:
    base = df.with_columns(
        _step_of(pl.col("msg"), r"\bnum_updates (\d+)").alias("step"),
        pl.col("msg").str.contains("valid on").alias("_valid"),
    )
    kv = pairs(base, rf"(?:^|\| )(?P<key>[A-Za-z_][\w/ ]*?)\s+(?P<val>{NUM})(?P<pct>%)?\s*(?:\||$)",
               pl.col("msg").str.replace(r"^\|?\s*epoch \d+ ", "").str.replace_all(r"\|", "| |"))
    key = pl.col("key").str.strip_chars().str.to_lowercase().str.replace_all(r"\s+", "_").str.replace(r"^(?:valid|train)_", "")
    low = key.replace({"gnorm": "grad_norm"})
    name = (
        pl.when(pl.col("_valid")).then(pl.lit("eval_") + low)
        .when(low.is_in(["loss", "nll_loss", "ppl"])).then(pl.lit("train_") + low)
        # The scale in force at the end of the epoch: the level the overflow warnings after it halve.
        .when(low == "loss_scale").then(low)
        .otherwise(None)
    )
    rows = kv.filter(pl.col("key") != "num_updates").select("_i", "step", name.alias("name"), num(pl.col("val")).alias("value"))
    return shape(rows, "fairseq_summary")


def _fairseq2(df: pl.DataFrame) -> pl.DataFrame:
    g = pl.col("msg").str.extract_groups(FS2)
    title = g.struct.field("title").str.to_lowercase()
    base = df.with_columns(
        g.struct.field("step").cast(pl.Int64, strict=False).alias("step"),
        pl.when(title == "train").then(pl.lit(""))
        .when(title.is_in(["validation", "evaluation", "valid", "eval"])).then(pl.lit("eval_"))
        .otherwise(title.str.replace_all(r"\s+", "_") + "_").alias("_pre"),
        g.struct.field("rest").alias("_rest"),
    )
    kv = pairs(base, rf"(?:^|\| )(?P<key>[A-Za-z][\w ()%/.-]*?): (?P<val>{NUM})\s*(?P<unit>s|%|B|KiB|MiB|GiB|TiB)?\s*(?:\||$)",
               pl.col("_rest").str.replace_all(r"\|", "| |"))
    raw = num(pl.col("val"))
    unit = pl.col("unit")
    is_mem = unit.is_in(["B", "KiB", "MiB", "GiB", "TiB"])
    name = canonical(pl.col("key"), FS2_NAMES)
    name = (
        pl.when(unit == "s").then(pl.when(name.str.ends_with("_ms")).then(name).otherwise(name + "_ms"))
        .when(is_mem).then(pl.when(name.str.ends_with("_mib")).then(name).otherwise(name + "_mib"))
        .otherwise(name)
    )
    value = (
        pl.when(unit == "s").then(raw * 1000.0)
        .when(is_mem).then(scale_by_unit(raw, unit, MEM_TO_MIB))
        .otherwise(raw)
    )
    rows = kv.select("_i", "step", (pl.col("_pre") + name).alias("name"), value.alias("value"))
    return shape(rows, "fairseq2")


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Each line is read by the first of progress / summary / fairseq2 that matches it."""
    parts = []
    rest = df
    for pattern, fn in ((PROGRESS, _progress), (SUMMARY, _summary), (FS2, _fairseq2)):
        hit = rest.get_column("msg").str.contains(pattern)
        sub = rest.filter(hit)
        if sub.height:
            parts.append(fn(sub))
            rest = rest.filter(~hit)
    return pl.concat(parts) if parts else empty_rows()


GRAMMAR = Grammar("fairseq", ("loss", "Metrics (step "), MATCH, extract)

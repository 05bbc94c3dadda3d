"""Megatron-LM (and Megatron-DeepSpeed) training, validation, memory and timer lines (formats.md §1.2).

Training: ` [ts] iteration      100/  500000 | consumed samples: ... | lm loss: 2.345678E+00 | ... |`.
Megatron drops the `lm loss` field when the interval's average is NaN (the `avg > 0` / `avg >= 0`
test fails) — so a training line with no `... loss:` field while no iteration was skipped is read as
`loss = NaN` (source `megatron_loss_absent`); with skipped iterations the absence is explained by the
skips and no loss row is written, and a line cut before `number of skipped iterations` (printed after the
losses) says nothing about the loss. `number of skipped iterations` -> `skipped_steps` and
`number of nan iterations` -> `nan_iterations` are counts for the logging interval. NeMo 2 /
Megatron-bridge lines share the training layout and reprint the last `val_loss` on every line: an
`eval_loss` row is written only where it changes (per rank, across chunks).
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import (
    NUM,
    Grammar,
    canonical,
    canonical_of,
    drop_repeats,
    empty_rows,
    num,
    pairs,
    shape,
    split_pairs,
)

TRAIN = r"\biteration\s+(?P<it>\d+)/\s*(?P<total>\d+)\s*\|"
VALID = r"\bvalidation(?:-\S+)? loss at (?:iteration (?P<vit>\d+)|[^|]*?)(?P<set> on (?:validation|test) set)?\s*\|"
MEMORY = r"\(after (?P<mit>\d+) iterations\) memory \(MB\)"
# Timer rows: `    forward-backward ...............: (1234.56, 1240.01)` or `...: 1234.56` (--timing-log-option max).
TIMER = r"^\s*(?P<tname>[\w.-][\w .-]*?) \.{3,}: (?:\((?P<tmin>[\d.]+), (?P<tmax>[\d.]+)\)|(?P<tone>[\d.]+))\s*$"
MATCH = "|".join([TRAIN, VALID, MEMORY, TIMER])
# Megatron-LM before its 2020 rewrite (pretrain_gpt2.py / pretrain_bert.py, and the THUDM forks built on it: CPM,
# Chinese-Transformer-XL, GLM) printed most fields with no colon: ` iteration      400/    3000 | elapsed time per
# iteration (ms): 12879.0 | learning rate 6.300E-06 | lm loss 6.758929E+00 | loss scale 64.0 |` (`lm loss NAN` when the
# interval's average is NaN, as `{:.6E}` prints it). An item without `:` is read as words, a space, then one number.
BARE_ITEM = rf"^\s*(?P<key>[A-Za-z][A-Za-z ]*[A-Za-z])\s+(?P<val>{NUM})\s*$"

NAMES = {
    "lm_loss": "loss",
    "learning_rate": "lr",
    "grad_norm": "grad_norm",
    "elapsed_time_per_iteration_(ms)": "step_time_ms",
    # BigScience's Megatron-DeepSpeed prints the interval in seconds (chronicles.md of tr11-176B-ml).
    "elapsed_time_per_iteration_(s)": "step_time_ms",
    "throughput_per_gpu_(tflop/s/gpu)": "tflops",
    "tflops": "tflops",
    "samples_per_second": "samples_per_s",
    # Megatron-DeepSpeed: `tokens per gpu per second (tgs): 2069.506` (per GPU, as torchtitan's tps)
    "tokens_per_gpu_per_second_(tgs)": "tokens_per_s",
    "number_of_skipped_iterations": "skipped_steps",
    "number_of_nan_iterations": "nan_iterations",
    "energy_per_gpu_(j/iter/gpu)": "energy_j_per_gpu",
    "power_per_gpu_(w/gpu)": "power_w_per_gpu",
    # NeMo 2 / Megatron-bridge progress lines share the `iteration N/M |` layout
    "reduced_train_loss": "loss",
    "val_loss": "eval_loss",
    "train_step_timing_in_s": "step_time_ms",
}
MEM_NAMES = {"allocated": "mem_allocated_mib", "max allocated": "mem_max_mib", "reserved": "mem_reserved_mib",
             "max reserved": "mem_max_reserved_mib"}


def _train(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    step = pl.col("msg").str.extract(r"\biteration\s+(\d+)/", 1).cast(pl.Int64, strict=False)
    # Fields are ` key: value |`: split on the literal separators (the first item is `[ts] iteration N/M`).
    kv = split_pairs(df.with_columns(step.alias("step")), pl.col("msg"), "|", ":")
    bare = _bare_items(df.with_columns(step.alias("step")))
    if bare.height:
        kv = pl.concat([kv.with_columns(pl.lit(0).alias("_bare")), bare.select(kv.columns).with_columns(pl.lit(1).alias("_bare"))])
        kv = kv.sort("_i", "_bare", maintain_order=True).drop("_bare")
    name = canonical_of(kv, "key", NAMES)
    value = num(pl.col("val"))
    fields = kv.filter(pl.col("key") != "global_step").select(
        "_i", "step",
        name.alias("name"),
        # NeMo's `train_step_timing in s` is seconds.
        pl.when(pl.col("key").is_in(["train_step_timing in s", "elapsed time per iteration (s)"])).then(value * 1000.0).otherwise(value).alias("value"),
    )
    # NeMo 2 / Megatron-bridge lines start `Training epoch 0, iteration 120/149 | ...`.
    epoch = df.select("_i", step.alias("step"), pl.lit("epoch").alias("name"),
                      pl.col("msg").str.extract(r"(?i)\bepoch (\d+),? iteration", 1).cast(pl.Float64, strict=False).alias("value"))
    rows = pl.concat([epoch.filter(pl.col("value").is_not_null()), fields])
    # The loss field vanishes when its interval average was NaN; say so unless skipped iterations explain it.
    has_loss = rows.group_by("_i").agg(
        pl.col("name").str.contains(r"(?:^|_)loss$").any().alias("has_loss"),
        pl.col("value").filter(pl.col("name") == "skipped_steps").first().alias("skipped"),
    )
    absent = (
        df.select("_i", step.alias("step"))
        .join(has_loss, on="_i", how="left", maintain_order="left")
        # `number of skipped iterations` is printed after the loss fields: a line without it was cut short (a
        # paste that stops at `learning rate: ... |`), so a missing loss there says nothing.
        .filter(~pl.col("has_loss").fill_null(False) & (pl.col("skipped") == 0))
        .select("_i", "step", pl.lit("loss").alias("name"), pl.lit(float("nan")).alias("value"))
    )
    # NeMo 2 reprints the last `val_loss` on every training line: one validation gives one row.
    rows = drop_repeats(shape(rows, "megatron"), df, ["eval_loss"], state, "nemo_val")
    return pl.concat([rows, shape(absent, "megatron_loss_absent")])


def _bare_items(df: pl.DataFrame) -> pl.DataFrame:
    """The colon-less `name value` items of old Megatron-LM lines (`lm loss 6.758929E+00`), as `key`/`val` rows."""
    items = df.with_columns(pl.col("msg").str.split("|").alias("_kv")).explode("_kv")
    items = items.filter(~pl.col("_kv").str.contains(":", literal=True))
    if items.height == 0:
        return items
    g = items.with_columns(pl.col("_kv").str.extract_groups(BARE_ITEM).alias("_g")).unnest("_g").drop("_kv")
    return g.filter(pl.col("val").is_not_null())


def _valid(df: pl.DataFrame) -> pl.DataFrame:
    g = pl.col("msg").str.extract_groups(VALID)
    base = df.with_columns(
        g.struct.field("vit").cast(pl.Int64, strict=False).alias("step"),
        pl.when(g.struct.field("set").str.contains("test")).then(pl.lit("test_")).otherwise(pl.lit("eval_")).alias("_pre"),
    )
    kv = pairs(base, rf"(?P<key>[^|]+?) (?P<kind>value|PPL): (?P<val>{NUM})")
    name = pl.when(pl.col("kind") == "PPL").then(pl.lit("ppl")).otherwise(canonical(pl.col("key"), NAMES).str.replace(r"^lm_", ""))
    rows = kv.select("_i", "step", (pl.col("_pre") + name).alias("name"), num(pl.col("val")).alias("value"))
    return shape(rows, "megatron_validation")


def _memory(df: pl.DataFrame) -> pl.DataFrame:
    base = df.with_columns(pl.col("msg").str.extract(MEMORY, 1).cast(pl.Int64, strict=False).alias("step"))
    kv = pairs(base, rf"\| (?P<key>allocated|max allocated|reserved|max reserved): (?P<val>{NUM})")
    rows = kv.select("_i", "step", pl.col("key").replace_strict(MEM_NAMES).alias("name"), num(pl.col("val")).alias("value"))
    return shape(rows, "megatron_memory")


def _timers(df: pl.DataFrame) -> pl.DataFrame:
    g = pl.col("msg").str.extract_groups(TIMER)
    base = df.with_columns(g.alias("_g")).unnest("_g")
    name = pl.lit("timer_") + pl.col("tname").str.strip_chars().str.to_lowercase().str.replace_all(r"[\s-]+", "_")
    rows = pl.concat([
        base.select("_i", pl.lit(None, pl.Int64).alias("step"), (name + "_ms").alias("name"),
                    num(pl.coalesce("tmax", "tone")).alias("value")),
        base.select("_i", pl.lit(None, pl.Int64).alias("step"), (name + "_min_ms").alias("name"),
                    num(pl.col("tmin")).alias("value")),
    ])
    return shape(rows, "megatron_timers")


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Dispatch each claimed line to its sub-form."""
    parts = []
    for pattern, fn in ((TRAIN, _train), (VALID, _valid), (MEMORY, _memory), (TIMER, _timers)):
        sub = df.filter(pl.col("msg").str.contains(pattern))
        if sub.height:
            parts.append(_train(sub, state) if fn is _train else fn(sub))
    return pl.concat(parts) if parts else empty_rows()


GRAMMAR = Grammar("megatron", ("iteration", "...: "), MATCH, extract)

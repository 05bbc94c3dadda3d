"""verl (and verl-based RL trainers) console metrics: `step:83 - actor/pg_loss:0.0 - actor/grad_norm:0.006 - ...`.

verl's console logger prints one line per training step (formats: [OBS] verl#7412, Awesome-ML-SYS-Tutorial#106):
`step:N` then ` - key:value` items, keys namespaced with `/`, usually behind Ray's `(TaskRunner pid=..)`
prefix. Names are kept, except those with a canonical meaning: `actor/grad_norm` -> grad_norm, `actor/lr` ->
lr, `training/epoch` -> epoch, `actor/loss` -> loss (else `actor/pg_loss`, the policy loss, is the loss),
`perf/mfu/actor` (a fraction) -> mfu in percent, `perf/max_memory_*_gb` (GiB) -> mem_max_mib /
mem_max_reserved_mib, `perf/throughput` -> tokens_per_s, `timing_s/step` -> step_time_ms. The step key
`training/global_step` repeats the step and gives no row.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import Grammar, num, pairs_after_step, shape

MATCH = r"(?:^|\s)step:\d+ - [\w/@.()-]+:"
NAMES = {
    "actor/grad_norm": "grad_norm",
    "actor/lr": "lr",
    "training/epoch": "epoch",
    "actor/loss": "loss",
    "perf/mfu/actor": "mfu",
    "perf/max_memory_allocated_gb": "mem_max_mib",
    "actor/perf/max_memory_allocated_gb": "mem_max_mib",
    "perf/max_memory_reserved_gb": "mem_max_reserved_mib",
    "actor/perf/max_memory_reserved_gb": "mem_max_reserved_mib",
    "perf/cpu_memory_used_gb": "host_mem_used_mib",
    "actor/perf/cpu_memory_used_gb": "host_mem_used_mib",
    "perf/throughput": "tokens_per_s",
    "timing_s/step": "step_time_ms",
}
SCALE = {"mfu": 100.0, "mem_max_mib": 1024.0, "mem_max_reserved_mib": 1024.0, "host_mem_used_mib": 1024.0,
         "step_time_ms": 1000.0}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """` - key:value` items after `step:N`."""
    kv = pairs_after_step(df, r"\bstep:(\d+) - ", " - ", ":")
    kv = kv.filter(pl.col("key") != "training/global_step")
    has_loss = (pl.col("key") == "actor/loss").any().over("_i")
    name = (
        pl.when((pl.col("key") == "actor/pg_loss") & ~has_loss).then(pl.lit("loss"))
        .otherwise(pl.col("key").replace(NAMES))
    )
    kv = kv.with_columns(name.alias("name"))
    factor = pl.col("name").replace_strict(SCALE, default=1.0, return_dtype=pl.Float64)
    rows = kv.select("_i", "step", "name", (num(pl.col("val")) * factor).alias("value"))
    return shape(rows, "verl")


GRAMMAR = Grammar("verl", ("step:",), MATCH, extract)

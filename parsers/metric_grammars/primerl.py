"""prime-rl trainer step lines: `Step N | Time: 1.35s | Loss: .. | Grad. Norm: .. | LR: .. | Throughput: N tokens/s | ...`.

[OBS] PrimeIntellect-ai/prime-rl#1126: `12:51:09 SUCCESS Step 1 | Time: 1.35s | Loss: 12.3125 | Grad. Norm: 28.4771 |
LR: 1.00e-06 | Throughput: 1507 tokens/s | MFU: 0.4% | Peak Mem.: 5.2/23.7 GiB (22.1%) | Max Vio: 0.9891`.
`Peak Mem.` is the step's peak reserved memory over the device total, in GiB (-> mem_max_reserved_mib and
mem_max_reserved_pct); `Time` is seconds (-> step_time_ms); MFU is a percentage.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import Grammar, canonical_of, num, pairs_after_step, shape

MATCH = r"(?:^|\s)Step \d+ \| Time: [\d.]+s \| "
NAMES = {"grad._norm": "grad_norm", "throughput": "tokens_per_s", "time": "step_time_ms", "max_vio": "max_vio"}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """` | Key: value` items after `Step N`."""
    kv = pairs_after_step(df, r"(?:^|\s)Step (\d+) \| ", " | ", ": ")
    val = pl.col("val").str.strip_chars()
    first = val.str.extract(r"^([-+\w.]+)", 1)
    # `5.2/23.7 GiB (22.1%)`: the peak, and its share of the device in the brackets.
    is_mem = pl.col("key") == "Peak Mem."
    is_time = pl.col("key") == "Time"
    name = canonical_of(kv, "key", NAMES)
    value = (
        pl.when(is_time).then(num(first.str.strip_suffix("s")) * 1000.0)
        .when(is_mem).then(num(val.str.extract(r"^([\d.]+)/", 1)) * 1024.0)
        .otherwise(num(first))
    )
    rows = kv.select("_i", "step", pl.when(is_mem).then(pl.lit("mem_max_reserved_mib")).otherwise(name).alias("name"), value.alias("value"))
    pct = kv.filter(is_mem).select("_i", "step", pl.lit("mem_max_reserved_pct").alias("name"),
                                   num(val.str.extract(r"\(([\d.]+)%\)", 1)).alias("value"))
    return shape(pl.concat([rows, pct]).sort("_i", maintain_order=True), "prime_rl")


GRAMMAR = Grammar("prime_rl", ("| Time: ",), MATCH, extract)

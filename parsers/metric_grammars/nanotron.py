"""nanotron training lines: `iteration: N / M | key: value | ...` with human-formatted numbers.

[OBS] huggingface/nanotron#390, #233, #23: `10/17/2025 16:31:56 [INFO|DP=0|PP=0|TP=0]: iteration: 327281 / 378950 |
consumed_tokens: 85.8G | elapsed_time_per_iteration_ms: 11.5K | tokens_per_sec: 22.8K | tokens_per_sec_per_gpu: 11.4K |
global_batch_size: 64 | lm_loss: 2.38 | lr: 1e-05 | model_tflops_per_gpu: 38.3 | hardware_tflops_per_gpu: 38.3 |
grad_norm: 1.25 | cuda_memory_allocated: 8.86G | cuda_max_memory_reserved: 34.1G`. Values are nanotron's
`human_format` (3 significant digits, K/M/G/T = powers of 1000); memory items are bytes (-> MiB). The
`[INFO|DP=0|PP=0|TP=0|host]` record prefix holds parallel coordinates, not metrics. Names: `lm_loss` -> loss,
`elapsed_time_per_iteration_ms` -> step_time_ms, `tokens_per_sec_per_gpu` -> tokens_per_s (per GPU, as
Megatron's tgs), `tokens_per_sec` -> tokens_per_s_global, `model_tflops_per_gpu` -> tflops.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import Grammar, canonical_of, num, pairs_after_step, shape

MATCH = r"\biteration: \d+ / \d+ \| [a-z_]+: "
NAMES = {
    "lm_loss": "loss",
    "elapsed_time_per_iteration_ms": "step_time_ms",
    "tokens_per_sec_per_gpu": "tokens_per_s",
    "tokens_per_sec": "tokens_per_s_global",
    "model_tflops_per_gpu": "tflops",
    "cuda_memory_allocated": "mem_allocated_mib",
    "cuda_max_memory_reserved": "mem_max_reserved_mib",
}
SUFFIX = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
BYTES = ["cuda_memory_allocated", "cuda_max_memory_reserved"]


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """` | key: value` items after `iteration: N / M`, human-format suffixes expanded."""
    kv = pairs_after_step(df, r"\biteration: (\d+) / \d+ \| ", " | ", ": ")
    val = pl.col("val").str.strip_chars()
    suffix = val.str.extract(r"\d([KMGTP])$", 1)
    factor = suffix.replace_strict(SUFFIX, default=1.0, return_dtype=pl.Float64).fill_null(1.0)
    value = num(pl.when(suffix.is_not_null()).then(val.str.slice(0, val.str.len_chars() - 1)).otherwise(val)) * factor
    value = pl.when(pl.col("key").is_in(BYTES)).then(value / 2**20).otherwise(value)
    rows = kv.select("_i", "step", canonical_of(kv, "key", NAMES).alias("name"), value.alias("value"))
    return shape(rows, "nanotron")


GRAMMAR = Grammar("nanotron", ("iteration: ",), MATCH, extract)

"""OLMo trainer console blocks: a `[step=N/M,epoch=E]` record, then one `    name=value` line per metric.

[OBS] allenai/OLMo#692:

    2024-08-06 10:00:05.520 host:0  olmo.train:908  INFO    [step=2/739328,epoch=0]
        optim/total_grad_norm=0.0002
        train/CrossEntropyLoss=1.7872662283480167e-06
        throughput/device/tokens_per_second=26,668
        System/Peak GPU Memory (MB)=53,695

Values are OLMo's `format_float` (thousands commas, small values in scientific notation). The step is the
record's, carried down the block (and across chunks through `state`); the record's epoch gives an `epoch` row.
Value lines are read only after a record was seen. Names: `train/CrossEntropyLoss` -> loss,
`optim/total_grad_norm` -> grad_norm, `train/Perplexity` -> ppl, `optim/learning_rate_group0` -> lr,
`throughput/device/tokens_per_second` -> tokens_per_s (per device), `System/Peak GPU Memory (MB)` (torch's max
allocated / 1e6) -> mem_max_mib; others stay lower-cased.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, canonical_of, empty_rows, num, shape

HEADER = r"\[step=(?P<s>\d+)/\d+(?:,epoch=(?P<e>\d+))?\]\s*$"
LINE = rf"^ {{4}}(?P<key>(?:train|optim|throughput|System|eval)/[\w/ ().-]+)=(?P<val>{NUM})\s*$"
MATCH = f"{HEADER}|{LINE}"
NAMES = {
    "train/crossentropyloss": "loss",
    "optim/total_grad_norm": "grad_norm",
    "train/perplexity": "ppl",
    "optim/learning_rate_group0": "lr",
    "throughput/device/tokens_per_second": "tokens_per_s",
    "system/peak_gpu_memory_(mb)": "mem_max_mib",
}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Rows of the value lines at the step of the record above them; `epoch` rows from the records."""
    g = df.with_columns(pl.col("msg").str.extract_groups(HEADER).alias("_h"), pl.col("msg").str.extract_groups(LINE).alias("_l"),
                        pl.col("rank").fill_null(-1).alias("_r")).unnest("_h", "_l")
    g = g.with_columns(pl.col("s").cast(pl.Int64, strict=False).alias("_hs"))
    last: dict = state.setdefault("olmo_step", {})
    carried = pl.col("_hs").forward_fill().over("_r")
    if last:
        carried = pl.coalesce(carried, pl.col("_r").replace_strict(last, default=None, return_dtype=pl.Int64))
    g = g.with_columns(carried.alias("step"))
    for rank, s in g.filter(pl.col("_hs").is_not_null()).group_by("_r").agg(pl.col("_hs").last()).iter_rows():
        last[rank] = s
    epochs = g.filter(pl.col("e").is_not_null()).select("_i", "step", pl.lit("epoch").alias("name"), num(pl.col("e")).alias("value"))
    kv = g.filter(pl.col("key").is_not_null() & pl.col("step").is_not_null())
    if kv.height == 0 and epochs.height == 0:
        return empty_rows()
    name = canonical_of(kv, "key", NAMES)
    value = num(pl.col("val"))
    is_mem = pl.col("key") == "System/Peak GPU Memory (MB)"
    rows = kv.select("_i", "step", name.alias("name"), pl.when(is_mem).then(value * 1e6 / 2**20).otherwise(value).alias("value"))
    return shape(pl.concat([epochs, rows]).sort("_i", maintain_order=True), "olmo")


GRAMMAR = Grammar("olmo", ("[step=", "train/", "optim/", "throughput/", "System/", "eval/"), MATCH, extract)

"""MosaicML Composer / llm-foundry ConsoleLogger blocks: a `[batch=N/M]:` header, then one metric a line.

[OBS] mosaicml/composer#1884 (console output of llm-foundry's example):

    [batch=1/3]:
    \t Train trainer/global_step: 0
    \t Train loss/train/total: 12.0570
    \t Train throughput/device/mfu: 0.2489
    \t Train lr-DecoupledAdamW/group0: 0.0000

(newer Composer: `[epoch=1][batch=16/16]:`). The step is the header's batch count (Composer's global
batch timestamp), carried down the block here (and across chunks through `state`); `trainer/global_step`
and `trainer/batch_idx` repeat counters and give no row. Eval blocks (`Eval metrics/eval/...`) keep the
training step of the block before them. Names: `loss/train/total` -> loss, `lr-<Optimizer>/group0` -> lr,
`throughput/device/tokens_per_sec` -> tokens_per_s (per device, as torchtitan's), `throughput/device/mfu`
(a fraction) -> mfu in percent; other keys stay lower-cased.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, canonical_of, empty_rows, num, shape

HEADER = r"^\[(?:epoch=\d+\]\[)?batch=(?P<b>\d+)/\d+\]:\s*$"
# A `- ` bullet: the same lines quoted in an issue's Markdown list ([OBS] mosaicml/composer#2357).
# Composer's keys are namespaced (`loss/train/total`) but for `epoch`: a user's `Eval loss: 0.3` is not one.
LINE = rf"^\s*(?:- )?(?P<split>Train|Eval) (?P<key>[\w.@-]+/[\w/.@-]+|epoch): (?P<val>{NUM})\s*$"
MATCH = f"{HEADER}|{LINE}"
# Counters, not measurements: the step itself and Composer's timestamp fields ([OBS] princeton-nlp/LLM-Shearing#24).
SKIP = ["trainer/global_step", "trainer/batch_idx", "time/batch", "time/sample", "time/batch_in_epoch", "time/sample_in_epoch",
        "time/token", "time/token_in_epoch"]
NAMES = {
    "loss/train/total": "loss",
    "throughput/device/tokens_per_sec": "tokens_per_s",
    "throughput/device/samples_per_sec": "samples_per_s",
    "throughput/device/mfu": "mfu",
}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Rows of the metric lines, at the step of the last `[batch=N/M]:` header of their rank."""
    r = pl.col("rank").fill_null(-1)
    g = df.with_columns(
        pl.col("msg").str.extract(HEADER, 1).cast(pl.Int64, strict=False).alias("_h"),
        pl.col("msg").str.extract_groups(LINE).alias("_g"), r.alias("_r"),
    ).unnest("_g")
    last: dict = state.setdefault("composer_batch", {})
    if last:
        g = g.with_columns(pl.coalesce("_h", pl.col("_h").forward_fill().over("_r"),
                                       pl.col("_r").replace_strict(last, default=None, return_dtype=pl.Int64)).alias("step"))
    else:
        g = g.with_columns(pl.coalesce("_h", pl.col("_h").forward_fill().over("_r")).alias("step"))
    for rank, b in g.filter(pl.col("_h").is_not_null()).group_by("_r").agg(pl.col("_h").last()).iter_rows():
        last[rank] = b
    kv = g.filter(pl.col("key").is_not_null() & ~pl.col("key").is_in(SKIP))
    if kv.height == 0:
        return empty_rows()
    key = pl.col("key").str.replace(r"^lr-[\w.-]+/group0$", "lr")
    kv = kv.with_columns(key.alias("key"))
    name = canonical_of(kv, "key", NAMES)
    value = num(pl.col("val"))
    rows = kv.select("_i", "step", name.alias("name"), pl.when(pl.col("key") == "throughput/device/mfu").then(value * 100.0).otherwise(value).alias("value"))
    return shape(rows, "composer")


GRAMMAR = Grammar("composer", ("batch=", "Train ", "Eval "), MATCH, extract)

"""CenterNet / CenterTrack / FairMOT progress lines: `train: [e][i/n]|Tot: .. |ETA: .. |loss 1.7448 |.. |Data 3.556s(0.517s) |Net 1.014s`.

The trainer's `progress.Bar` suffix (xingyizhou/CenterNet src/lib/trains/base_trainer.py, copied by
CenterTrack and FairMOT): `'{phase}: [{epoch}][{iter_id}/{num_iters}]|Tot: {elapsed} |ETA: {eta} '`, then
`'|{name} {avg:.4f} '` per loss component (each the epoch's running average), then, unless
`--hide_data_time`, `'|Data {dt.val:.3f}s({dt.avg:.3f}s) |Net {bt.avg:.3f}s'`. The batch timer runs from the
end of the previous batch, so `Net` includes the data wait. Rows: the loss components, `data_time_ms` (this
batch) and `data_time_avg_ms`, `step_time_avg_ms` (Net), and `epoch_batch` (the batch within its epoch).
Step: `(e - 1) * n + i` (epochs 1-based, batches 0-based). `Tot`/`ETA` are clocks, no measurements.
A `val:` phase's losses take `eval_`.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, epoch_iteration, num, pairs, shape

HEAD = r"(?P<phase>train|val|test): \[(?P<e>\d+)\]\[(?P<i>\d+)/(?P<n>\d+)\]"
MATCH = HEAD + r"\|Tot: "
PAIR = rf"\|(?P<key>[A-Za-z_]\w*) (?P<val>{NUM})(?P<unit>s)?(?:\((?P<avg>{NUM})s\))?"
TIMES = {"Data": "data_time_ms", "Net": "step_time_avg_ms"}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Loss averages and the Data/Net meters after the `phase: [e][i/n]` header."""
    g = pl.col("msg").str.extract_groups(HEAD)
    base = df.with_columns(epoch_iteration(pl.col("msg"), HEAD).alias("step"), g.struct.field("i").cast(pl.Float64).alias("_b"),
                           g.struct.field("phase").alias("_p"))
    kv = pairs(base, PAIR, pl.col("msg").str.replace(r"^.*?\|Tot: ", "|Tot: "))
    value = num(pl.col("val"))
    is_time = pl.col("key").is_in(list(TIMES))
    loss_name = pl.when(pl.col("_p") == "train").then(pl.col("key")).otherwise(pl.lit("eval_") + pl.col("key"))
    rows = kv.select("_i", "step", pl.when(is_time).then(pl.col("key").replace(TIMES)).otherwise(loss_name).alias("name"),
                     pl.when(is_time).then(value * 1000.0).otherwise(value).alias("value"))
    avg = kv.filter(pl.col("avg").is_not_null()).select("_i", "step", pl.lit("data_time_avg_ms").alias("name"),
                                                        (num(pl.col("avg")) * 1000.0).alias("value"))
    batch = kv.filter(pl.col("_p") == "train").unique("_i", keep="first", maintain_order=True).select(
        "_i", "step", pl.lit("epoch_batch").alias("name"), pl.col("_b").alias("value"))
    return shape(pl.concat([rows, avg, batch]).sort("_i", maintain_order=True), "centernet")


GRAMMAR = Grammar("centernet", ("|Tot: ",), MATCH, extract)

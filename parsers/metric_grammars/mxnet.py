"""dmlc cxxnet round summaries and mxnet Speedometer / epoch lines: `name:value` / `Split-name=value` metrics.

cxxnet (dmlc/cxxnet#84, #245, #227, #194): `round        0:[    5000] 6907 sec elapsed[1]   train-error:0.998988
train-rec@1:0.001031  train-rec@5:0.00505042  test-error:0.999  test-rec@1:0.00102  test-rec@5:0.0048`, one line per
round (epoch) of B batches; older builds print only `[1] test-error:0.998998 test-rec@1:0.001002 ..` (dmlc/cxxnet#3).
The step is the batches done by the end of the round, `(round + 1) * B` (the round number where no B is printed).
mxnet's `Speedometer` and `fit` (apache/mxnet#3072, #11284): `Epoch[0] Batch [50]\tSpeed: 95.38 samples/sec\t
Train-accuracy=0.001016`, `Epoch[0] Batch [39]\tSpeed: 2052.37 samples/sec\taccuracy=1.000000, top_k_accuracy_5=0.975`,
and per epoch `Epoch[0] Train-accuracy=0.239`, `Epoch[0] Validation-accuracy=0.3`, `Epoch[0] Time cost=12.3`. The batch
restarts every epoch and the batches per epoch are not printed: these rows keep no step (their order stands in).
Both give an `epoch` row (the round / `Epoch[N]`): how many epochs a stretch of the log spans. Names go through the
word rules (`train-rec@1` -> acc@1, `test-error` -> test_error, `Validation-accuracy` -> eval_accuracy).
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, groups, num, pairs, shape
from forensics.parsers.metric_names import prose_names

ROUND = r"^\s*(?:round\s+(?P<round>\d+):\[\s*(?P<batches>\d+)\]\s+\d+ sec elapsed)?\[(?P<ep>\d+)\]"
EPOCH = r"\bEpoch\[(?P<mx>\d+)\](?:\s+Batch\s*\[\s*\d+\])?"
# cxxnet pairs `split-name:value`; mxnet `Split-name=value` (and `accuracy=1.0, top_k_accuracy_5=0.97`).
PAIR = rf"(?:^|[\s,])(?P<key>[A-Za-z][\w@-]*(?: cost)?)[:=](?P<val>{NUM})"
MATCH = (
    rf"^\s*(?:round\s+\d+:\[\s*\d+\]\s+\d+ sec elapsed)?\[\d+\]\S*\s+[a-z]+-[\w@-]+:{NUM}"
    rf"|\bEpoch\[\d+\](?:\s+Batch\s*\[\s*\d+\]\s+Speed: {NUM} samples/sec)?\s+[A-Za-z][\w@-]*(?: cost)?={NUM}"
)


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Metric pairs of each line; the step and epoch from its head; mxnet's speed as samples_per_s."""
    g = groups(groups(df, ROUND), EPOCH)
    rnd, b = pl.col("round").cast(pl.Int64, strict=False), pl.col("batches").cast(pl.Int64, strict=False)
    g = g.with_columns(
        pl.coalesce((rnd + 1) * b, pl.col("ep").cast(pl.Int64, strict=False)).alias("step"),
        pl.coalesce(rnd, pl.col("ep").cast(pl.Int64, strict=False) - 1, pl.col("mx").cast(pl.Int64, strict=False)).alias("_e"),
    )
    # The head is no pair: cut it before reading them (`[1]` is the round, `Speed: 95.38` is read below).
    body = pl.col("msg").str.replace(ROUND, "").str.replace(rf"{EPOCH}(?:\s+Speed: {NUM} samples/sec)?", "")
    kv = pairs(g, PAIR, body)
    if kv.height == 0:
        return shape(pl.DataFrame(), "mxnet")
    raw = kv.get_column("key").str.to_lowercase().str.replace(r" cost$", "_cost")
    names = prose_names(raw, snake_rest=True)
    rows = kv.select(
        "_i", "step",
        raw.replace(names).str.replace("^time_cost$", "epoch_time_ms").alias("name"),
        pl.when(raw == "time_cost").then(num(pl.col("val")) * 1000.0).otherwise(num(pl.col("val"))).alias("value"),
    )
    speed = g.select("_i", "step", pl.lit("samples_per_s").alias("name"),
                     num(pl.col("msg").str.extract(rf"Speed: ({NUM}) samples/sec", 1)).alias("value"))
    epoch = g.select("_i", "step", pl.lit("epoch").alias("name"), pl.col("_e").cast(pl.Float64).alias("value"))
    return shape(pl.concat([rows, speed, epoch]).sort("_i", maintain_order=True), "mxnet")


GRAMMAR = Grammar("mxnet", (" sec elapsed[", "-error:", "-rec@", "Epoch["), MATCH, extract)

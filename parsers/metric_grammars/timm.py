"""timm (pytorch-image-models) `train.py` training and validation lines, and the many forks of that loop.

Training ([OBS] pytorch-image-models#814, T2T-ViT#19): `Train: 1 [ 350/5004 (  7%)]  Loss:  6.732388 (6.8414)
Time: 1.271s,  201.43/s  (0.608s,  420.96/s)  LR: 2.133e-02  Data: 1.056 (0.403)` — meters print `current
(average)`: the current value is read; `Time` is seconds -> `step_time_ms`, the rate after it ->
`samples_per_s`, `Data` seconds -> `data_time_ms`. Forks add `Name: value (avg)` meters (`Loss_kd`,
`Prec@1`, `r-LR`), kept under their own names. The step is `epoch * batches + batch` (as MetricLogger).
Validation: `Test: [   0/390]  Time: 0.686 (0.686)  Loss:  0.8057 (0.8057)  Acc@1: 85.1562 (85.1562)  ...`
(`Test (EMA):` too) -> `eval_*` names, step carried from the training lines.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, canonical_of, num, pairs, shape

TRAIN = r"(?:^|\s)Train: (?P<ep>\d+) \[\s*(?P<i>\d+)/(?P<n>\d+) \(\s*\d+%\)\]\s+Loss:"
TEST = r"(?:^|\s)Test(?: \(EMA\))?: \[\s*\d+/\d+\]\s+Time:"
MATCH = f"{TRAIN}|{TEST}"
PAIR = rf"(?P<key>[A-Za-z][\w@/-]*): +(?P<val>{NUM})"
NAMES = {"time": "step_time_ms", "data": "data_time_ms"}
SECONDS = ["time", "data"]


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Meters after the `[i/n]` header; `Time: 1.2s,  201.4/s` also gives the sample rate."""
    g = pl.col("msg").str.extract_groups(TRAIN)
    ep = g.struct.field("ep").cast(pl.Int64, strict=False)
    i = g.struct.field("i").cast(pl.Int64, strict=False)
    n = g.struct.field("n").cast(pl.Int64, strict=False)
    train = pl.col("msg").str.contains(TRAIN)
    base = df.with_columns(
        pl.when(train).then(ep * n + i).otherwise(None).alias("step"),
        pl.when(train).then(pl.lit("")).otherwise(pl.lit("eval_")).alias("_pre"),
    )
    body = pl.col("msg").str.replace(r"^.*?(?:Train|Test)(?: \(EMA\))?: [^\]]*\]", "")
    kv = pairs(base, PAIR, body)
    kv = kv.with_columns(pl.col("key").str.to_lowercase().alias("key"))
    value = num(pl.col("val"))
    rows = kv.select(
        "_i", "step",
        (pl.col("_pre") + canonical_of(kv, "key", NAMES)).alias("name"),
        pl.when(pl.col("key").is_in(SECONDS)).then(value * 1000.0).otherwise(value).alias("value"),
    )
    rate = base.select(
        "_i", "step", (pl.col("_pre") + pl.lit("samples_per_s")).alias("name"),
        num(pl.col("msg").str.extract(rf"\bTime: [\d.]+s,\s+({NUM})/s", 1)).alias("value"),
    )
    return shape(pl.concat([rows, rate]).sort("_i", maintain_order=True), "timm")


GRAMMAR = Grammar("timm", ("Train: ", "Test: ", "Test (EMA): "), MATCH, extract)

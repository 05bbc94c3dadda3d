"""k2/icefall recipe lines: `Epoch E, batch B, loss[k=v, ..., over N frames. ], tot_loss[...], batch size: S, lr: X`.

[OBS] k2-fsa/icefall#320, PR#314, PR#399: `2022-06-08 08:01:22,072 INFO [train.py:815] Epoch 1, batch 5,
loss[loss=0.6028, simple_loss=1.206, pruned_loss=9.481, over 5392.00 frames.], tot_loss[loss=0.7444,
simple_loss=1.489, pruned_loss=9.21, over 31213.18 frames.], batch size: 18, lr: 3.00e-03` (newer recipes
add `, grad_scale: 2.0`). `loss[..]` is this batch's values (read under their own names: `loss`,
`simple_loss`, `ctc_loss`, ...); `tot_loss[..]` is the frame-weighted running average since the epoch
started, read as `<name>_avg` (as Lightning's running `loss` is `loss_avg`); frame counts are not metrics.
`batch size` -> `batch_size`, `lr`, `grad_scale` (the AMP scaler) -> `loss_scale`.
Step: the batch index within the epoch, made global across epochs (common.epoch_steps: the line has no
batches-per-epoch). `Epoch E, validation: loss=.., over N frames.` -> `eval_*` rows, step carried.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, empty_rows, epoch_steps, num, pairs, shape

TRAIN = r"(?:^|\s)Epoch (?P<e>\d+), batch (?P<b>\d+), loss\["
VALID = r"(?:^|\s)Epoch \d+, validation: \w+="
MATCH = f"{TRAIN}|{VALID}"
PAIR = rf"(?P<key>[A-Za-z][\w ]*?)[=:] ?(?P<val>{NUM})"
NAMES = {"batch size": "batch_size", "grad_scale": "loss_scale"}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Current (`loss[..]`), running (`tot_loss[..]`) and trailing values of training lines; validation lines."""
    is_train = pl.col("msg").str.contains(TRAIN)
    train = df.filter(is_train)
    parts = []
    if train.height:
        g = train.select(pl.col("msg").str.extract_groups(TRAIN).alias("_g")).unnest("_g")
        base = train.with_columns(epoch_steps(g, pl.col("e"), pl.col("b"), state, "icefall_epochs"))
        body = pl.col("msg").str.replace(r"^.*?, batch \d+, ", "")
        # Sections: `loss[...]`, `tot_loss[...]`, then `batch size: S, lr: X, grad_scale: G`.
        cur = body.str.extract(r"^loss\[([^\]]*)\]", 1)
        tot = body.str.extract(r"tot_loss\[([^\]]*)\]", 1)
        tail = body.str.replace(r"^.*\]", "")
        for text, suffix in ((cur, ""), (tot, "_avg"), (tail, "")):
            kv = pairs(base, PAIR, text)
            key = pl.col("key").str.strip_chars().str.strip_chars(", ")
            parts.append(kv.select("_i", "step", (key.replace(NAMES) + suffix).alias("name"), num(pl.col("val")).alias("value")))
    valid = df.filter(~is_train)
    if valid.height:
        text = pl.col("msg").str.replace(r"^.*?validation: ", "")
        kv = pairs(valid.with_columns(pl.lit(None, pl.Int64).alias("step")), PAIR, text)
        parts.append(kv.select("_i", "step", (pl.lit("eval_") + pl.col("key").str.strip_chars()).alias("name"), num(pl.col("val")).alias("value")))
    parts = [p for p in parts if p.height]
    return shape(pl.concat(parts), "icefall") if parts else empty_rows()


GRAMMAR = Grammar("icefall", ("batch ", "validation: "), MATCH, extract)

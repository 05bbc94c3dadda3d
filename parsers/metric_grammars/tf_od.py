"""TF2 Object Detection API (`model_lib_v2.train_loop`): the `Step N per-step time` line and the losses dict after it.

Every 100 steps `model_lib_v2.py` logs `'Step {} per-step time {:.3f}s'` and then `pprint.pformat(logged_dict_np,
width=40)`: a dict of `Loss/<part>` values plus `learning_rate`, which the 40-column width splits one key per line
(keys sorted, so `learning_rate` comes last and closes the dict):

    I0409 23:03:12.869635 140410452137792 model_lib_v2.py:708] {'Loss/classification_loss': nan,
     'Loss/localization_loss': nan,
     'Loss/regularization_loss': nan,
     'Loss/total_loss': nan,
     'learning_rate': 0.07922263}

([OBS] tensorflow/models research/object_detection/model_lib_v2.py; EdjeElectronics/TensorFlow-Lite-Object-
Detection-on-Android-and-Raspberry-Pi#183, tensorflow/tensorflow#63602.) Each line is read on its own:
`Loss/total_loss` is the training loss, the other `Loss/<part>` keys are its parts (`classification_loss`, ...),
`learning_rate` is lr; the step comes from the `Step N per-step time` line above (this grammar reads it as the
step time, textlog carries its step onto the dict's lines). The older `... per-step time 0.813s loss=1.396` line
holds its loss and is the generic reader's.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, groups, num, shape

STEP_LINE = rf"^Step (?P<step>\d+) per-step time (?P<t>{NUM})s$"
# One key of the dict per line: the first opens it with `{`, the last (`learning_rate`, sorted last) closes it.
LOSS_LINE = rf"^\s*\{{?'Loss/(?P<key>[\w/]+)': (?P<val>{NUM})[,}}]$"
LR_LINE = rf"^\s*'learning_rate': (?P<lr>{NUM})\}}$"
MATCH = f"{STEP_LINE}|{LOSS_LINE}|{LR_LINE}"


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """step_time_ms at the step line; loss, its parts and lr from the dict's lines (their step carried later)."""
    g = groups(df, f"(?:{STEP_LINE})|(?:{LOSS_LINE})|(?:{LR_LINE})")
    key = pl.col("key").str.to_lowercase()
    rows = pl.concat([
        g.select("_i", pl.col("step").cast(pl.Int64, strict=False), pl.lit("step_time_ms").alias("name"), (num(pl.col("t")) * 1000.0).alias("value")),
        g.select("_i", pl.lit(None, pl.Int64).alias("step"),
                 pl.when(key == "total_loss").then(pl.lit("loss")).otherwise(key.str.replace_all("/", "_")).alias("name"),
                 num(pl.col("val")).alias("value")),
        g.select("_i", pl.lit(None, pl.Int64).alias("step"), pl.lit("lr").alias("name"), num(pl.col("lr")).alias("value")),
    ])
    return shape(rows, "tf_od")


GRAMMAR = Grammar("tf_od", ("per-step time", "'Loss/", "'learning_rate'"), MATCH, extract)

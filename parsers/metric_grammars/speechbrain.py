"""SpeechBrain `FileTrainLogger` epoch lines: `epoch: 1, lr: 1.00e+00 - train loss: 9.45e-01 - valid loss: 1.23, valid CER: 35.42`.

[OBS] speechbrain/speechbrain PR#2216, PR#1892, #980 (`speechbrain.utils.train_logger - ` prefix in the
console, bare in `train_log.txt`): meta items (`epoch`, `lr`, `steps`, `optimizer: Adam`, any `lr_*`) joined by
", ", then ` - ` and the train stats (`train loss: ..`), then ` - ` and the valid stats (`valid loss: ..,
valid CER: ..`). One line per epoch: `train X` -> `X` (the epoch's mean training loss is `loss`), `valid X`
-> `eval_x`, non-numeric meta (the optimizer's name) gives nothing. Step: `steps: N` when printed, else
none (carried from the step lines before it). The closing `Epoch loaded: 30 - test loss: ..` line reports
the test set of a finished run (a summary): it is claimed and gives no row.
"""

from __future__ import annotations

import polars as pl

from parsers.metric_grammars.common import Grammar, canonical, empty_rows, num, shape

EPOCH = r"(?:^|\s)epoch: \d+, [\w ]+: .*? - (?:train|valid) [\w ]+: "
TEST = r"(?:^|\s)Epoch loaded: \d+ - test [\w ]+: "
MATCH = f"{EPOCH}|{TEST}"


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Meta, train and valid items of epoch lines (test summaries give nothing)."""
    lines = df.filter(pl.col("msg").str.contains(EPOCH))
    if lines.height == 0:
        return empty_rows()
    body = pl.col("msg").str.replace(r"^.*?(?:^|\s)(epoch: \d+, )", "$1")
    items = (
        lines.with_columns(body.str.split(" - ").alias("_sec")).explode("_sec")
        .with_columns(pl.col("_sec").str.split(", ")).explode("_sec")
        .with_columns(pl.col("_sec").str.splitn(": ", 2).struct.rename_fields(["key", "val"]).alias("_kv")).unnest("_kv")
        .with_columns(pl.col("key").str.strip_chars(), num(pl.col("val")).alias("value"))
        .filter(pl.col("value").is_not_null())
    )
    step = items.filter(pl.col("key") == "steps").select("_i", pl.col("value").cast(pl.Int64).alias("step"))
    items = items.join(step, on="_i", how="left", maintain_order="left").filter(pl.col("key") != "steps")
    key = pl.col("key")
    name = (
        pl.when(key.str.starts_with("train ")).then(canonical(key.str.strip_prefix("train ")))
        .when(key.str.starts_with("valid ")).then(pl.lit("eval_") + canonical(key.str.strip_prefix("valid ")))
        .otherwise(canonical(key))
    )
    return shape(items.select("_i", "step", name.alias("name"), "value"), "speechbrain")


GRAMMAR = Grammar("speechbrain", ("epoch: ", "Epoch loaded: "), MATCH, extract)

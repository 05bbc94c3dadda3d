"""SpeechBrain `FileTrainLogger` epoch lines: `epoch: 1, lr: 1.00e+00 - train loss: 9.45e-01 - valid loss: 1.23, valid CER: 35.42`.

[OBS] speechbrain/speechbrain PR#2216, PR#1892, #980 (`speechbrain.utils.train_logger - ` prefix in the
console, bare in `train_log.txt`): meta items (`epoch`, `lr`, `steps`, `optimizer: Adam`, any `lr_*`) joined by
", ", then ` - ` and the train stats (`train loss: ..`), then ` - ` and the valid stats (`valid loss: ..,
valid CER: ..`). One line per epoch: `train X` -> `X` (the epoch's mean training loss is `loss`), `valid X`
-> `eval_x`, non-numeric meta (the optimizer's name) gives nothing. Step: `steps: N` when printed, else
none (carried from the step lines before it). The epoch's mean training loss repeats the training bar's last
`train_loss=`; where that bar is in the log the bar's row is kept and the epoch line's is dropped
(`drop_bar_repeats`, run once steps are known in metric_lines.finalize). The closing `Epoch loaded: 30 - test loss: ..` line reports
the test set of a finished run (a summary): it is claimed and gives no row.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import Grammar, canonical, empty_rows, num, shape

# `epoch: 1, ..` (train_log.txt, recipes' default) or `Epoch: 6, ..` (recipes that pass `{"Epoch": epoch}`, #938).
EPOCH = r"(?:^|\s)[Ee]poch: \d+, [\w ]+: .*? - (?:train|valid) [\w ]+: "
TEST = r"(?:^|\s)Epoch loaded: \d+ - test [\w ]+: "
MATCH = f"{EPOCH}|{TEST}"


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Meta, train and valid items of epoch lines (test summaries give nothing)."""
    lines = df.filter(pl.col("msg").str.contains(EPOCH))
    if lines.height == 0:
        return empty_rows()
    body = pl.col("msg").str.replace(r"^.*?(?:^|\s)([Ee]poch: \d+, )", "$1")
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


# How far back (lines) the epoch's training bar may end before its epoch line: the valid bar, a scheduler
# line and checkpoint lines come between (speechbrain#938, PR#2216).
BAR_WINDOW = 16


def drop_bar_repeats(metrics: pl.DataFrame) -> pl.DataFrame:
    """The epoch line's `train loss` is the epoch's mean training loss, which the training bar's last state
    already showed (`train_loss=0.945` then `train loss: 9.45e-01`, both at the epoch's last step): the
    bar's row stays (it is the per-step reading), the epoch line's `loss` goes when the nearest `loss` of a
    `tqdm_postfix` row at most BAR_WINDOW lines before it on the same rank holds the same value as printed
    (three significant digits). Without a bar (train_log.txt) the epoch line's `loss` is the only one and stays."""
    is_sb = (pl.col("source") == "speechbrain") & (pl.col("name") == "loss")
    sb = metrics.with_row_index("_o").filter(is_sb)
    if sb.height == 0:
        return metrics
    bars = metrics.filter((pl.col("source") == "tqdm_postfix") & (pl.col("name") == "loss"))
    if bars.height == 0:
        return metrics
    key = [pl.col("rank").fill_null(-1).alias("_r")]
    near = sb.select("_o", "line", "value", *key).sort("line").join_asof(
        bars.select(pl.col("line").alias("_bl"), pl.col("line"), pl.col("value").alias("_bv"), *key).sort("line"),
        on="line", by="_r", strategy="backward", tolerance=BAR_WINDOW, check_sortedness=False)
    same = (pl.col("line") > pl.col("_bl")) & ((pl.col("value") - pl.col("_bv")).abs() <= 5e-3 * pl.col("_bv").abs())
    drop = near.filter(same.fill_null(False)).get_column("_o")
    if drop.len() == 0:
        return metrics
    return metrics.with_row_index("_o").filter(~pl.col("_o").is_in(drop.implode())).drop("_o")


GRAMMAR = Grammar("speechbrain", ("epoch: ", "Epoch loaded: "), MATCH, extract)

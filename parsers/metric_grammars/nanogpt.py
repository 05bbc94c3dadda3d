"""nanoGPT and nanochat training prints (formats.md §1.9).

nanoGPT: `iter 100: loss 3.2345, time 123.45ms, mfu 38.12%` and the eval line
`step 250: train loss 1.5440, val loss 1.7220` (-> `eval_train_loss`, `eval_loss`). `mfu -100.00%` is
nanoGPT's placeholder before the 5th iteration (running_mfu starts at -1), not a measurement: no row.
nanochat: `step 00004/21400 (0.02%) | loss: 8.893647 | lrm: 1.00 | dt: 989.44ms | tok/sec: 529,882 |
mfu: 74.13 | total time: 0.00m`.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import (
    NUM,
    TIME_TO_MS,
    Grammar,
    canonical,
    empty_rows,
    num,
    pairs,
    scale_by_unit,
    shape,
    wide_to_rows,
)

ITER = rf"^iter (?P<it>\d+): loss (?P<loss>{NUM}), time (?P<ms>{NUM})ms(?:, mfu (?P<mfu>{NUM})%)?"
EVAL = rf"^step (?P<st>\d+): train loss (?P<tl>{NUM}), val loss (?P<vl>{NUM})"
CHAT = r"^step (?P<cs>\d+)/\d+ \([\d.]+%\) \| "
MATCH = "|".join([ITER, EVAL, CHAT])
CHAT_NAMES = {"dt": "step_time_ms", "total_time": "total_time_ms"}


def _g(pattern: str, name: str) -> pl.Expr:
    return pl.col("msg").str.extract_groups(pattern).struct.field(name)


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Dispatch to the three line forms."""
    parts = []
    it = df.filter(pl.col("msg").str.contains(ITER))
    if it.height:
        mfu = num(_g(ITER, "mfu"))
        parts.append(wide_to_rows(it, {
            "loss": num(_g(ITER, "loss")),
            "step_time_ms": num(_g(ITER, "ms")),
            "mfu": pl.when(mfu == -100.0).then(None).otherwise(mfu),
        }, _g(ITER, "it").cast(pl.Int64, strict=False), "nanogpt"))
    ev = df.filter(pl.col("msg").str.contains(EVAL))
    if ev.height:
        parts.append(wide_to_rows(ev, {"eval_train_loss": num(_g(EVAL, "tl")), "eval_loss": num(_g(EVAL, "vl"))},
                                  _g(EVAL, "st").cast(pl.Int64, strict=False), "nanogpt"))
    chat = df.filter(pl.col("msg").str.contains(CHAT))
    if chat.height:
        base = chat.with_columns(_g(CHAT, "cs").cast(pl.Int64, strict=False).alias("step"))
        kv = pairs(base, rf"\| (?P<key>[A-Za-z][\w/ ]*?): (?P<val>{NUM})(?P<unit>ms|s|m)?\b")
        raw = num(pl.col("val"))
        rows = kv.select("_i", "step", canonical(pl.col("key"), CHAT_NAMES).alias("name"),
                         pl.when(pl.col("unit").is_not_null()).then(scale_by_unit(raw, pl.col("unit"), TIME_TO_MS))
                         .otherwise(raw).alias("value"))
        parts.append(shape(rows, "nanochat"))
    return pl.concat(parts) if parts else empty_rows()


GRAMMAR = Grammar("nanogpt", ("loss",), MATCH, extract)

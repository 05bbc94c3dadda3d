"""VITS-family trainers (RVC, so-vits-svc, VITS forks): the `[global_step, lr]` line before each loss line.

[OBS] RVC-Project/Retrieval-based-Voice-Conversion-WebUI#507, Mangio621/Mangio-RVC-Fork#12:
`INFO:exp:Train Epoch: 2 [1%]`, `INFO:exp:[200, 9.99875e-05]`, `INFO:exp:loss_disc=3.859, loss_gen=3.076,
loss_fm=10.436,loss_mel=21.974, loss_kl=1.270` (`logger.info([global_step, lr])`, then an f-string). The
bracketed pair gives `lr` at that step; the loss line after it is the generic reader's and takes the step
from this line (textlog carries it). Only a pair whose second item reads as a learning rate (`0.x` or
`x.ye-z`) is taken, so other two-item lists printed to a log are not.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import Grammar, num, shape

MATCH = r"^\[\d+, (?:\d(?:\.\d+)?e-\d+|0\.\d+)\]$"


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """`lr` at the bracketed step."""
    parts = pl.col("msg").str.strip_chars("[]").str.split_exact(", ", 1)
    rows = df.select(
        "_i",
        parts.struct.field("field_0").cast(pl.Int64, strict=False).alias("step"),
        pl.lit("lr").alias("name"),
        num(parts.struct.field("field_1")).alias("value"),
    )
    return shape(rows, "vits")


GRAMMAR = Grammar("vits", ("e-", ", 0."), MATCH, extract)

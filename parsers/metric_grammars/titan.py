"""torchtitan metric lines (formats.md §1.8), every era.

`step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%`
(`wps` before late 2024; no `grad_norm` before v0.2.0; `mfu: N/A` for quantized runs -> no row) and
`validate step: N  loss: ...` (-> `eval_` names). `memory` is max reserved GiB -> `mem_max_reserved_mib`
and `mem_max_reserved_pct`. Colours are already stripped by the line reader.
"""

from __future__ import annotations

import polars as pl

from parsers.metric_grammars.common import NUM, Grammar, num, shape, wide_to_rows

MATCH = rf"^(?P<val>validate )?step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>{NUM})"


def _field(name: str, pattern: str) -> pl.Expr:
    return num(pl.col("msg").str.extract(rf"\b{name}:\s*(?P<v>{pattern})", 1))


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Fixed fields; validation lines get `eval_` names."""
    cols = {
        "loss": _field("loss", NUM),
        "grad_norm": _field("grad_norm", NUM),
        "mem_max_reserved_mib": num(pl.col("msg").str.extract(rf"\bmemory:\s*({NUM})GiB", 1)) * 1024,
        "mem_max_reserved_pct": num(pl.col("msg").str.extract(rf"\bmemory:\s*{NUM}GiB\(({NUM})%\)", 1)),
        "tokens_per_s": num(pl.coalesce(pl.col("msg").str.extract(rf"\btps:\s*({NUM})", 1),
                                        pl.col("msg").str.extract(rf"\bwps:\s*({NUM})", 1))),
        "tflops": _field("tflops", NUM),
        "mfu": num(pl.col("msg").str.extract(rf"\bmfu:\s*({NUM})%", 1)),
    }
    step = pl.col("msg").str.extract(MATCH, 2).cast(pl.Int64, strict=False)
    rows = wide_to_rows(df, cols, step, "torchtitan")
    is_val = df.select("_i", pl.col("msg").str.starts_with("validate ").alias("_v"))
    rows = rows.join(is_val, on="_i", how="left").with_columns(
        pl.when(pl.col("_v")).then(pl.lit("eval_") + pl.col("name")).otherwise(pl.col("name")).alias("name")
    )
    return shape(rows, "torchtitan")


GRAMMAR = Grammar("torchtitan", ("loss",), MATCH, extract)

"""NVIDIA DLLogger stdout lines (DeepLearningExamples): `DLL {timestamp} - {step} {name} : {value} {unit} ...`.

[SRC] dllogger StdOutBackend: prefix `DLL {datetime} - `, then `str(step)` (a tuple such as `(0, 100)`,
`()` for run summaries, `PARAMETER` for the configuration) or a script's own step format, then
`{metric} : {value} {unit}` items joined by a space. [OBS] NVIDIA/DeepLearningExamples#1107 (BERT):
`DLL 2022-04-05 05:10:36.324733 - Training Epoch: 0 Training Iteration: 651  step_loss : 2.05  learning_rate : 2.9e-05`.

Step: `Iteration: N` (any prefix word), else the last number of a step tuple. `Epoch: N` gives an `epoch`
row. Lines whose step is `()` or a word (`PARAMETER`) are run summaries / settings, not per-step
measurements, and give no row (as HF's `***** train metrics *****` blocks). Names: a `train.`/`training.`
prefix is dropped, `val.`/`eval.`/`validation.` becomes `eval_`, BERT's `step_loss` is the loss; a value in
`s`/`ms` becomes `<name>_ms`.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, canonical_of, empty_rows, num, pairs, shape

PREFIX = r"\bDLL \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? - "
# Every DLL line is claimed (a summary's `final_loss : ..` must not reach the generic reader); rows
# come only from per-step lines: a non-empty tuple step, or a labelled `Iteration: N` / `Epoch: N` step.
MATCH = PREFIX
PER_STEP = PREFIX + r"(?:\(\d|[A-Za-z ]*(?:Iteration|Epoch|Step): \d)"
ITEM = rf"(?:^|\s)(?P<key>[A-Za-z_][\w./-]*) : (?P<val>{NUM})(?: (?P<unit>s|ms)\b)?"
NAMES = {"step_loss": "loss", "learning_rate": "lr", "lr": "lr"}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """`name : value` items after the step, at the step it names."""
    df = df.filter(pl.col("msg").str.contains(PER_STEP))
    if df.height == 0:
        return empty_rows()
    body = pl.col("msg").str.replace(r"^.*?" + PREFIX, "")
    base = df.with_columns(body.alias("_body"))
    it = pl.col("_body").str.extract(r"Iteration: (\d+)", 1)
    tup = pl.col("_body").str.extract(r"^\(([\d, ]*)\)", 1).str.extract(r"(\d+)\s*,?\s*$", 1)
    ep = pl.col("_body").str.extract(r"Epoch: (\d+)", 1)
    base = base.with_columns(
        pl.coalesce(it, tup, pl.col("_body").str.extract(r"Step: (\d+)", 1)).cast(pl.Int64, strict=False).alias("step"),
        ep.cast(pl.Float64, strict=False).alias("_ep"),
    )
    kv = pairs(base, ITEM, pl.col("_body"))
    if kv.height == 0:
        return empty_rows()
    raw = pl.col("key").str.replace(r"^(?:train|training)\.", "").str.replace(r"^(?:val|eval|validation)\.", "eval_")
    kv = kv.with_columns(raw.alias("key"))
    # A time in `s` / `ms` (the metric's unit metadata) -> `<name>_ms`.
    name = canonical_of(kv, "key", NAMES)
    timed = pl.col("unit").is_not_null()
    rows = kv.select(
        "_i", "step",
        pl.when(timed).then(name + "_ms").otherwise(name).alias("name"),
        (num(pl.col("val")) * pl.when(pl.col("unit") == "s").then(1000.0).otherwise(1.0)).alias("value"),
    )
    epochs = base.filter(pl.col("_ep").is_not_null()).select("_i", "step", pl.lit("epoch").alias("name"), pl.col("_ep").alias("value"))
    return shape(pl.concat([epochs, rows]).sort("_i", maintain_order=True), "dllogger")


GRAMMAR = Grammar("dllogger", ("DLL ",), MATCH, extract)

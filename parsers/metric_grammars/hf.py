"""HuggingFace Trainer console dicts (formats.md §1.1, also LLaMA-Factory/axolotl/TRL, §1.13–1.14).

`{'loss': 2.3456, 'grad_norm': nan, 'learning_rate': 4.999e-05, 'epoch': 0.01}` — a Python repr, so
single quotes, `nan`/`inf`; 5.x prints every float as a quoted `.4g` string (`'loss': '2.346'`);
ints (`num_input_tokens_seen`) stay bare; 4.47+ replaces long strings with `[String too long ...]`
(not a number, so no row). Eval (`eval_*`) and end-of-training (`train_runtime`, `train_loss`) dicts
are read the same way. The dict carries no step: `finalize` takes it from the tqdm bar (see steps.py).
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import Grammar, canonical_of, empty_rows, num, shape, split_pairs

# A dict repr that is a Trainer log: it starts with a known first key or holds the `epoch` key HF adds.
MATCH = r"\{'(?:loss|eval_[\w/.-]*|train_runtime|learning_rate|grad_norm)': |\{'[^{}]*'epoch': [^{}]*\}"


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Every numeric key of the dict; the step is filled later from the progress bar."""
    # `{'k': v, 'k2': v2}` -> items split on the literal `, '`, then key/value on `': `.
    body = pl.col("msg").str.extract(r"\{'(.*)\}", 1)
    kv = split_pairs(df, body, ", '", "': ").with_columns(pl.col("key").str.strip_chars("'"))
    # axolotl adds `'memory/max_allocated (GiB)': 10.97` (torch.cuda memory stats / 2**30) -> MiB.
    gib = pl.col("key").str.ends_with(" (GiB)")
    kv = kv.with_columns(pl.col("key").str.strip_suffix(" (GiB)"), gib.alias("_gib"))
    # ms-swift: `'memory(GiB)': 63.16` (max reserved, GiB) and `'global_step/max_steps': '56/176'` (the step:
    # its dicts are printed with no bar around them); `percentage` is progress, not a measurement.
    step = (
        kv.filter(pl.col("key") == "global_step/max_steps")
        .select("_i", pl.col("val").str.strip_chars(" '").str.split_exact("/", 1).struct.field("field_0")
                .cast(pl.Int64, strict=False).alias("_step"))
    )
    kv = kv.filter(~pl.col("key").is_in(SKIP_KEYS)).join(step, on="_i", how="left", maintain_order="left")
    kv = kv.with_columns((pl.col("_gib") | (pl.col("key") == "memory(GiB)")).alias("_gib"))
    name = canonical_of(kv, "key", GIB_NAMES)
    value = num(pl.col("val"))
    out = kv.select(
        "_i",
        pl.col("_step").alias("step"),
        pl.when(pl.col("_gib")).then(pl.col("key").replace_strict(GIB_NAMES, default=name + "_mib")).otherwise(name).alias("name"),
        pl.when(pl.col("_gib")).then(value * 1024.0).otherwise(value).alias("value"),
    )
    return shape(out, "hf_dict")


# Not measurements: ms-swift's progress fields (the step is read from `global_step/max_steps`).
SKIP_KEYS = ["global_step/max_steps", "percentage"]
GIB_NAMES = {"memory(GiB)": "mem_max_reserved_mib", "memory/max_allocated": "mem_max_mib", "memory/max_active": "mem_max_active_mib",
             "memory/device_reserved": "mem_reserved_mib", "memory/active": "mem_active_mib",
             "memory/allocated": "mem_allocated_mib"}


GRAMMAR = Grammar("hf_dict", ("{'",), MATCH, extract)

# `trainer.log_metrics` blocks of the example scripts, printed after a run or an evaluation:
#     ***** train metrics *****
#       train_loss               =     0.7228
#       train_runtime            = 0:36:58.55
# They repeat the end-of-training / eval dicts already read above (and `train_loss` is the run's average,
# not a step's loss), so their lines are claimed and give no row: the generic reader must not read
# `train_loss = 0.7228` as a training step's loss.
METRICS_BLOCK = r"^  (?:(?:train|eval|predict|test)_[\w/.-]*|perplexity|epoch)\s+= +\S+\s*$"


def _no_rows(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    return empty_rows()


METRICS_BLOCK_GRAMMAR = Grammar("hf_metrics_block", ("_loss", "perplexity"), METRICS_BLOCK, _no_rows)

# W&B's end-of-run console block ([OBS] wandb/wandb#2450):
#     wandb: Run summary:
#     wandb:                 train/box_loss 0.03868
#     wandb:                          _step 10
# The last value of each logged metric, printed once when the run ends: a summary, not a step's reading
# (the `Run history:` sparklines above it hold no number). Claimed, no rows, as the metrics blocks above.
WANDB_SUMMARY = r"^wandb:\s+[^\s:][^\s]*\s+[-+]?(?:[\d.]+(?:[eE][-+]?\d+)?|nan|NaN|inf|-inf|Infinity|True|False)\s*$"
WANDB_SUMMARY_GRAMMAR = Grammar("wandb_summary", ("wandb:",), WANDB_SUMMARY, _no_rows)

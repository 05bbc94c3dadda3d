"""LoRA weight dumps: one `name,value` or `name: value` line per adapter module, the name a LoRA up/B weight.

kohya-ss sd-scripts `networks/check_lora_weights.py <model file>` prints `number of LoRA-up modules: 264`,
then `lora_te_text_model_encoder_layers_0_mlp_fc1.lora_up.weight,0.0` per module (the mean absolute value;
its README: "If some modules are not trained, the value is 0.0"). PEFT names the same matrix `lora_B`
(`base_model.model.….lora_B.default.weight`). Each line gives one `lora_up_dump` row (no step: the rows are
modules, not a series), which lora-silent-zero judges as a whole.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, num, shape

NAME = r"[\w.]*lora_(?:up|B)(?:\.default)?\.weight(?:[._](?:norm|mean|abs_mean))?"
MATCH = rf"^\s*{NAME}\s*(?:,|:)\s*{NUM}\s*$"


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """The value after the module name."""
    rows = df.select("_i", pl.lit(None, pl.Int64).alias("step"), pl.lit("lora_up_dump").alias("name"),
                     num(pl.col("msg").str.extract(rf"(?:,|:)\s*({NUM})\s*$", 1)).alias("value"))
    return shape(rows, "lora_dump")


GRAMMAR = Grammar("lora_dump", ("lora_up.", "lora_B."), MATCH, extract)

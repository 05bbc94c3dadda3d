"""Metric grammars, one module per framework family, listed in precedence order.

A line claimed by an earlier grammar is never read by a later one, so a line that two grammars could
read (a Megatron line also looks like `key: value` pairs; a Lightning bar holds `loss=`) yields one set
of rows. Specific grammars come first, the generic key/value reader last. tqdm bar states are not in
this list: metric_lines cuts them out of every line first (tqdm.py reads them), then these grammars
read what is left.
"""

from __future__ import annotations

from forensics.parsers.metric_grammars import (
    caffe,
    centernet,
    composer,
    dassl,
    deepspeed,
    detectron,
    dllogger,
    espnet,
    fairseq,
    generic,
    hf,
    hf_table,
    icefall,
    litgpt,
    lora_dump,
    megatron,
    metriclogger,
    mxnet,
    nanogpt,
    nanotron,
    olmo,
    openai_logger,
    primerl,
    sb3,
    scalers,
    semseg,
    span_f1,
    speechbrain,
    tf_od,
    timm,
    titan,
    torch_memory,
    verl,
    vits,
)
from forensics.parsers.metric_grammars.common import Grammar

GRAMMARS: list[Grammar] = [
    # First: its dict lines open with `{'`, which the HF dict reader looks at too.
    tf_od.GRAMMAR,
    hf.GRAMMAR,
    hf.METRICS_BLOCK_GRAMMAR,
    hf.WANDB_SUMMARY_GRAMMAR,
    megatron.GRAMMAR,
    nanotron.GRAMMAR,
    deepspeed.GRAMMAR,
    scalers.GRAMMAR,
    titan.GRAMMAR,
    nanogpt.GRAMMAR,
    litgpt.GRAMMAR,
    composer.GRAMMAR,
    primerl.GRAMMAR,
    olmo.GRAMMAR,
    fairseq.GRAMMAR,
    semseg.GRAMMAR,
    dassl.GRAMMAR,
    centernet.GRAMMAR,
    span_f1.GRAMMAR,
    espnet.GRAMMAR,
    icefall.GRAMMAR,
    speechbrain.GRAMMAR,
    metriclogger.GRAMMAR,
    detectron.GRAMMAR,
    dllogger.GRAMMAR,
    timm.GRAMMAR,
    verl.GRAMMAR,
    vits.GRAMMAR,
    torch_memory.GRAMMAR,
    sb3.GRAMMAR,
    openai_logger.GRAMMAR,
    caffe.GRAMMAR,
    lora_dump.GRAMMAR,
    mxnet.GRAMMAR,
    # Late: its needles (` | `, a tab) are common, so it sees only the lines the specific grammars left.
    hf_table.GRAMMAR,
    generic.JSON_GRAMMAR,
    generic.KV_GRAMMAR,
]

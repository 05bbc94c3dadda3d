"""loss-stagnation from labels masked whole: a collator's per-sample warnings beside a zero loss, a library's refusal to train."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.evidence import detection, events, first_message
from forensics.playbooks.gradient.loss_stagnation import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# TRL's DataCollatorForCompletionOnlyLM sets every label of a sample whose response template it cannot find to the
# ignore index and says so (`This instance will be ignored in loss calculation`): that sample teaches nothing. When
# no sample of a batch keeps a label, the cross-entropy over zero targets is logged as 0.
MASKED_CODES = ("completion_template_not_found",)
# A fine-tuning library that checks the labels before training and stops when every one is the ignore index
# (Unsloth's `All labels in your dataset are -100. Training losses will be all 0.`): the library itself counted them.
ALL_MASKED_CODES = ("all_labels_masked",)


# Read from the metrics side: the finding needs a loss, and a run without metrics keeps loss-stagnation skipped.
@PLAYBOOK.detector(("metrics",))
def detect_masked_samples(ctx: Context, th: dict) -> Detection | None:
    """Collator warnings that a sample's labels were all masked, and the training loss exactly 0 at half or more of its
    logged points: nothing is being trained (foundation-model-stack/fms-hf-tuning#18: the warnings, then `{'loss': 0.0,
    ...}` from epoch 2.04 to 5.0; huggingface/transformers#27733: 'zero for the loss on every training step' with the
    collator's template not found). Quiet when the loss is mostly above 0 (a few truncated samples among learning ones,
    huggingface/trl#1920) or no loss is logged: the warning alone does not say how many samples kept their labels."""
    ev = events(ctx, MASKED_CODES)
    if ev.height == 0:
        return None
    loss = M.series(ctx, M.LOSS)
    zero = loss.filter(pl.col("value") == 0.0)
    if zero.height == 0 or 2 * zero.height < loss.height:
        return None
    found = detection(ev, f"the training loss reads exactly 0 at {zero.height} of {loss.height} logged point(s) after "
                          f"{ev.height} collator warning(s) that a sample's labels were all masked (its response template "
                          f"was not found): no target is left to learn from: {first_message(ev)}",
                      {"labels_masked": 1.0}, confidence=0.85, severity=Severity.HIGH,
                      facts={"masked_warnings": ev.height, "zero_loss_points": zero.height, "loss_points": loss.height})
    # The zero-loss lines prove the damage: quoted right after the first warning, before its repeats.
    found.evidence = found.evidence[:1] + M.quote_ends(zero) + found.evidence[1:]
    return found


@PLAYBOOK.detector(("events",))
def detect_all_labels_masked(ctx: Context, th: dict) -> Detection | None:
    """A library's pre-training check found every label masked (-100) and stopped: the loss would be 0 from the first step,
    nothing to learn from. The check counted the labels itself, so no loss needs to be logged (unslothai/unsloth#2117,
    #2364, #2900: train_on_responses_only's instruction/response markers not found in the tokenized chat template)."""
    ev = events(ctx, ALL_MASKED_CODES)
    if ev.height == 0:
        return None
    return detection(ev, f"every training label is masked (-100), so the loss would be 0 at every step and the library "
                         f"stopped before training: {first_message(ev)}",
                     {"labels_masked": 1.0}, confidence=0.9, severity=Severity.HIGH)

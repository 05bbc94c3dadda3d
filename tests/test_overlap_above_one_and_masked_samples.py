"""Metrics a correct run cannot print: a segmentation Dice above 1 beside a loss far below zero (masks outside [0, 1]),
and a loss of exactly 0 after a completion-only collator masked whole samples; each with the near misses that stay quiet.

Each log is a real shape (URL beside it), shortened; the numbers of a near miss are changed to the healthy case.
"""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import tables, write_run


def analysis(tmp: Path, text: str):
    return analyze(Context(ingest(write_run(tmp, {"train.log": text}))))


def findings(tmp: Path, text: str) -> list[str]:
    """Playbooks of the findings above info, in rank order, for a one-file run."""
    return [f.playbook.id for f in analysis(tmp, text).findings if f.severity.name.lower() != "info"]


# --- a Dice above 1 beside a loss far below zero -----------------------------------------------------------------------

# milesial/Pytorch-UNet#84 (PNG masks loaded as 0-255): tqdm batch losses and the logged Dice of each epoch.
UNET_TQDM = """Epoch 1/5: 100%|██████████| 79/79 [00:12<00:00,  6.33img/s, loss (batch)=-9.27e+5]
Validation round: 100%|██████████| 13/13 [00:01<00:00, 12.87img/s]
INFO: Checkpoint 1 saved !
INFO: Validation Dice Coeff: 1.9721606236237745
Epoch 2/5: 100%|██████████| 79/79 [00:11<00:00,  7.11img/s, loss (batch)=-4.68e+6]
Validation round: 100%|██████████| 13/13 [00:00<00:00, 18.31img/s]
INFO: Validation Dice Coeff: 1.9721606236237745
Epoch 3/5: 100%|██████████| 79/79 [00:11<00:00,  7.12img/s, loss (batch)=-1.14e+7]
Validation round: 100%|██████████| 13/13 [00:00<00:00, 18.49img/s]
INFO: Validation Dice Coeff: 1.9721606236237745
Epoch 4/5: 100%|██████████| 79/79 [00:11<00:00,  7.10img/s, loss (batch)=-2.15e+7]
Validation round: 100%|██████████| 13/13 [00:00<00:00, 18.33img/s]
INFO: Validation Dice Coeff: 1.9721606236237745
"""
# The old Pytorch-UNet print (milesial/Pytorch-UNet#78 shape) of an epoch before the last, with 0-255 masks.
UNET_OLD_MASKS_255 = """Starting epoch 9/10.
0.0000 --- loss: -1151.203613
0.3333 --- loss: -2230.918945
0.6667 --- loss: -1702.334106
Epoch finished ! Loss: -1694.819
Validation Dice Coeff: 1.9718
Checkpoint 9 saved !
"""
# The same print; near miss: 0/1 masks, a positive BCE and a Dice below 1.
UNET_OLD_HEALTHY = """Starting epoch 3/10.
0.0000 --- loss: 0.412305
0.3333 --- loss: 0.385119
0.6667 --- loss: 0.351020
Epoch finished ! Loss: 0.382815
Validation Dice Coeff: 0.8124
"""
# milesial/Pytorch-UNet#56: a Dice above 1 beside a positive loss (an averaging bug in eval, `total / index + 1`).
UNET_DICE_OVER_ONE_POSITIVE_LOSS = """0.0000 --- loss: 0.181233
0.5000 --- loss: 0.170112
0.9000 --- loss: 0.160456
Epoch finished ! Loss: 0.16545738393068313
Validation Dice Coeff: 1.004147481918335
Checkpoint 1 saved !
"""
# jocicmarko/ultrasound-nerve-segmentation and ellisdg/3DUnetCNN#153: Keras with `loss = -dice_coef`, negative by design.
KERAS_NEGATIVE_DICE_LOSS = """Epoch 1/1000
299s - loss: -0.2710 - dice_coef: 0.2710 - val_loss: -0.5395 - val_dice_coef: 0.5395
Epoch 2/1000
228s - loss: -0.5754 - dice_coef: 0.5754 - val_loss: -0.3444 - val_dice_coef: 0.3444
Epoch 3/1000
229s - loss: -0.6485 - dice_coef: 0.6485 - val_loss: -0.7470 - val_dice_coef: 0.7470
Epoch 4/1000
232s - loss: -0.7334 - dice_coef: 0.7334 - val_loss: -0.7445 - val_dice_coef: 0.7445
"""


def test_dice_line_is_read_as_a_metric(tmp_path):
    (m,) = tables(tmp_path, {"train.log": UNET_TQDM}, "metrics")
    dice = m.filter(m.get_column("name") == "validation_dice_coeff").get_column("value").to_list()
    assert dice == [1.9721606236237745] * 4


def test_negative_bce_beside_dice_above_one_is_bad_input_data(tmp_path):
    a = analysis(tmp_path, UNET_OLD_MASKS_255)
    top = [f for f in a.findings if f.severity.name.lower() != "info"][0]
    assert top.playbook.id == "bad-input-data"
    assert "validation_dice_coeff is 1.972" in top.summary and top.severity.name.lower() == "high"
    assert [e.line for e in top.evidence][:2] == [2, 3]


def test_positive_bce_and_dice_below_one_stay_quiet(tmp_path):
    assert findings(tmp_path, UNET_OLD_HEALTHY) == []


def test_dice_above_one_with_a_positive_loss_is_not_the_data(tmp_path):
    assert "bad-input-data" not in findings(tmp_path, UNET_DICE_OVER_ONE_POSITIVE_LOSS)


def test_negative_dice_loss_by_design_stays_quiet(tmp_path):
    assert "bad-input-data" not in findings(tmp_path, KERAS_NEGATIVE_DICE_LOSS)


# --- a completion-only collator that masked whole samples ------------------------------------------------------------

WARNING = ("UserWarning: Could not find response key `### Answer:` in the following instance: ### Question: {q} "
           "This instance will be ignored in loss calculation. Note, if this happens often, consider increasing the "
           "`max_seq_length`.")
# huggingface/transformers#27733 / foundation-model-stack/fms-hf-tuning#18: the warnings, then HF Trainer dicts at 0.
MASKED_ZERO = "\n".join([
    WARNING.format(q="What is the capital of France?"),
    "{'loss': 0.0, 'learning_rate': 0.0001996, 'epoch': 0.04}",
    WARNING.format(q="Name a prime number."),
    "{'loss': 0.0, 'learning_rate': 0.0001983, 'epoch': 0.08}",
    "{'loss': 0.0, 'learning_rate': 0.0001961, 'epoch': 0.12}",
]) + "\n"
# huggingface/trl#1920 shape: a few samples masked (a template with a trailing space), the loss still learns.
MASKED_FEW_LEARNING = "\n".join([
    WARNING.format(q="What is the capital of France?"),
    "{'loss': 1.8123, 'learning_rate': 0.0001996, 'epoch': 0.04}",
    "{'loss': 1.5411, 'learning_rate': 0.0001983, 'epoch': 0.08}",
    WARNING.format(q="Name a prime number."),
    "{'loss': 1.3390, 'learning_rate': 0.0001961, 'epoch': 0.12}",
]) + "\n"
# hiyouga/LlamaFactory#2810: a loss of 0.0 with a NaN grad norm and no collator warning (fp16 overflow, nan-loss's).
ZERO_LOSS_NAN_GRAD = """{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.04999871292419044, 'epoch': 0.01}
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.04999485182928687, 'epoch': 0.02}
{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.04998841711285104, 'epoch': 0.03}
"""


def test_masked_samples_and_zero_loss_is_loss_stagnation(tmp_path):
    a = analysis(tmp_path, MASKED_ZERO)
    top = [f for f in a.findings if f.severity.name.lower() != "info"][0]
    assert top.playbook.id == "loss-stagnation" and top.severity.name.lower() == "high"
    assert "exactly 0 at 3 of 3" in top.summary
    assert top.evidence[0].line == 1


def test_a_few_masked_samples_beside_a_learning_loss_stay_quiet(tmp_path):
    assert findings(tmp_path, MASKED_FEW_LEARNING) == []


def test_zero_loss_with_nan_grad_and_no_warning_is_not_masked_labels(tmp_path):
    a = analysis(tmp_path, ZERO_LOSS_NAN_GRAD)
    assert not any("collator" in f.summary for f in a.findings)

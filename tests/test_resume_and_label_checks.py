"""Final errors a library raises before training can start: an optimizer state that does not fit on resume
(checkpoint-failure's optimizer_mismatch) and a pre-check that every label is masked (loss-stagnation's labels_masked)."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.model import Severity
from tests.helpers import analyze_console

# jfzhang95/pytorch-deeplab-xception#134: resuming from a checkpoint with the repository's pretrained backbone.
DEEPLAB = [
    "Traceback (most recent call last):",
    '  File "/home/qiming/workspace/pytorch-deeplab-xception/my_train.py", line 318, in <module>',
    "    main()",
    '  File "/home/qiming/workspace/pytorch-deeplab-xception/my_train.py", line 305, in main',
    "    trainer = Trainer(args)",
    '  File "/home/qiming/workspace/pytorch-deeplab-xception/my_train.py", line 95, in __init__',
    "    self.optimizer.load_state_dict(checkpoint['optimizer'])",
    '  File "/home/qiming/anaconda3/envs/pytorch/lib/python3.7/site-packages/torch/optim/optimizer.py", line 114, in load_state_dict',
    '    raise ValueError("loaded state dict contains a parameter group "',
    "ValueError: loaded state dict contains a parameter group that doesn't match the size of optimizer's group",
]
# technicolor-research/dsve-loc#16: the script's own line first, the same error on resuming epoch 15.
DSVE = ["=> loading checkpoint '/home/bc914/ZS_trial/dsve-loc-master/weights/saved_model/15.pth.tar'",
        "Traceback (most recent call last):",
        '  File "train.py", line 240, in <module>',
        "    optimizer.load_state_dict(checkpoint['optimizer'])",
        '  File "/home/bc914/anaconda3/envs/Burger/lib/python3.7/site-packages/torch/optim/optimizer.py", line 115, in load_state_dict',
        '    raise ValueError("loaded state dict contains a parameter group "',
        "ValueError: loaded state dict contains a parameter group that doesn't match the size of optimizer's group"]
# unslothai/unsloth#2734 (title line) after the dataset map bar of #3198.
UNSLOTH = ["Map (num_proc=2): 100%|##########| 43/43 [00:00<00:00, 41.46 examples/s]",
           "ZeroDivisionError: Unsloth: All labels in your dataset are -100. Training losses will be all 0."]


def problems(tmp_path: Path, lines: list[str]) -> list:
    return analyze_console(tmp_path, lines)[0]


def test_optimizer_groups_that_do_not_fit_are_a_checkpoint_load_failure(tmp_path):
    for i, lines in enumerate((DEEPLAB, DSVE)):
        found = problems(tmp_path / str(i), lines)
        assert [f.id for f in found] == ["checkpoint-failure"], lines
        assert found[0].causes[0].cause.id == "optimizer_mismatch"
        assert {f"{e.file}:{e.line}" for e in found[0].evidence} == {f"console.log:{len(lines)}"}


def test_a_model_state_dict_mismatch_keeps_its_own_cause(tmp_path):
    # ytZhang99/CF-Net#2: the weights, not the optimizer state, belong to another model.
    lines = ["RuntimeError: Error(s) in loading state_dict for CFNet:",
             "        size mismatch for cfb_under2.upBlocks.1.0.weight: copying a param with shape torch.Size([64, 64, 8, 8]) "
             "from checkpoint, the shape in current model is torch.Size([64, 64, 6, 6])."]
    found = problems(tmp_path, lines)
    assert found[0].id == "checkpoint-failure" and found[0].causes[0].cause.id == "model_mismatch"
    assert "optimizer_mismatch" not in {c.cause.id for c in found[0].causes}


def test_all_labels_masked_precheck_is_loss_stagnation(tmp_path):
    found = problems(tmp_path, UNSLOTH)
    assert [f.id for f in found] == ["loss-stagnation"]
    assert (found[0].causes[0].cause.id, found[0].severity) == ("labels_masked", Severity.HIGH)


def test_most_labels_masked_note_is_no_finding(tmp_path):
    # unslothai/unsloth#1128: some labels are left, training goes on.
    assert problems(tmp_path, ["Unsloth: Most labels in your dataset are -100. Training losses will be 0."]) == []

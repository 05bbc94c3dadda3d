"""An LR printed identical on every step while the log names a decaying schedule is lr-schedule-anomaly; a constant
LR with no schedule named, or a constant schedule named, stays quiet.

Shapes: launch commands with `--lr_scheduler_type` (https://github.com/wenet-e2e/west/issues/101,
https://github.com/modelscope/ms-swift/issues/1983), HF Trainer dicts with a constant `learning_rate`
(https://github.com/QwenLM/Qwen/issues/672), warmup then flat (https://github.com/QwenLM/Qwen-VL/issues/183).
"""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def problems(tmp: Path, text: str) -> list:
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f for f in a.findings if f.severity.name.lower() != "info"]


def command(schedule: str) -> str:
    return ("torchrun --standalone --nnodes=1 --nproc_per_node=8 finetune.py \\\n"
            "        --learning_rate 3e-4 \\\n        --warmup_steps 20 \\\n"
            f'        --lr_scheduler_type "{schedule}" \\\n        --logging_steps 1 \\\n'
            "        --deepspeed ds_config_zero2.json\n")


def dicts(lrs: list[float]) -> str:
    losses = [0.91, 0.74, 0.66, 0.52, 0.47, 0.41, 0.38, 0.33, 0.31, 0.29]
    return "".join(f"{{'loss': {losses[i % len(losses)]}, 'learning_rate': {lr}, 'epoch': {0.1 * (i + 1):.2f}}}\n" for i, lr in enumerate(lrs))


def test_constant_lr_under_a_configured_cosine_schedule(tmp_path):
    found = problems(tmp_path, command("cosine") + dicts([0.0003] * 8))
    assert found and found[0].playbook.id == "lr-schedule-anomaly"
    assert "decaying schedule is configured" in found[0].summary
    # The configuration line is quoted beside the LR rows.
    assert 4 in {e.line for e in found[0].evidence}


def test_lr_flat_after_warmup_under_a_cosine_schedule(tmp_path):
    warm = [1e-6 * (i + 1) for i in range(5)] + [1e-05] * 8
    found = problems(tmp_path, command("cosine") + dicts(warm))
    assert found and found[0].playbook.id == "lr-schedule-anomaly"
    assert "after a warmup" in found[0].summary


def test_constant_lr_under_a_constant_schedule_is_quiet(tmp_path):
    assert "lr-schedule-anomaly" not in {f.playbook.id for f in problems(tmp_path, command("constant") + dicts([0.0003] * 8))}


def test_constant_lr_with_no_schedule_named_is_quiet(tmp_path):
    assert "lr-schedule-anomaly" not in {f.playbook.id for f in problems(tmp_path, dicts([0.0003] * 8))}


def test_cosine_lr_that_decays_is_quiet(tmp_path):
    lrs = [0.0003, 0.00029981, 0.00029925, 0.00029831, 0.000297, 0.00029532, 0.00029328, 0.00029087]
    assert "lr-schedule-anomaly" not in {f.playbook.id for f in problems(tmp_path, command("cosine") + dicts(lrs))}


def test_too_few_identical_points_are_quiet(tmp_path):
    # Four identical prints can be a rounded LR early in a long cosine.
    assert "lr-schedule-anomaly" not in {f.playbook.id for f in problems(tmp_path, command("cosine") + dicts([0.0003] * 4))}

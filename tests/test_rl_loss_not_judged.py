"""A reinforcement-learning loss (SB3 PPO/DQN boxes) is a surrogate objective: loss-stagnation does not judge it flat,
while the same flat series in a supervised log still fires.

Box layout from stable-baselines3 (docs/common/logger.rst, DLR-RM/stable-baselines3#803; the PPO keys as in the
FrozenLake run of ZeshiWu/ML-capstone-project- `frozenlake_code/4x4_ppo_on.txt`); DQN logs `rollout/exploration_rate`,
`train/learning_rate`, `train/loss`, `train/n_updates`.
"""

from __future__ import annotations

import math
from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# A flat, noisy loss (no progress from its start), never repeating itself.
LOSSES = [round(0.018 + 0.0012 * math.sin(1.7 * i) + 0.00001 * i, 5) for i in range(24)]


def box(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows) + 4
    border = "-" * (width + 17)
    body = "\n".join(f"| {k:<{width}}| {v:<12}|" if k.endswith("/") or not k.startswith("    ") else f"|{k:<{width + 1}}| {v:<12}|"
                     for k, v in rows)
    return f"{border}\n{body}\n{border}\n"


def ppo(i: int, loss: float) -> str:
    return box([("time/", ""), ("    fps", "773"), ("    iterations", str(i + 1)), ("    total_timesteps", str(2048 * (i + 1))),
                ("train/", ""), ("    approx_kl", f"{0.0121 + 0.0007 * (i % 5):.4f}"),
                ("    entropy_loss", f"{-1.37 + 0.04 * i:.2f}"), ("    learning_rate", "0.0003"),
                ("    loss", str(loss)), ("    n_updates", str(10 * (i + 1))), ("    policy_gradient_loss", f"{-0.00846 - 0.0003 * (i % 4):.5f}"),
                ("    value_loss", f"{0.0183 + 0.001 * (i % 3):.4f}")])


def dqn(i: int, loss: float) -> str:
    return box([("rollout/", ""), ("    exploration_rate", f"{max(0.05, 1 - 0.2 * i):.2f}"), ("time/", ""), ("    fps", "912"),
                ("    total_timesteps", str(5000 * (i + 1))), ("train/", ""), ("    learning_rate", "0.0001"),
                ("    loss", str(loss)), ("    n_updates", str(1200 * (i + 1)))])


def problems(tmp: Path, text: str) -> list:
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [(f.playbook.id, f.severity.name) for f in a.findings if f.severity.name.lower() != "info"]


def test_sb3_boxes_are_read_as_such():
    # The fixture really is an SB3 box: section rows, 4-space indented keys.
    assert ppo(0, 0.1).splitlines()[1].startswith("| time/") and "|    loss" in ppo(0, 0.1)


def test_flat_ppo_loss_is_not_stagnation(tmp_path):
    assert problems(tmp_path, "".join(ppo(i, v) for i, v in enumerate(LOSSES))) == []


def test_flat_dqn_td_loss_is_not_stagnation(tmp_path):
    assert problems(tmp_path, "".join(dqn(i, v) for i, v in enumerate(LOSSES))) == []


def test_same_flat_loss_in_a_supervised_log_still_fires(tmp_path):
    text = "".join(f"step {100 * (i + 1)} | loss {v} | lr 0.0003\n" for i, v in enumerate(LOSSES))
    assert ("loss-stagnation", "MEDIUM") in problems(tmp_path, text)

"""Blatant jumps in pastes too short for the rolling windows: loss divergence and spikes, grad norms already
exploded, a loss scale below its floor; and the near misses that stay quiet (3x wobble, early noise, a
high first point, large but healthy grad norms, a loss scale of 1).

Each log is a real shape (URL beside it), shortened; the numbers of a near miss are changed to the healthy case.
"""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def problems(tmp: Path, text: str) -> list:
    """Findings above info of a one-file run, in report order."""
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f for f in a.findings if f.severity.name.lower() != "info"]


def ids(tmp: Path, text: str) -> list[str]:
    return [f.playbook.id for f in problems(tmp, text)]


# https://github.com/tensorflow/models/issues/8423: TF-slim `global step N: loss = X (s sec/step)`.
def slim(losses: list[float], start: int = 400) -> str:
    return "".join(f"INFO:tensorflow:global step {start + i}: loss = {v:.4f} (0.273 sec/step)\n" for i, v in enumerate(losses))


def test_loss_rising_tenfold_and_staying_is_divergence(tmp_path):
    found = problems(tmp_path, slim([0.31, 0.29, 0.30, 4.9, 6.2, 5.7, 8.8]))
    assert found and found[0].playbook.id == "loss-spike"
    assert found[0].onset.step == 403
    assert "stayed up" in found[0].summary


def test_loss_jumping_a_hundredfold_for_one_point_is_a_spike(tmp_path):
    found = problems(tmp_path, slim([1.71, 1.64, 1.69, 312.0, 1.58, 1.55]))
    assert found and found[0].playbook.id == "loss-spike"
    assert found[0].onset.step == 403
    assert "came back" in found[0].summary


def test_loss_wobbling_threefold_is_quiet(tmp_path):
    assert "loss-spike" not in ids(tmp_path, slim([0.9, 1.1, 2.9, 1.0, 3.1, 0.95, 2.7]))


def test_normal_early_noise_is_quiet(tmp_path):
    assert ids(tmp_path, slim([6.9, 6.1, 7.4, 5.2, 4.8, 5.9, 4.1, 3.9])) == []


def test_high_first_iteration_loss_is_quiet(tmp_path):
    # The first logged loss of a fresh model is far above the rest: nothing comes before it to jump from.
    assert ids(tmp_path, slim([1450.0, 12.3, 8.1, 6.4, 5.2, 4.9], start=0)) == []


def test_tenfold_rise_after_a_single_point_needs_a_hundredfold_jump(tmp_path):
    # One earlier point is too thin a baseline for a 10x rise (it may be a partial running average).
    assert "loss-spike" not in ids(tmp_path, slim([0.21, 2.3, 2.2, 2.4, 2.1]))


# https://github.com/Physical-Intelligence/openpi/issues/814: `Step N: grad_norm=G, loss=L, param_norm=P`.
def openpi(norms: list[float], losses: list[float]) -> str:
    return "".join(f"Step {5900 + 100 * i}: grad_norm={g:.4f}, loss={v:.4f}, param_norm=1802.5465\n"
                   for i, (g, v) in enumerate(zip(norms, losses, strict=True)))


def test_grad_norm_already_exploded_from_the_first_point(tmp_path):
    norms = [2.1e6, 1.8e6, 3.4e6, 2.9e6, 4.0e6, 3.3e6, 5.1e6, 4.4e6, 6.0e6, 5.2e6]
    found = problems(tmp_path, openpi(norms, [0.8] * len(norms)))
    assert found and found[0].playbook.id == "gradient-explosion"
    assert found[0].onset.step == 5900
    assert "already exploded" in found[0].summary


def test_large_but_healthy_grad_norms_are_quiet(tmp_path):
    # A loss summed over tokens (not averaged) gives grad norms in the thousands to ~1e5, steady while the loss falls
    # (https://github.com/alibaba/Pai-Megatron-Patch/issues/579, https://github.com/haidog-yaqub/MeanFlow/issues/8).
    norms = [2.4e3, 8.1e4, 3.3e4, 9.5e4, 1.2e5, 6.0e4, 7.7e4, 4.1e4, 9.9e4, 5.5e4]
    losses = [2.9, 2.7, 2.6, 2.5, 2.45, 2.4, 2.38, 2.35, 2.31, 2.3]
    assert "gradient-explosion" not in ids(tmp_path, openpi(norms, losses))


def test_one_grad_norm_above_the_level_is_no_explosion_on_its_own(tmp_path):
    norms = [4.1e5, 5.2e5, 1.3e6, 4.8e5, 5.0e5, 4.6e5, 5.3e5, 4.9e5, 5.1e5, 4.7e5]
    assert "gradient-explosion" not in ids(tmp_path, openpi(norms, [1.2] * len(norms)))


# https://github.com/facebookresearch/fairseq/issues/1529: old fairseq `| epoch 028 | ... | loss_scale 0.000 |` summary.
FAIRSEQ = ("| epoch 028 | loss 3.976 | nll_loss 2.204 | ppl 4.61 | wps 279460 | ups 3 | wpb 110529.673 | bsz 3780.211 | "
           "num_updates 9165 | lr 0.000330319 | gnorm 0.635 | clip 0.000 | oom 0.000 | loss_scale {scale} | wall 4043 | train_wall 3606\n")


def test_one_summary_with_a_loss_scale_below_the_floor(tmp_path):
    found = problems(tmp_path, FAIRSEQ.format(scale="0.000"))
    assert found and found[0].playbook.id == "fp16-overflow"
    assert "below the floor" in found[0].summary


def test_one_summary_with_a_loss_scale_of_one_is_quiet(tmp_path):
    assert "fp16-overflow" not in ids(tmp_path, FAIRSEQ.format(scale="1.000"))

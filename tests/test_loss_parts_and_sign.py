"""Short pastes whose loss says it all: a NaN in any named part of the objective, a classification loss below
zero, and a late slice of a noisy healthy run that must not read as stagnation.

Each log is a real shape (URL beside it), shortened; the numbers of a near miss are changed to the healthy case.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_short_series_rules import findings, first


def keras(epochs: list[tuple[float, float]]) -> str:
    """Keras 2 `fit` epoch lines (loss, acc; the validation pair repeats them)."""
    return "".join(f"Epoch {i}/10\n40199/40199 [==============================] - 3s 75us/step - loss: {loss:.4f} - acc: {acc:.4f}"
                   f" - val_loss: {loss:.4f} - val_acc: {acc:.4f}\n" for i, (loss, acc) in enumerate(epochs, 1))


# ---------------------------------------------------------------- NaN in a part of the objective

def test_gan_losses_nan_from_the_first_logged_point(tmp_path: Path):
    # https://github.com/dariopavllo/convmesh/issues/8: no total loss, `g_loss nan` from the first line on.
    text = ("[0] epoch 0, 0/186, g_loss nan d_fake_loss 0.00000 d_real_loss 0.00000 flat 0.24812\n"
            "[10] epoch 0, 10/186, g_loss nan d_fake_loss nan d_real_loss nan flat nan\n")
    assert first(tmp_path, text) == "nan-loss"


def test_named_costs_turning_nan(tmp_path: Path):
    # https://github.com/vtddggg/ATDA/issues/1 and https://github.com/xiaohu2015/DeepLearning_tutorials/issues/16
    assert first(tmp_path, "Iter 1 of Epoch 2  labeling_cost 0.103619 targetspecific_cost 0.035066\n"
                           "Iter 2 of Epoch 2  labeling_cost 0.561946 targetspecific_cost nan\n") == "nan-loss"
    assert first(tmp_path / "e", "Start training...\nEpoch 0 cost: 71.95003230701798\nEpoch 1 cost: nan\nEpoch 2 cost: nan\n") == "nan-loss"


def test_finite_gan_losses_and_a_nan_eval_loss_are_no_nan_loss(tmp_path: Path):
    # Near misses: the convmesh shape with finite losses; a NaN only in the evaluation loss of a GAN log.
    text = ("[0] epoch 0, 0/186, g_loss 4.21000 d_fake_loss 0.69000 d_real_loss 0.70000 flat 0.24812\n"
            "[10] epoch 0, 10/186, g_loss 3.87000 d_fake_loss 0.55000 d_real_loss 0.61000 flat 0.23100\n")
    assert "nan-loss" not in findings(tmp_path, text)
    assert "nan-loss" not in findings(tmp_path / "v", "epoch 1 g_loss 2.1 d_loss 0.6 val_g_loss nan\nepoch 2 g_loss 2.0 d_loss 0.6 val_g_loss nan\n")


# ---------------------------------------------------------------- a classification loss below zero

def test_negative_cross_entropy_beside_a_flat_accuracy_is_out_of_range_labels(tmp_path: Path):
    # https://datascience.stackexchange.com/questions/38604: digit labels 0-9 into a one-unit binary_crossentropy head.
    assert first(tmp_path, keras([(-55.0254, 0.1142)] + [(-55.0284, 0.1141)] * 4)) == "bad-input-data"


def test_a_likelihood_loss_below_zero_while_accuracy_rises_is_quiet(tmp_path: Path):
    # Near miss, https://github.com/jeffffffli/res-loglikelihood-regression/issues/33: RLE's residual log-likelihood
    # loss is negative by design (`loss: -8.48068483 | acc: 0.2207`; the maintainer: normal); its accuracy rises.
    text = "".join(f"loss: {loss} | acc: {acc}\n" for loss, acc in ((-2.1, 0.08), (-5.3, 0.15), (-8.48068483, 0.2207)))
    assert "bad-input-data" not in findings(tmp_path, text)


def test_one_negative_line_or_no_accuracy_is_quiet(tmp_path: Path):
    # Near misses: https://github.com/happynoom/DeepTrade_keras/issues/17 (a trading objective, negative by design,
    # printed with Keras' meaningless `acc: 8.8343e-04`, one epoch); a negative loss on lines without an accuracy.
    deeptrade = ("Epoch 1/3000\n86028/86028 [==============================] - 16s 185us/step - loss: -0.0560 - acc: 8.8343e-04"
                 " - val_loss: -0.0616 - val_acc: 1.0989e-04\n")
    assert "bad-input-data" not in findings(tmp_path, deeptrade)
    assert "bad-input-data" not in findings(tmp_path / "a", keras([(-0.056, 0.0009)] * 4))
    assert "bad-input-data" not in findings(tmp_path / "n", "".join(f"step {i} loss: -{i}.5\n" for i in range(1, 6)))


def test_negative_losses_of_gan_and_rl_objectives_are_quiet(tmp_path: Path):
    # Near misses: a WGAN critic loss and a policy-gradient loss go below zero by design, even beside an accuracy.
    gan = "".join(f"epoch {i} loss: -{i}.2 d_loss: -{i}.2 g_loss: 0.8 acc: 0.51\n" for i in range(1, 5))
    rl = "".join(f"update {i} loss: -0.{i}3 policy_loss: -0.{i}1 value_loss: 0.2 reward: {i}.0 acc: 0.33\n" for i in range(1, 5))
    assert "bad-input-data" not in findings(tmp_path, gan)
    assert "bad-input-data" not in findings(tmp_path / "rl", rl)


# ---------------------------------------------------------------- a late slice of a noisy healthy run

CIFAR = [1.53, 1.75, 1.87, 1.73, 1.68, 1.65, 1.53, 1.49, 1.57, 1.68, 1.51, 1.74, 1.65]


def cifar10_lines(start: int) -> str:
    """tensorflow/models cifar10_multi_gpu_train.py lines (tensorflow/models#1171), from step `start` every 10 steps."""
    return "".join(f"2017-03-15 19:27:40.337271: step {start + 10 * i}, loss = {v:.2f} (1725.5 examples/sec; 0.074 sec/batch)\n"
                   for i, v in enumerate(CIFAR))


def test_noisy_loss_cut_from_late_in_a_run_is_no_stagnation(tmp_path: Path):
    assert "loss-stagnation" not in findings(tmp_path, cifar10_lines(1790))


def test_the_same_flat_loss_from_the_start_of_training_still_stagnates(tmp_path: Path):
    # The rule the slice guard must keep: the same noisy level held from step 0 on, never below its start.
    assert "loss-stagnation" in findings(tmp_path, cifar10_lines(0))

"""Classifier runs whose metric lines prove they learned nothing: bare `loss acc` columns stuck at ln(K) and 1/K, an
accuracy and F1 frozen at one class's scores, a perfect accuracy with a float-zero loss from the first point (one-class
labels). Near misses (healthy bare columns, a healthy run's first iterations at chance, a flat but learned F1, a run that
reaches a tiny loss late) stay quiet."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from forensics.contracts.model import Severity
from tests.test_nan_metric_shapes import first, medium_plus, run_of

PURINE2 = Path(__file__).parent / "recordings" / "incidents" / "purine2_16_nin_cifar_loss_flat_ln10" / "console.log"


# --- stepless bare columns ------------------------------------------------------------------------------------------

def test_bare_loss_acc_columns_locked_at_ln10_are_stagnation(tmp_path):
    # purine/purine2#16: nin_cifar's `loss_ = { softmaxloss, acc }` printed bare, the loss locked at 2.302583
    lines = PURINE2.read_text().splitlines()
    a, rows = run_of(tmp_path, lines)
    f = first(a)
    assert f.id == "loss-stagnation"
    assert f.facts["classes"] == 10 and f.facts["series"] == "unnamed_1"
    assert {e.line for e in f.evidence} <= set(range(1, len(lines) + 1))
    assert set(rows.get_column("name")) == {"unnamed_1", "unnamed_2"}
    assert rows.get_column("step").null_count() == rows.height


def test_bare_columns_of_a_healthy_run_stay_quiet(tmp_path):
    # the same shape while the network learns: the loss falls from ln(10), the accuracy rises
    lines = [f"{2.3026 * 0.97 ** i:.6f} {min(0.1 + 0.02 * i, 0.9):.6f}" for i in range(30)]
    a, rows = run_of(tmp_path, lines)
    assert rows.filter(pl.col("name") == "unnamed_1").height == 30
    assert not medium_plus(a)


def test_first_iterations_at_chance_that_still_move_stay_quiet(tmp_path):
    # a healthy CIFAR-10 run's first iterations sit near ln(10) with accuracy near 0.1, but the loss still moves
    lines = [f"{2.3026 + d:.6f} {acc:.6f}" for d, acc in zip(
        [0.011, -0.004, 0.007, -0.009, 0.002, 0.005, -0.006, 0.003, -0.001, 0.004],
        [0.094, 0.102, 0.109, 0.086, 0.117, 0.094, 0.125, 0.078, 0.102, 0.109], strict=True)]
    a, _ = run_of(tmp_path, lines)
    assert "loss-stagnation" not in medium_plus(a)


def test_integer_and_short_bare_pairs_are_not_columns(tmp_path):
    # counts (no decimal point) and fewer than five lines are no columns
    for i, lines in enumerate((["12 40", "13 41", "14 40", "15 43", "16 44", "17 45"],
                               ["2.302583 0.1", "2.302583 0.1", "2.302583 0.1", "2.302583 0.1"])):
        a, rows = run_of(tmp_path / str(i), lines)
        assert rows.filter(pl.col("name").str.starts_with("unnamed_")).height == 0, lines
        assert not medium_plus(a)


# --- accuracy and F1 at one class's scores ----------------------------------------------------------------------------

ABSA = "loss: {:.4f}, acc: {:.4f}, test_acc: {:.4f}, f1: {:.4f}"


def test_test_acc_and_macro_f1_of_a_constant_prediction_are_stagnation(tmp_path):
    # songyouwei/ABSA-PyTorch#46: 0.2626 = 2 * 0.65 / 1.65 / 3, the macro-F1 of predicting the majority class
    losses = [0.9447, 0.9312, 1.0388, 0.9838, 0.9509, 0.9240, 0.8728]
    accs = [0.6562, 0.6562, 0.6042, 0.5977, 0.6000, 0.6068, 0.6205]
    a, _ = run_of(tmp_path, ["epoch:  10"] + [ABSA.format(lo, ac, 0.65, 0.2626) for lo, ac in zip(losses, accs, strict=True)])
    f = first(a)
    assert f.id == "loss-stagnation"
    assert f.facts["classes"] == 3 and f.evidence[0].line == 2


def test_binary_f1_of_an_all_positive_prediction_is_stagnation(tmp_path):
    # binary F1 of the positive class when every sample is predicted positive: 2p/(1+p), p = 0.3 -> 0.4615
    lines = [f"Epoch {e}: loss: {0.61 + 0.01 * (e % 2):.4f}, val_acc: 0.3000, val_f1: 0.4615" for e in range(1, 7)]
    a, _ = run_of(tmp_path, lines)
    assert first(a).id == "loss-stagnation"
    assert first(a).facts["classes"] == 1


def test_flat_scores_of_a_model_that_learned_stay_quiet(tmp_path):
    # a converged model's test scores repeat too, but its F1 is no constant prediction's (0.8433 at acc 0.8512)
    lines = [ABSA.format(0.31 + 0.01 * (i % 3), 0.88, 0.8512, 0.8433) for i in range(8)]
    a, _ = run_of(tmp_path, lines)
    assert "loss-stagnation" not in medium_plus(a)


def test_moving_scores_stay_quiet(tmp_path):
    lines = [ABSA.format(1.0 - 0.05 * i, 0.6 + 0.02 * i, 0.65 + 0.01 * i, 0.2626 + 0.03 * i) for i in range(8)]
    a, _ = run_of(tmp_path, lines)
    assert "loss-stagnation" not in medium_plus(a)


# --- perfect accuracy with a float-zero loss from the first point ------------------------------------------------------

KERAS = "100/100 [==============================] - 11s 106ms/step - loss: {} - accuracy: {} - val_loss: {} - val_accuracy: {}"


def test_keras_val_accuracy_one_with_float_zero_loss_from_epoch_1_is_bad_input_data(tmp_path):
    # lyhue1991/eat_tensorflow2_in_30_days#23: every label 0 (Windows paths), val_loss 1.26e-09 at epoch 1
    lines = ["Train for 100 steps, validate for 20 steps"]
    for e, (lo, ac, vl) in enumerate([("0.0116", "0.9904", "1.2626e-09"), ("5.7853e-09", "1.0000", "1.2602e-09"),
                                      ("5.7422e-09", "1.0000", "1.2595e-09")], start=1):
        lines += [f"Epoch {e}/10", KERAS.format(lo, ac, vl, "1.0000")]
    a, _ = run_of(tmp_path, lines)
    f = first(a)
    assert f.id == "bad-input-data"
    assert f.severity == Severity.MEDIUM
    assert f.evidence[0].line == 3


def test_a_run_that_reaches_a_tiny_loss_late_stays_quiet(tmp_path):
    # a small set memorised over many epochs: perfect only after the first logged points
    vals = [("0.6931", "0.5000"), ("0.2100", "0.9100"), ("0.0040", "1.0000"), ("8.1e-07", "1.0000"), ("4.2e-07", "1.0000")]
    lines = [KERAS.format(lo, ac, lo, ac) for lo, ac in vals]
    a, _ = run_of(tmp_path, lines)
    assert "bad-input-data" not in medium_plus(a)


def test_perfect_accuracy_with_an_ordinary_loss_stays_quiet(tmp_path):
    # an easy task: accuracy 1.0000 as printed, but the loss is an ordinary small number, not float-precision zero
    lines = [KERAS.format("0.0213", "1.0000", f"{0.0150 - 0.001 * i:.4f}", "1.0000") for i in range(5)]
    a, _ = run_of(tmp_path, lines)
    assert "bad-input-data" not in medium_plus(a)

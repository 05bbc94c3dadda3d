"""Keras losses on the clipped one-hot line, span evaluations with no gold entities, and `losses` totals going NaN.

Each positive is a real log shape (source beside it); each near miss is a real healthy log of the same shape, or
the same lines with the numbers of a model that learns.
"""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def findings(tmp: Path, text: str) -> list:
    """The findings above info, in report order, for a one-file run."""
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f for f in a.findings if f.severity.name.lower() != "info"]


def ranked(tmp: Path, text: str) -> list[str]:
    return [f.playbook.id for f in findings(tmp, text)]


def keras(rows: list[tuple[float, float, float, float]], steps: str = "7000/7000") -> str:
    return "".join(f"Epoch {i + 1}/30\n{steps} [==============================] - 30s 4ms/step - loss: {lo:.4f} - acc: {a:.4f}"
                   f" - val_loss: {vl:.4f} - val_acc: {va:.4f}\n" for i, (lo, a, vl, va) in enumerate(rows))


# Keras users' CIFAR-10 pastes (code corpus): `loss: 14.4728 - acc: 0.1003 - val_loss: 14.5063 - val_acc: 0.1000`, then
# 14.5063 / 0.1000 every epoch: 16.118 x 0.9, every output a clipped one-hot.
def test_ten_class_keras_run_on_the_clipped_one_hot_line_is_stagnation(tmp_path):
    rows = [(14.4728, 0.1003, 14.5063, 0.1000), (14.5063, 0.1000, 14.5063, 0.1000), (14.5060, 0.1000, 14.5063, 0.1000)]
    found = findings(tmp_path, keras(rows))
    assert [f.playbook.id for f in found][:1] == ["loss-stagnation"]
    assert "16.118" in found[0].summary


# Binary tasks (code corpus): `- 64s - loss: 8.0216 - acc: 0.5000 - val_loss: 8.0590 - val_acc: 0.5000`, then 8.0590
# at 0.5000: 16.118 x 0.5.
def test_binary_keras_run_at_eight_point_zero_six_is_stagnation(tmp_path):
    text = "".join(f"Epoch {i}/3\n - 64s - loss: {lo} - acc: 0.5000 - val_loss: 8.0590 - val_acc: 0.5000\n"
                   for i, lo in enumerate(("8.0216", "8.0590", "8.0590"), 1))
    assert ranked(tmp_path, text)[:1] == ["loss-stagnation"]


# kcct-fujimotolab/3DCNN#2 shape with a hand-dropped space (`-val_loss:`); the loss varies with the accuracy, not flat.
def test_per_epoch_summaries_whose_loss_tracks_the_accuracy_on_the_line_fire(tmp_path):
    text = "".join(f"   - loss: {lo} - acc: {a} - val_loss: 13.4866 - val_acc: 0.1633\n"
                   for lo, a in (("13.7778", "0.1451"), ("13.8914", "0.1365"), ("13.8352", "0.1416"), ("13.8077", "0.1433")))
    assert ranked(tmp_path, text)[:1] == ["loss-stagnation"]


# keras-team/keras#12707 (a CNN learning slowly: 2.3118 / 0.1406 -> 1.6861 / 0.2972): far off 16.118 x (1 - acc). (Its
# val_loss at ln 6 with val_acc near 1/6 is the chance rule's business, not this one's.)
def test_keras_run_that_learns_slowly_is_off_the_clipped_line(tmp_path):
    rows = [(2.3118, 0.1406, 1.7989, 0.1587), (2.0468, 0.1647, 1.8605, 0.2222), (1.9562, 0.1767, 1.8203, 0.2063),
            (1.9361, 0.2169, 1.8033, 0.1905)]
    assert not any("16.118" in f.summary for f in findings(tmp_path, keras(rows, "249/249")))


# A well-trained model whose loss lands near 16.118 x (1 - acc) on one line by chance: one line proves nothing, and an
# accuracy above the ceiling is not judged.
def test_one_coincident_line_and_high_accuracies_are_quiet(tmp_path):
    rows = [(0.1612, 0.9900, 0.2000, 0.9850), (0.1300, 0.9920, 0.1900, 0.9860), (0.1100, 0.9932, 0.1850, 0.9870)]
    assert ranked(tmp_path, keras(rows)) == []


def ncrfpp(gold: int, pred: int, right: int, split: str = "Dev", time: float = 7.25, speed: float = 481.07, f: str = "0.6667") -> str:
    return (f"gold_num =  {gold}  pred_num =  {pred}  right_num =  {right}\n"
            f"{split}: time: {time}s, speed: {speed}st/s; acc: 0.9800, p: 1.0000, r: 0.5000, f: {f}\n")


# jiesutd/NCRFpp#5 (IOB1 CoNLL data): 4 gold entities over 3488 dev sentences.
def test_span_evaluation_with_almost_no_gold_entities_is_bad_input_data(tmp_path):
    found = findings(tmp_path, "Epoch: 43 training finished. Time: 106.94s, speed: 140.13st/s,  total loss: 1227.02264404\n"
                     + ncrfpp(4, 2, 2) + ncrfpp(20, 2, 0, "Test", 6.90, 536.89, "-1.0000"))
    assert [f.playbook.id for f in found] == ["bad-input-data"]
    assert found[0].evidence[0].line == 2


# jiesutd/NCRFpp#82: the test file decodes to no gold entity (`gold_num =  0  pred_num =  255`) while dev holds 6062.
def test_test_file_with_zero_gold_entities_is_bad_input_data(tmp_path):
    text = ncrfpp(6062, 551, 204, "Dev", 12.23, 959.50, "0.0617") + ncrfpp(0, 255, 0, "Test", 9.41, 649.28, "-1.0000")
    assert ranked(tmp_path, text) == ["bad-input-data"]


# jiesutd/NCRFpp#67: epoch 0, the model predicts no entity yet (`pred_num = 0`, f -1) but the data holds 992 in 281
# sentences; the reporter's next epoch was positive. An untrained model is no data fault.
def test_untrained_model_with_f_minus_one_but_normal_gold_count_is_quiet(tmp_path):
    text = ncrfpp(992, 0, 0, "Dev", 2.86, 98.30, "-1.0000") + ncrfpp(930, 0, 0, "Test", 2.48, 103.37, "-1.0000")
    assert ranked(tmp_path, text) == []


# A handful of sentences (a smoke-test split) is too few to judge a count.
def test_tiny_evaluation_split_is_quiet(tmp_path):
    assert ranked(tmp_path, ncrfpp(0, 0, 0, "Dev", 0.5, 40.0, "-1.0000")) == []


# facebookresearch/maskrcnn-benchmark#1347: a hand-written loop printing the summed `losses` (the trainers' own name).
def test_summed_losses_exploding_to_nan_is_nan_loss(tmp_path):
    vals = ["39.65670394897461", "22.218917846679688", "68.60948944091797", "1266.863037109375", "332.03045654296875",
            "1436176.25", "nan", "nan"]
    text = "".join(f"iteration : {i}, losses : {v}\n" for i, v in enumerate(vals, 1))
    assert ranked(tmp_path, text)[:1] == ["nan-loss"]


def test_summed_losses_falling_is_quiet(tmp_path):
    text = "".join(f"iteration : {i}, losses : {v}\n" for i, v in enumerate(("3.92", "3.41", "2.87", "2.55", "2.31", "2.20"), 1))
    assert ranked(tmp_path, text) == []

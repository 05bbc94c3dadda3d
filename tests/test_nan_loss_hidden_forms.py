"""NaN losses that metric lines show only indirectly: a loss masked to exactly 0, a perplexity printed as inf, Keras'
TerminateOnNaN line, and numpy's warning from a box-target encoder (bad data); near misses of each stay quiet."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

HF = "{{'loss': {}, 'learning_rate': {}, 'epoch': {}}}"


def run_of(tmp_path: Path, lines: list[str]) -> Analysis:
    return analyze(Context(ingest(write_run(tmp_path, {"train.log": "\n".join(lines) + "\n"}))))


def top(a: Analysis) -> str | None:
    problems = [f for f in a.findings if f.severity > Severity.INFO]
    return problems[0].id if problems else None


def hf_lines(losses: list[str]) -> list[str]:
    return [HF.format(v, f"{4e-6 * (i + 1):.6g}", round(0.02 * (i + 1), 2)) for i, v in enumerate(losses)]


def test_hf_loss_falling_to_exactly_zero_in_one_interval_is_a_masked_nan(tmp_path):
    # wwxu21/CUT#2: 1.6736, then 0.0 at every later log while the warm-up LR rises
    a = run_of(tmp_path, hf_lines(["1.6736"] + ["0.0"] * 11))
    assert top(a) == "nan-loss"
    f = next(f for f in a.findings if f.id == "nan-loss")
    assert f.severity == Severity.MEDIUM and f.facts["signal"] == "zeroed"


def test_loss_learned_down_to_zero_stays_quiet(tmp_path):
    # near miss: a memorised set passes through small values before printing 0.0
    a = run_of(tmp_path, hf_lines(["1.2", "0.4", "0.05", "0.004", "0.0003", "0.0", "0.0", "0.0"]))
    assert "nan-loss" not in {f.id for f in a.findings if f.severity > Severity.INFO}


def test_zero_loss_from_the_first_point_is_no_masked_nan(tmp_path):
    # near miss: no finite value to fall from (every label masked from the start is another playbook's)
    a = run_of(tmp_path, hf_lines(["0.0"] * 6))
    assert "nan-loss" not in {f.id for f in a.findings if f.severity > Severity.INFO}


def test_zero_loss_beside_a_zero_grad_norm_is_no_masked_nan(tmp_path):
    # near miss: loss 0 with grad norm exactly 0 is an all-masked batch, not a hidden NaN
    lines = ["{'loss': 1.5, 'grad_norm': 3.2, 'learning_rate': 1e-05, 'epoch': 0.1}"]
    lines += [f"{{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': 1e-05, 'epoch': {0.1 * k:.1f}}}" for k in range(2, 7)]
    a = run_of(tmp_path, lines)
    assert "nan-loss" not in {f.id for f in a.findings if f.severity > Severity.INFO}


def test_opennmt_tf_evaluation_perplexity_inf_is_a_nan_loss(tmp_path):
    # OpenNMT/OpenNMT-tf#744: the evaluation's perplexity overflowed exp, the run later stops with NaN
    lines = ["INFO:tensorflow:Evaluation result for step 435000: loss = 148890.718750 ; perplexity = inf",
             "INFO:tensorflow:Step = 435100 ; steps/s = 2.97, source words/s = 12176 ; Learning rate = 1.202480 ; Loss = 185912.781250",
             "INFO:tensorflow:Step = 435200 ; steps/s = 2.93, source words/s = 12020 ; Learning rate = 1.202172 ; Loss = 158771.156250"]
    a = run_of(tmp_path, lines)
    assert top(a) == "nan-loss"
    f = next(f for f in a.findings if f.id == "nan-loss")
    assert f.facts["signal"] == "perplexity" and f.onset.step == 435000


def test_finite_large_perplexity_stays_quiet(tmp_path):
    # near miss: an untrained model's perplexity is large but finite (OpenNMT-tf's first evaluations)
    lines = [f"INFO:tensorflow:Evaluation result for step {s}: loss = {v} ; perplexity = {p}"
             for s, v, p in ((5000, 7.9, 2697.3), (10000, 6.1, 445.9), (15000, 5.2, 181.3))]
    a = run_of(tmp_path, lines)
    assert "nan-loss" not in {f.id for f in a.findings if f.severity > Severity.INFO}


def test_keras_terminate_on_nan_glued_to_the_progress_bar(tmp_path):
    # bricewalker/Hey-Jetson#7
    lines = ["3455/3455 [==============================] - 21350s 6s/step - loss: 356.8575 - val_loss: 237.5635", "Epoch 2/30",
             "1883/3455 [===============>..............] - ETA: 2:39:53 - loss: nan     Batch 1882: Invalid loss, terminating training"]
    assert top(run_of(tmp_path, lines)) == "nan-loss"


def test_numpy_log_warning_in_bbox_transform_is_bad_input_data(tmp_path):
    # endernewton/tf-faster-rcnn#107: a ground-truth box with ymin > ymax, then total loss nan
    lines = ["iter: 40 / 7000, total loss: 0.740965", " >>> rpn_loss_box: 0.005625",
             "/notebooks/tf-faster-rcnn/tools/../lib/model/bbox_transform.py:31: RuntimeWarning: invalid value encountered in log",
             "  targets_dh = np.log(gt_heights / ex_heights)",
             "iter: 60 / 7000, total loss: nan", " >>> rpn_loss_box: nan"]
    a = run_of(tmp_path, lines)
    assert top(a) == "bad-input-data"
    f = next(f for f in a.findings if f.id == "bad-input-data")
    assert any(e.line == 3 for e in f.evidence)


def test_numpy_warning_outside_a_box_encoder_is_no_data_finding(tmp_path):
    # near miss: linmx0130/ya_mxdet#7, an IoU division on predicted boxes in nms.py
    lines = ["nms.py:21: RuntimeWarning: invalid value encountered in true_divide", "  iou = inter / outer",
             "iter: 60 / 7000, total loss: 0.52"]
    a = run_of(tmp_path, lines)
    assert "bad-input-data" not in {f.id for f in a.findings if f.severity > Severity.INFO}

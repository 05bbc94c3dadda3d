"""Short pastes whose failure is in the metric lines: a DeepSpeed loss scale stuck at its floor, Paddle's quoted `'nan'`
loss items, and an evaluation loss that turns NaN after training; their healthy look-alikes stay quiet."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run
from tests.metrics_util import metrics

# DeepSpeed ZeRO's overflow line (runtime/zero/stage2.py, loss_scaler.py): the scale it attempted and the new one.
DS = "[2021-11-27 00:36:{:02d},800] [INFO] [stage2.py:1628:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {}, reducing to {}"
BAR = "  0%|▋          | {}/24128 [00:40<2:40:10,  2.50it/s]"
# PaddleDetection's static trainer line (ppdet/utils/stats.py TrainingStats.log joins a brace-less dict of quoted values).
PADDLE = "2020-09-25 15:{:02d}:53,118-INFO: iter: {}, lr: 0.000033, 'loss_cls': '{}', 'loss': '{}', eta: 6:53:11, batch_cost: 0.48815 sec, ips: 4.09711 images/sec"
# TensorFlow-2.x-YOLOv3's train/validation prints.
YOLO = "epoch:{} step:    {}/19, lr:0.000052, giou_loss:   2.31, conf_loss:  10.61, prob_loss:   0.08, total_loss:  {}"
YOLO_VAL = "giou_val_loss:    {}, conf_val_loss:  12.31, prob_val_loss:   0.06, total_val_loss:    {}"


def run_of(tmp_path: Path, text: str) -> Analysis:
    return analyze(Context(ingest(write_run(tmp_path, {"train.log": text}))))


def medium_plus(a: Analysis) -> list[str]:
    return [f.id for f in a.findings if f.severity >= Severity.MEDIUM]


def _ds(pairs: list[tuple[str, str]]) -> str:
    out = []
    for i, (a, b) in enumerate(pairs):
        out += [DS.format(i, a, b), BAR.format(98 + i)]
    return "\n".join(out) + "\n"


def test_overflow_after_overflow_at_scale_one_is_a_stuck_scaler(tmp_path):
    # huggingface/transformers#14531 and the transformers DeepSpeed guide ('NaN loss'): every step skipped at 1.
    a = run_of(tmp_path, _ds([("1", "1")] * 3))
    assert medium_plus(a)[:1] == ["fp16-overflow"]
    f = a.findings[0]
    assert "floor" in f.summary and f.evidence[0].line == 1


def test_one_overflow_at_scale_one_stays_below_medium(tmp_path):
    assert "fp16-overflow" not in medium_plus(run_of(tmp_path, _ds([("1", "1")])))


def test_attempted_equal_new_scale_above_the_floor_is_hysteresis_not_a_floor(tmp_path):
    # ZeRO-3 prints the unchanged scale when hysteresis absorbed the overflow (deepspeedai/DeepSpeed#1593).
    assert "fp16-overflow" not in medium_plus(run_of(tmp_path, _ds([("65536", "65536")] * 3)))


def test_start_up_calibration_that_settles_stays_quiet(tmp_path):
    # DeepSpeed#931-like start: 65536 -> 8192 in the first steps, then clean steps.
    halvings = [("65536", "32768"), ("32768", "16384"), ("16384", "8192")]
    text = _ds(halvings) + "".join(BAR.format(200 + i) + "\n" for i in range(20))
    assert "fp16-overflow" not in medium_plus(run_of(tmp_path, text))


def test_paddle_quoted_nan_loss_items_are_a_nan_loss(tmp_path):
    # PaddlePaddle/PaddleDetection#1946: `'loss': 'nan'` items on every line.
    text = "\n".join(PADDLE.format(i, 1860 + 20 * i, "nan", "nan") for i in range(2)) + "\n"
    a = run_of(tmp_path, text)
    assert medium_plus(a)[:1] == ["nan-loss"]
    assert a.findings[0].evidence[0].line == 1


def test_paddle_quoted_finite_losses_are_read_and_stay_quiet(tmp_path):
    # PaddlePaddle/PaddleDetection#1507 / #1512: a healthy start, the loss falling from thousands.
    losses = ["11803.891602", "1264.233521", "557.037598", "225.754166", "79.420753", "43.708477"]
    text = "\n".join(PADDLE.format(i, 2 * i, "0.9", v) for i, v in enumerate(losses)) + "\n"
    assert medium_plus(run_of(tmp_path / "a", text)) == []
    m = metrics(tmp_path / "m", {"train.log": text})
    loss = m.filter(pl.col("name") == "loss").sort("line")
    assert loss.get_column("value").to_list()[:2] == [11803.891602, 1264.233521]


def test_eval_loss_nan_after_training_lines_is_a_nan_loss(tmp_path):
    # pythonlessons/TensorFlow-2.x-YOLOv3#8: train losses finite, the validation line nan.
    text = "\n".join([YOLO.format(49, 0, "13.83"), YOLO.format(49, 1, "12.99"), "", YOLO_VAL.format("nan", "nan")]) + "\n"
    a = run_of(tmp_path, text)
    assert medium_plus(a)[:1] == ["nan-loss"]
    assert a.findings[0].evidence[0].line == 4


def test_keras_val_loss_nan_beside_a_finite_loss_is_a_nan_loss(tmp_path):
    # keras-team/keras#1364: `loss` normal, `val_loss` nan.
    text = "Epoch 1/10\n100/100 [==============================] - 328s 3s/step - loss: 0.2139 - val_loss: nan\n"
    assert medium_plus(run_of(tmp_path, text))[:1] == ["nan-loss"]


def test_eval_loss_nan_before_any_training_line_stays_quiet(tmp_path):
    # A sanity evaluation before the first step (nothing trained yet), then finite training lines.
    text = "\n".join([YOLO_VAL.format("nan", "nan"), YOLO.format(0, 0, "13.83"), YOLO.format(0, 1, "12.99")]) + "\n"
    assert "nan-loss" not in medium_plus(run_of(tmp_path, text))


def test_eval_loss_nan_that_turns_finite_stays_quiet(tmp_path):
    text = "\n".join([YOLO.format(1, 0, "13.83"), YOLO_VAL.format("nan", "nan"), YOLO.format(2, 1, "12.99"),
                      YOLO_VAL.format("2.1", "14.5")]) + "\n"
    assert "nan-loss" not in medium_plus(run_of(tmp_path, text))

"""The canonical-name layer (metric_names.toml + word rules) and the tolerant line-shape readers that feed it.

Each line is a real shape (URL beside it); near misses pin what must not become a metric.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_names import aliases, apply_aliases, prose_names

from tests.metrics_util import rows


def test_alias_table_is_data_with_units():
    table = aliases()
    assert table["grdn"] == ("grad_norm", 1.0)
    assert table["updt_s"] == ("step_time_ms", 1000.0) and table["data_s"] == ("data_time_ms", 1000.0)
    assert table["reader_cost"][0] == "data_time_ms" and table["batch_cost"][0] == "step_time_ms"


def test_apply_aliases_renames_and_converts_only_known_names():
    df = pl.DataFrame({"name": ["data_s", "loss", "grdn"], "value": [0.038, 2.0, 1.5]})
    assert apply_aliases(df).rows() == [("data_time_ms", 38.0), ("loss", 2.0), ("grad_norm", 1.5)]


def test_prose_word_rules():
    got = prose_names(pl.Series(["Training Loss", "validation loss", "validation/main/loss", "main/accuracy", "Acc.",
                                 "train_loss_cls", "lr-AdamW"]))
    assert got == {"Training Loss": "loss", "validation loss": "eval_loss", "validation/main/loss": "eval_loss",
                   "main/accuracy": "accuracy", "Acc.": "acc", "train_loss_cls": "train_loss_cls", "lr-AdamW": "lr-AdamW"}


def test_lerobot_abbreviated_names(tmp_path):
    # https://github.com/huggingface/lerobot/issues/2465
    text = "INFO 2025-11-17 22:07:40 ot_train.py:351 step:200 smpl:6K ep:9 epch:0.03 loss:0.21 grdn:1.5 lr:2.5e-06 updt_s:4.478 data_s:0.038\n"
    got = {n: v for s, n, v in rows(tmp_path, text) if s == 200}
    assert got["grad_norm"] == 1.5 and got["epoch"] == 0.03 and got["step_time_ms"] == 4478.0 and got["data_time_ms"] == 38.0


def test_paddle_reader_and_batch_cost(tmp_path):
    # https://github.com/PaddlePaddle/PaddleOCR/issues/2083
    text = ("[2021/02/23 22:52:57] root INFO: epoch: [5/500], iter: 11550, lr: 0.001000, loss: 4.880471, acc: 0.598958, "
            "norm_edit_dis: 0.877949, reader_cost: 5.33854 s, batch_cost: 5.97875 s, samples: 960, ips: 16.05686\n")
    got = {n: v for s, n, v in rows(tmp_path, text)}
    assert got["data_time_ms"] == 5338.54 and round(got["step_time_ms"], 2) == 5978.75


def test_imagenet_meters_give_step_batch_times_and_running_averages(tmp_path):
    # https://github.com/pytorch/examples/issues/164
    text = "Epoch: [1][14/5005]\tTime 0.154 (8.010)\tData 0.001 (7.720)\tLoss 6.9074 (6.9080)\tPrec@1 0.000 (0.026)\tPrec@5 0.391 (0.391)\n"
    got = {n: (s, v) for s, n, v in rows(tmp_path, text)}
    assert got["step_time_ms"] == (5019, 154.0) and got["data_time_ms"] == (5019, 1.0)
    assert got["step_time_avg_ms"] == (5019, 8010.0) and got["data_time_avg_ms"] == (5019, 7720.0)
    assert got["epoch_batch"] == (5019, 14.0) and "epoch_time_ms" not in got


def test_double_pipe_separated_line_with_secs(tmp_path):
    # https://github.com/clovaai/bros/issues/11
    text = "TRAIN [epoch: 5/50] || train_loss: 16.82515 || lr: 0.0 || time: 197.6 secs.\n"
    assert rows(tmp_path, text) == [(None, "epoch", 5.0), (None, "loss", 16.82515), (None, "lr", 0.0), (None, "epoch_time_ms", 197600.0),
                                    (None, "epoch_total", 50.0)]


def test_trailing_note_is_not_part_of_the_values(tmp_path):
    text = "step 120  loss 2.31   lr 3e-4   <-- loss jumps here after the restart\nstep 130  loss 2.29   lr 3e-4   # fine again\n"
    assert rows(tmp_path, text) == [(120, "loss", 2.31), (120, "lr", 3e-4), (130, "loss", 2.29), (130, "lr", 3e-4)]


def test_prose_accuracy_line_alone_and_error_counts(tmp_path):
    # https://github.com/Lasagne/Lasagne/issues/525 and https://github.com/pytorch/pytorch/issues/2293
    text = ("  validation loss:\t\t2.303229\n  validation accuracy:\t\t10.64 %\n"
            "[TRAIN Epoch 1] Loss: 2.33110598225, Error: 44996/50000\n[TEST] Loss: 2.3440, Error: 8999/10000 (90%)\n")
    assert rows(tmp_path, text) == [(None, "eval_loss", 2.303229), (None, "eval_accuracy", 10.64),
                                    (None, "epoch", 1.0), (None, "loss", 2.33110598225), (None, "error", 0.89992),
                                    (None, "eval_loss", 2.344), (None, "eval_error", 0.8999)]


def test_accuracy_in_a_sentence_is_no_metric(tmp_path):
    text = "We reached an accuracy: 91 on the held out set after tuning the augmentation pipeline for weeks\n"
    assert rows(tmp_path, text) == []


def test_column_table_with_header_row(tmp_path):
    # https://github.com/chainer/chainer/issues/4424 (PrintReport)
    text = ("epoch       main/loss   validation/main/loss  main/accuracy  validation/main/accuracy  elapsed_time\n"
            "1           2.46634     2.30259               0.0994882      0.10004                   61.067\n"
            "2           2.30347     2.30259               0.0998119      0.10004                   121.208\n")
    got = rows(tmp_path, text)
    assert (1, "loss", 2.46634) in got and (2, "eval_loss", 2.30259) in got and (2, "accuracy", 0.0998119) in got
    assert (1, "eval_accuracy", 0.10004) in got and (1, "epoch", 1.0) in got


def test_tab_column_table_and_rows_that_do_not_fit_the_header(tmp_path):
    # https://github.com/xiaolonw/TimeCycle/issues/10 (tab-separated, multi-word names)
    text = ("Learning Rate\tTrain Loss\tTheta Loss\tTheta Skip Loss\t\n"
            "0.000200\t-0.023201\t0.223515\t0.185768\t\n"
            "12 34\n")
    assert rows(tmp_path, text) == [(None, "lr", 0.0002), (None, "loss", -0.023201), (None, "theta_loss", 0.223515),
                                    (None, "theta_skip_loss", 0.185768)]


def test_bare_numbers_without_a_header_are_no_metrics(tmp_path):
    assert rows(tmp_path, "1 2.5 3.5\n2 2.4 3.1\n") == []

"""A log that stops on the start of training or on a finished checkpoint restore, with no step, metric or error after
it, is a low silent-hang (unproven: a paste may stop there); the same lines followed by progress or an error are not."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# princeton-nlp/LLM-Shearing#53: Composer's config dump, then `Starting training...` and nothing (a hang others shared).
SHEARING = ["save_interval: 320ba", "eval_first: false", "autoresume: false", "dist_timeout: 1800.0", "n_gpus: 4",
            "device_train_batch_size: 8", "", "Starting training..."]
# MedChaabane/DEFT#17: the announcement, then the user's own two prints (no number in them); stuck for good.
DEFT = ["Loaded Custom dataset 202 samples", "Starting training...", "yesyes ", "tracking/nameOfMyDataset"]
# facebookresearch/detectron2#767: train_loop's line, then nothing; the maintainer: a first iteration can take
# minutes. The reason the finding is low, not a near miss the rule can tell apart.
D2 = ["[01/30 02:45:17 d2.engine.train_loop]: Starting training from iteration 0"]
# ibab/tensorflow-wavenet#130: the restore finished, then nothing (no audio found: the input queue never filled).
WAVENET = ["Trying to restore saved checkpoints from /vol/data ...  Checkpoint found: /vol/data/model.ckpt-1253",
           "  Global step was: 1253", "  Restoring... Done."]
# zengarden/light_head_rcnn#17 / Tencent/PocketFlow#93: TensorFlow's Saver line last (a data loop stuck on a missing
# image in the first; slow silent fine-tuning in the second).
TF_RESTORE = ["INFO:tensorflow:Restoring parameters from ./models/model.ckpt-250227"]
# OpenNMT/OpenNMT-tf#127: training progressed (loss lines), then an evaluation's restore last: a later phase a paste
# ends on, which this rule leaves alone (no step was logged is its premise).
ONMT = ["INFO:tensorflow:loss = 30730.3, step = 45595 (13.718 sec)", "INFO:tensorflow:global_step/sec: 7.14987",
        "INFO:tensorflow:Saving checkpoints for 45764 into models/20180521_2/model.ckpt.",
        "INFO:tensorflow:Restoring parameters from models/20180521_2/model.ckpt-45764"]
# The run goes on: a tqdm bar with counts, an epoch line with a loss.
BAR = "Epoch 0:  12%|█▏        | 60/500 [00:31<03:50,  1.91it/s, loss=2.31]"
CRASH = ["Traceback (most recent call last):", '  File "train.py", line 44, in <module>', "    trainer.train(0, 100)",
         "RuntimeError: CUDA error: device-side assert triggered"]


def _analyze(tmp_path: Path, lines: list[str]) -> tuple[Analysis, pl.DataFrame]:
    ctx = Context(ingest(write_run(tmp_path, {"console.log": "\n".join(lines) + "\n"})))
    return analyze(ctx), ctx.events


def _problems(a: Analysis) -> list:
    return [f for f in a.findings if f.severity > Severity.INFO]


def _train_start_lines(ev: pl.DataFrame) -> list[int]:
    ends = ev.filter((pl.col("code") == "log_end") & pl.col("fields").str.contains('"form":"train_start"'))
    return ends.get_column("line").to_list()


@pytest.mark.parametrize(("lines", "at"), [
    (SHEARING, len(SHEARING)),
    (DEFT, 2),
    (D2, 1),
    (WAVENET, 3),
    (TF_RESTORE, 1),
], ids=["composer_starting_training", "deft_two_stray_prints_after", "detectron2_from_iteration_0",
        "wavenet_restoring_done", "tf_saver_restoring_parameters"])
def test_log_stopping_at_the_start_of_training_is_a_low_hang(tmp_path, lines, at):
    a, ev = _analyze(tmp_path, lines)
    assert _train_start_lines(ev) == [at]
    top = _problems(a)[0]
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.LOW, "stuck_dataloader")
    assert top.evidence[0].line == at
    assert "unproven" in top.summary


@pytest.mark.parametrize("lines", [
    [*SHEARING, BAR],
    [*DEFT[:2], "Epoch 1 | loss 2.31"],
    ["Starting training...", "a", "b", "c"],  # four lines from the end: beyond the three an at-end form reads
    ["Waiting before starting training"],  # not an announcement at the start of the line
], ids=["then_a_progress_bar", "then_a_line_with_numbers", "too_far_from_the_end", "in_a_sentence"])
def test_announcement_followed_by_progress_is_not_an_ending(tmp_path, lines):
    a, ev = _analyze(tmp_path, lines)
    assert _train_start_lines(ev) == []
    assert "silent-hang" not in {f.id for f in _problems(a)}


@pytest.mark.parametrize("lines", [ONMT, [*CRASH, *SHEARING]],
                         ids=["progress_logged_before_the_restore", "an_error_in_the_run"])
def test_ending_after_progress_or_with_an_error_is_quiet(tmp_path, lines):
    a, ev = _analyze(tmp_path, lines)
    assert _train_start_lines(ev) == [len(lines)]
    assert "silent-hang" not in {f.id for f in _problems(a)}

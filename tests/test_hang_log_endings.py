"""Hangs read from where a log stops (a store client still retrying, a Keras bar one step short of its epoch's end, the
training-set size announced before the first batch, an evaluation between epochs with much training left) are low
silent-hang findings, and a collective timing out after the trainer's loop ended is collective-mismatch; the same lines
followed by progress or an error, or at a finished epoch or run, are not."""

from __future__ import annotations

import polars as pl
import pytest

from forensics.contracts.model import Severity
from tests.helpers import analyze_console

# PaddlePaddle/Paddle#48421: the store server listens, then the client retries a wrong host IP every ~2 min.
PADDLE = ["2022-11-27 21:31:55 [INFO]\tThere are 1052/1067 variables loaded into SegFormer.",
          "I1127 21:31:55.544849 3935673 tcp_utils.cc:181] The server starts to listen on IP_ANY:63314",
          "I1127 21:34:05.015228 3935673 tcp_utils.cc:107] Retry to connect to 0.1.68.146:63314 while the server is not yet listening.",
          "I1127 21:36:18.135196 3935673 tcp_utils.cc:107] Retry to connect to 0.1.68.146:63314 while the server is not yet listening."]
# PaddleSeg's train line (paddleseg/core/train.py): the store answered and training went on.
PADDLESEG_TRAIN = ("2022-11-27 21:36:30 [INFO]\t[TRAIN] epoch: 1, iter: 10/160000, loss: 2.1234, lr: 0.000060, "
                   "batch_cost: 0.3525, reader_cost: 0.01405, ips: 11.3483 samples/sec | ETA 15:39:58")
# matterport/Mask_RCNN#1588: the bar stays at 999/1000 (fit_generator with workers and multiprocessing).
MASK_RCNN = ["Epoch 1/30",
             " 999/1000 [============================>.] - ETA: 1s - loss: 0.2676 - rpn_class_loss: 0.0068 - "
             "rpn_bbox_loss: 0.1127 - mrcnn_class_loss: 0.0220 - mrcnn_bbox_loss: 0.0510 - mrcnn_mask_loss: 0.0752  "]
# keras-team/keras#8595 (`stuck on first epoch step 1999/2000`), in Keras' Progbar format.
KERAS_1999 = ["Epoch 1/25", "1999/2000 [============================>.] - ETA: 0s - loss: 0.3312 - acc: 0.8594"]
# A paste cut mid-epoch, and rstudio/keras3#1201's finished epoch bar (no ETA: the bar at its total).
KERAS_MID = ["Epoch 3/30", " 512/1000 [==============>...............] - ETA: 2:03 - loss: 0.3102"]
KERAS_DONE = ["Epoch 1/5", "1/1 [==============================] - 1s 950ms/step - loss: 30.8499 - val_loss: 30.8499",
              "Epoch 2/5", "1/1 [==============================] - 0s 0s/step - loss: 30.8499"]
# keras-team/keras#11845: a bar at 1/2 with the traceback glued to it (the generator raised): a crash.
KERAS_CRASH = ["1/2 [==============>...............] - ETA: 22s - loss: 2.2296 - acc: 0.0408Traceback (most recent call last):",
               '  File "/Users/mba/PycharmProjects/vggUnet/train.py", line 75, in <module>', "    trainner.train()",
               "StopIteration"]
# yhenon/pytorch-retinanet#201: the annotations load, the training-set size, then nothing for 36 hours.
RETINANET = ["CUDA available: True", "loading annotations into memory...", "Done (t=13.07s)", "creating index...",
             "index created!", "Num training images: 118287"]
RETINANET_STEP = "Epoch: 0 | Iteration: 0 | Classification loss: 1.13045 | Regression loss: 1.02735 | Running loss: 2.15780"
# dbolya/yolact#428: progress with days left, the evaluation between epochs, its table, then nothing.
YOLACT = ["[  2]     930 || B: 1.244 | C: 3.757 | M: 5.057 | S: 0.836 | I: 0.002 | T: 10.896 || ETA: 4 days, 0:02:30 || timer: 1.404",
          "[  2]     940 || B: 1.241 | C: 3.751 | M: 5.041 | S: 0.838 | I: 0.002 | T: 10.872 || ETA: 3 days, 23:57:23 || timer: 0.660",
          "", "Computing validation mAP (this may take a while)...", "", "", "Calculating mAP...", "",
          "       |  all  |  .50  |  .55  |  .60  |  .65  |  .70  |  .75  |  .80  |  .85  |  .90  |  .95  |",
          "-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+",
          "   box |  2.37 |  4.02 |  3.90 |  3.69 |  3.47 |  3.09 |  2.55 |  1.78 |  0.94 |  0.26 |  0.00 |",
          "  mask |  0.00 |  0.00 |  0.00 |  0.00 |  0.00 |  0.00 |  0.00 |  0.00 |  0.00 |  0.00 |  0.00 |",
          "-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+-------+"]
# dbolya/yolact#379's progress line format: training went on after the evaluation.
YOLACT_NEXT = "[  3]     950 || B: 2.368 | C: 3.131 | M: 3.495 | S: 0.635 | T: 9.628 || ETA: 3 days, 16:00:49 || timer: 0.839"
# The evaluation yolact runs once after its last iteration (str(timedelta) of the few seconds left).
YOLACT_LAST = ["[ 54]  799990 || B: 0.712 | C: 1.034 | M: 1.102 | S: 0.012 | T: 2.860 || ETA: 0:00:08.420000 || timer: 0.842",
               "", "Computing validation mAP (this may take a while)...", "", "Calculating mAP...",
               "   box | 31.20 | 50.11 | 48.90 | 46.62 | 43.71 | 40.02 | 35.31 | 28.77 | 19.85 |  8.69 |  0.86 |"]
CRASH = ["Traceback (most recent call last):", '  File "train.py", line 371, in train',
         "RuntimeError: CUDA error: an illegal memory access was encountered"]
# alan-turing-institute/autocast#381: fit ended, then rank 0 alone in a collective until the watchdog fired.
AUTOCAST = ["`Trainer.fit` stopped: `max_epochs=N` reached.", "[Rank 0] Watchdog caught collective operation timeout:",
            "  WorkNCCL(..., OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000)",
            "  ran for 1800090 milliseconds before timing out.", "...", "srun: error: ... Aborted (core dumped)"]
# The same sequence after transformers' Trainer, the watchdog's line whole (its format: formats.md §2.4.1).
HF_DONE = "Training completed. Do not forget to share your model on huggingface.co/models =)"
WATCHDOG = ("[rank1]:[E602 11:17:52.185053341 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=3507, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=2, Timeout(ms)=1800000) ran "
            "for 1800027 milliseconds before timing out.")
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB"


@pytest.mark.parametrize(("lines", "line", "cause"), [
    (PADDLE, 4, "rendezvous_incomplete"),
    (MASK_RCNN, 2, "stuck_dataloader"),
    (KERAS_1999, 2, "stuck_dataloader"),
    (RETINANET, 6, "stuck_dataloader"),
    (YOLACT, 4, "stuck_dataloader"),
], ids=["paddle_store_retry_last", "mask_rcnn_999_of_1000", "keras_1999_of_2000", "retinanet_training_set_size_last",
        "yolact_ends_in_eval_with_days_left"])
def test_log_stopping_there_is_a_low_hang(tmp_path, lines, line, cause):
    top = analyze_console(tmp_path, lines)[0][0]
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.LOW, cause)
    assert line in {e.line for e in top.evidence}
    assert top.evidence[0].line == line


@pytest.mark.parametrize("lines", [
    [*PADDLE, PADDLESEG_TRAIN],
    KERAS_MID,
    KERAS_DONE,
    KERAS_CRASH,
    [*RETINANET, RETINANET_STEP],
    ["Number of training samples: 60000", "Number of testing samples: 10000", "We use 5000 training images in total."],
    [*YOLACT, YOLACT_NEXT],
    YOLACT_LAST,
    [*YOLACT, *CRASH],
], ids=["paddle_retry_then_training", "keras_bar_mid_epoch", "keras_bar_at_its_total", "keras_bar_then_traceback",
        "retinanet_first_iteration_logged", "dataset_sizes_then_prose", "yolact_progress_after_eval",
        "yolact_eval_after_the_last_iteration", "yolact_eval_then_a_crash"])
def test_same_lines_followed_by_progress_or_an_error_or_finished_are_no_hang(tmp_path, lines):
    assert "silent-hang" not in {f.id for f in analyze_console(tmp_path, lines)[0]}


@pytest.mark.parametrize("lines", [AUTOCAST, [HF_DONE, WATCHDOG]], ids=["lightning_wrapped_watchdog", "hf_trainer"])
def test_collective_timeout_after_the_loop_ended_is_a_mismatch(tmp_path, lines):
    problems, ev = analyze_console(tmp_path, lines)
    assert ev.filter(pl.col("code") == "train_loop_done").get_column("line").to_list() == [1]
    top = problems[0]
    assert (top.id, top.causes[0].cause.id) == ("collective-mismatch", "divergent_code_path")
    assert top.evidence[0].line == 2


@pytest.mark.parametrize("lines", [[WATCHDOG], [HF_DONE, OOM, WATCHDOG], [WATCHDOG, HF_DONE]],
                         ids=["no_end_of_loop", "an_error_between", "timeout_before_the_end"])
def test_timeout_not_after_a_clean_end_of_loop_is_not_this_mismatch(tmp_path, lines):
    assert "collective-mismatch" not in {f.id for f in analyze_console(tmp_path, lines)[0]}

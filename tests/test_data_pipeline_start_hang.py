"""A log that stops on a trainer's last announcement before the first batch (YOLOX's prefetcher start, mmcv's runner
start) is a low silent-hang; the same lines followed by progress are not, nor tf.data's filled shuffle buffer."""

from __future__ import annotations

import pytest

from forensics.contracts.model import Severity

# The same reading as the train_start cases: analyze one console.log, its problems, its train_start end lines.
from tests.test_train_start_hang import _analyze, _problems, _train_start_lines

# Megvii-BaseDetection/YOLOX#561: COCO index built, then the prefetcher's first next(loader) never returned.
YOLOX = ["2021-08-23 07:16:29 | INFO     | pycocotools.coco:88 - index created!",
         "2021-08-23 07:16:31 | INFO     | yolox.core.trainer:151 - init prefetcher, this might take one minute or less..."]
# FoundationVision/ByteTrack#134: the same trainer (loguru's longer time stamp), stuck on a custom data set.
BYTETRACK = ["2022-01-21 00:38:28.020 | INFO     | yolox.core.launch:_distributed_worker:184 - Rank 0 initialization finished.",
             "2022-01-21 00:38:40 | INFO     | yolox.core.trainer:148 - init prefetcher, this might take one minute or less..."]
# marcbelmont/cnn-watermark-removal#23: tf.data's buffer filled, then nothing for minutes, yet the run went on (as
# daniel-kukiela/nmt-chatbot#63): slow as often as stuck, so not read as an ending.
SHUFFLE = ["2019-02-19 16:30:50.826511: I C:\\tf_jenkins\\home\\workspace\\rel-win\\M\\windows\\PY\\36\\tensorflow\\core\\kernels\\shuffle_dataset_op.cc:110] Filling up shuffle buffer (this may take a while): 320 of 10000",
           "2019-02-19 16:30:57.231075: I C:\\tf_jenkins\\home\\workspace\\rel-win\\M\\windows\\PY\\36\\tensorflow\\core\\kernels\\shuffle_dataset_op.cc:121] Shuffle buffer filled."]
# open-mmlab/mmdetection#4002: mmcv's runner start, then nothing for an hour (no checkpoint, no iteration line).
MMCV = ["index created!",
        "2020-10-26 21:29:50,713 - mmdet - INFO - Start running, host: atakan@atakan-MS-7A15, work_dir: /home/atakan/mmdetection/work_dirs/htc_without_semantic_r50_fpn_1x_coco'",
        "2020-10-26 21:29:50,713 - mmdet - INFO - workflow: [('train', 1)], max: 12 epochs"]
# open-mmlab/mmsegmentation#1505's title line (later mmcv): CheckpointHook.before_run, the last line before iteration 1.
CHECKPOINTS = ["2022-04-24 10:12:31,404 - mmseg - INFO - Checkpoints will be saved to /mnt/DATA/tianbiao/code/mmsegmentation/work_dirs/deeplabv3_unet_s5-d16_128x128_40k_chase_db1 by HardDiskBackend."]
# open-mmlab/mmdetection#5993: a YOLOX run that went on (the epoch start and an iteration line after the prefetcher).
YOLOX_ITER = ["2021-08-31 07:08:00.878 | INFO     | yolox.core.trainer:before_epoch:188 - ---> start train epoch1",
              "2021-08-31 07:08:06.767 | INFO     | yolox.core.trainer:after_iter:246 - epoch: 1/300, iter: 10/1849, mem: 6357Mb, iter_time: 0.588s, data_time: 0.001s, total_loss: 16.9, iou_loss: 4.7, l1_loss: 0.0, conf_loss: 10.2, cls_loss: 2.0, lr: 1.170e-08, size: 640, ETA: 3 days, 18:38:06"]
# mmcv's text logger's first iteration line (open-mmlab/mmdetection#3212's shape).
MMCV_ITER = "2020-07-05 10:00:00,000 - mmdet - INFO - Epoch [1][50/7330]\tlr: 1.978e-03, eta: 1 day, 3:12:00, time: 0.451, data_time: 0.051, memory: 3870, loss_rpn_cls: 0.2863, loss: 1.3325"
CRASH = ["Traceback (most recent call last):", '  File "tools/train.py", line 44, in <module>', "    main()",
         "RuntimeError: DataLoader worker (pid 1234) is killed by signal: Killed."]


@pytest.mark.parametrize("lines", [YOLOX, BYTETRACK, MMCV, CHECKPOINTS],
                         ids=["yolox_init_prefetcher", "bytetrack_init_prefetcher", "mmcv_workflow",
                              "mmcv_checkpoints_will_be_saved"])
def test_log_stopping_before_the_first_batch_is_a_low_hang(tmp_path, lines):
    a, ev = _analyze(tmp_path, lines)
    assert _train_start_lines(ev) == [len(lines)]
    top = _problems(a)[0]
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.LOW, "stuck_dataloader")
    assert top.evidence[0].line == len(lines)
    assert "unproven" in top.summary


@pytest.mark.parametrize("lines", [
    [*YOLOX, *YOLOX_ITER],
    [*MMCV, MMCV_ITER],
    SHUFFLE,
    ["Restoring the prefetcher state for init prefetcher"],  # the words without YOLOX's `, this might take`
], ids=["yolox_then_iterations", "mmcv_then_an_iteration", "tf_shuffle_buffer_filled_slow_not_stuck", "in_a_sentence"])
def test_announcement_followed_by_progress_is_not_an_ending(tmp_path, lines):
    a, ev = _analyze(tmp_path, lines)
    assert _train_start_lines(ev) == []
    assert "silent-hang" not in {f.id for f in _problems(a)}


def test_announcement_after_an_error_is_quiet(tmp_path):
    lines = [*CRASH, *YOLOX]
    a, ev = _analyze(tmp_path, lines)
    assert _train_start_lines(ev) == [len(lines)]
    assert "silent-hang" not in {f.id for f in _problems(a)}

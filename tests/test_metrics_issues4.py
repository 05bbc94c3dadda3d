"""Real logs pasted in public GitHub issues (each test cites its thread), sweep 5: semseg-style loops,
diffusers/kohya/speech/RL trainers, and the near misses (config dumps, summaries) around them."""

from __future__ import annotations

from tests.metrics_util import NAN, full, rows


def test_semseg_epoch_iteration_lines_take_the_global_iteration(tmp_path):
    # https://github.com/CVMI-Lab/PAConv/issues/29: `Epoch: [e/E][i/n]` (1-based); the step is the global
    # iteration (e - 1) * n + i, as mmcv's `Epoch [e][i/n]`. The record printed again by a second handler
    # (`INFO:main-logger:`) is not read twice; `Remain` (time left) is no metric.
    text = (
        "[2021-12-29 09:19:22,793 INFO train.py line 249 2152192] Epoch: [1/100][1900/2976] Data 0.001 (0.004) "
        "Batch 0.935 (0.982) Remain 80:39:57 Loss 1.0328 Main Loss 1.0328 Accuracy 0.5974.\n"
        "WARNING:root:NaN or Inf found in input tensor.\n"
        "[2021-12-29 09:20:59,144 INFO train.py line 249 2152192] Epoch: [1/100][2000/2976] Data 0.001 (0.004) "
        "Batch 0.911 (0.981) Remain 80:33:45 Loss nan Main Loss nan Accuracy 0.2679.\n"
        "INFO:main-logger:Epoch: [1/100][2000/2976] Data 0.001 (0.004) Batch 0.911 (0.981) Remain 80:33:45 Loss nan "
        "Main Loss nan Accuracy 0.2679.\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 1900, "data_time_ms", 1.0, "semseg"), (1, None, 1900, "step_time_ms", 935.0, "semseg"),
        (1, None, 1900, "loss", 1.0328, "semseg"), (1, None, 1900, "main_loss", 1.0328, "semseg"),
        (1, None, 1900, "accuracy", 0.5974, "semseg"),
        (3, None, 2000, "data_time_ms", 1.0, "semseg"), (3, None, 2000, "step_time_ms", 911.0, "semseg"),
        (3, None, 2000, "loss", NAN, "semseg"), (3, None, 2000, "main_loss", NAN, "semseg"),
        (3, None, 2000, "accuracy", 0.2679, "semseg")]


def test_semseg_camel_case_losses_and_later_epochs(tmp_path):
    # https://github.com/liuzhengzhe/3D-to-2D-Distillation-for-Indoor-Scene-Parsing/issues/4 (`MainLoss`,
    # `AuxLoss` as one word -> snake_case); a second epoch continues the count: (2 - 1) * 11134 + 10.
    text = (
        "[2021-08-16 13:47:19,356 INFO train.py line 404 34387] Epoch: [1/50][750/11134] Data 0.000 (0.002) Batch 0.439 "
        "(0.445) Remain 68:45:01 MainLoss 0.0000 AuxLoss 0.0000 RegLoss 1.2029 FinalLoss 2.0406 Loss 3.2435 Accuracy 0.1246.\n"
        "[2021-08-17 13:47:19,356 INFO train.py line 404 34387] Epoch: [2/50][10/11134] Data 0.000 (0.002) Batch 0.439 "
        "(0.445) Remain 68:45:01 MainLoss nan AuxLoss nan RegLoss 1.2029 FinalLoss nan Loss nan Accuracy 0.0000.\n"
    )
    got = rows(tmp_path, text)
    assert got[:8] == [
        (750, "data_time_ms", 0.0), (750, "step_time_ms", 439.0), (750, "main_loss", 0.0), (750, "aux_loss", 0.0),
        (750, "reg_loss", 1.2029), (750, "final_loss", 2.0406), (750, "loss", 3.2435), (750, "accuracy", 0.1246)]
    assert got[8:] == [
        (11144, "data_time_ms", 0.0), (11144, "step_time_ms", 439.0), (11144, "main_loss", NAN), (11144, "aux_loss", NAN),
        (11144, "reg_loss", 1.2029), (11144, "final_loss", NAN), (11144, "loss", NAN), (11144, "accuracy", 0.0)]

"""Short pastes in metric shapes read since the fourth incident batch: what fires, and the near misses that stay quiet.

Step times rising over 3 to 5 logged points; NaN losses in OpenAI logger boxes, Paddle one-element arrays and the
older YOLO table. Each log is a real shape (URL beside it); a near miss changes the numbers to the healthy case.
"""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def ranked(tmp: Path, text: str) -> list[str]:
    """Playbook ids of the findings above info, in report order, for a one-file run."""
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f.playbook.id for f in a.findings if f.severity.name.lower() != "info"]


# https://github.com/epfLLM/Megatron-LLM/issues/22: the paste stops at `learning rate: ... |`.
def megatron(times: list[float]) -> str:
    return "".join(f" iteration {10 + 5 * i:>8}/     600 | consumed samples: {640 + 320 * i:>12} | elapsed time per iteration "
                   f"(ms): {t} | learning rate: 8.000E-06 | \n" for i, t in enumerate(times))


def test_step_time_doubling_over_three_points_is_a_regression_not_a_nan_loss(tmp_path):
    assert ranked(tmp_path, megatron([84606.2, 142474.1, 202438.6])) == ["step-time-regression"]


def test_one_slow_iteration_among_three_is_quiet(tmp_path):
    # An eval or checkpoint interval: one slow point, the others level.
    assert ranked(tmp_path, megatron([84606.2, 86012.5, 202438.6])) == []


def test_warm_up_with_falling_step_times_is_quiet(tmp_path):
    assert ranked(tmp_path, megatron([202438.6, 90311.0, 84606.2, 84410.9])) == []


def test_step_times_wobbling_within_thirty_percent_are_quiet(tmp_path):
    assert ranked(tmp_path, megatron([84606.2, 95000.3, 108000.9])) == []


# https://github.com/openai/guided-diffusion/issues/50 (the box, then the fp16 handler backing off).
GUIDED = """-----------------------------
| lg_loss_scale | -1.62e+04 |
| loss          | {loss}       |
| mse           | {loss}       |
| samples       | 3.92e+07  |
| step          | 1.53e+05  |
| vb            | {loss}       |
-----------------------------
"""


def test_nan_loss_in_a_dumpkvs_box_is_nan_loss_first(tmp_path):
    text = GUIDED.format(loss="nan") + "Found NaN, decreased lg_loss_scale to -16199.354\n" * 3
    assert ranked(tmp_path, text)[:1] == ["nan-loss"]


def test_finite_dumpkvs_boxes_are_quiet(tmp_path):
    text = GUIDED.format(loss="0.0312") + GUIDED.format(loss="0.0308").replace("1.53e+05", "1.54e+05")
    assert ranked(tmp_path, text) == []


# https://github.com/PaddlePaddle/PaddleSlim/issues/1582
PADDLE = "2022-12-08 17:57:{s:02d},371-INFO: Total iter: {it}, epoch: 0, batch: {it}, loss: [{loss}]\n"


def test_one_element_array_loss_turning_nan(tmp_path):
    text = "".join(PADDLE.format(s=31 + i, it=10 * i, loss=v) for i, v in enumerate(["10.000229", "nan", "nan", "nan"]))
    assert ranked(tmp_path, text)[:1] == ["nan-loss"]


def test_nan_inside_a_multi_element_list_is_no_loss(tmp_path):
    text = "".join(PADDLE.format(s=31 + i, it=10 * i, loss=v) for i, v in enumerate(["10.0, 9.1", "nan, 8.7", "nan, 8.5"]))
    assert "nan-loss" not in ranked(tmp_path, text)


# https://github.com/WongKinYiu/yolov7/issues/251 (older YOLO table: box/obj/cls/total).
YOLO_HEAD = "     Epoch   gpu_mem       box       obj       cls     total    labels  img_size\n"
YOLO_ROW = "     0/299     18.5G {box:>9} {obj:>9} {cls:>9} {tot:>9}       540       768:   6%|▊          | {n}/234 [00:23<04:56,  1.36s/it]\n"


def test_older_yolo_table_turning_nan_in_the_first_epoch(tmp_path):
    text = YOLO_HEAD + YOLO_ROW.format(box=0.1126, obj=2.552, cls=0.4747, tot=3.139, n=1) + \
        YOLO_ROW.format(box="nan", obj=2.028, cls="nan", tot="nan", n=15)
    assert ranked(tmp_path, text)[:1] == ["nan-loss"]


def test_older_yolo_table_with_a_zero_class_loss_is_quiet(tmp_path):
    # A one-class run: `cls` is 0 by design (tests/recordings/incidents/ml_2_project_yolov5_cots_early_stopping_terminal_output).
    rows = [YOLO_ROW.format(box=b, obj=o, cls=0, tot=round(b + o, 5), n=n) for n, b, o in
            [(50, 0.0636, 0.0330), (100, 0.0480, 0.0348), (150, 0.0423, 0.0318), (200, 0.0401, 0.0309)]]
    assert ranked(tmp_path, YOLO_HEAD + "".join(rows)) == []

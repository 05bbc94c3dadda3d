"""Megatron-LM (formats.md §1.2), DeepSpeed (§1.3) and the loss-scaler messages (§1.3, §1.5, §1.10, §1.12)."""

from __future__ import annotations

import datetime as dt

from tests.metrics_util import NAN, full, rows

MEGATRON_HEAD = (
    " [2025-03-01 10:00:00.123456] iteration      100/  500000 | consumed samples:        51200 | elapsed time per "
    "iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 400.1 | learning rate: 1.500000E-04 | global batch "
    "size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | "
    "number of nan iterations:   0 |\n"
)


def test_megatron_pre_core_line(tmp_path):
    # [OBS] https://github.com/epfLLM/Megatron-LLM/issues/11
    text = (" iteration      122/  250000 | consumed samples:       124928 | elapsed time per iteration (ms): 86545.2 | "
            "learning rate: 9.150E-06 | global batch size:  1024 | lm loss: 2.504220E+00 | loss scale: 1.0 | grad norm: "
            "0.231 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
    got = rows(tmp_path, text)
    assert (122, "loss", 2.50422) in got and (122, "lr", 9.15e-06) in got and (122, "step_time_ms", 86545.2) in got
    assert len(got) == 9


def test_megatron_deepspeed_line_without_lm_loss_reads_as_nan(tmp_path):
    # [OBS] https://github.com/bigscience-workshop/Megatron-DeepSpeed/issues/396 — the loss field vanished (NaN average)
    text = (" iteration     5426/  250000 | consumed samples:        43408 | consumed tokens:     88899584 | elapsed time per "
            "iteration (ms): 4247.9 | learning rate: 2.999E-04 | global batch size:     8 | loss scale: 1.0 | grad norm: nan | "
            "actual seqlen:  2048 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: "
            "1.886 | TFLOPs: 78.46 |\n")
    got = full(tmp_path, text)
    assert (1, None, 5426, "grad_norm", NAN, "megatron") in got
    assert (1, None, 5426, "loss", NAN, "megatron_loss_absent") in got
    assert (1, None, 5426, "samples_per_s", 1.886, "megatron") in got
    assert (1, None, 5426, "tflops", 78.46, "megatron") in got
    assert (1, None, 5426, "consumed_tokens", 88899584.0, "megatron") in got


def test_megatron_skipped_iteration_explains_missing_loss(tmp_path):
    # fp16 start: every iteration of the interval skipped -> no loss field, and no NaN invented for it
    text = (" iteration        1/  500000 | consumed samples:          512 | elapsed time per iteration (ms): 9000.1 | "
            "learning rate: 0.000000E+00 | global batch size:   512 | loss scale: 4294967296.0 | number of skipped "
            "iterations:   1 | number of nan iterations:   0 |\n")
    got = rows(tmp_path, text)
    assert [r for r in got if r[1] == "loss"] == []
    assert (1, "skipped_steps", 1.0) in got and (1, "loss_scale", 4294967296.0) in got


DS_STEP = "[2021-11-26 03:07:16,494] [INFO] [logging.py:69:log_dist] [Rank 0] step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]\n"


def test_deepspeed_step_line_and_time(tmp_path):
    # [OBS] transformers#14531
    text = DS_STEP
    assert [r[2:] for r in full(tmp_path, text)] == [
        (2000, "skipped_steps_total", 1995.0, "deepspeed"), (2000, "lr", 0.001, "deepspeed")]
    from tests.metrics_util import metrics

    ts = metrics(tmp_path / "b", {"train.log": text}).get_column("ts")[0]
    assert ts == dt.datetime(2021, 11, 26, 3, 7, 16, 494000, tzinfo=dt.timezone.utc)


def test_deepspeed_log_dist_rank(tmp_path):
    # `[Rank 0]` ends the record prefix's bracket run: it names the rank, it is not swallowed.
    assert {r[1] for r in full(tmp_path, DS_STEP)} == {0}
    # A non-zero rank (log_dist(..., ranks=[-1]) prints on every rank) and `[Rank -1]` before dist init.
    text = DS_STEP.replace("[Rank 0]", "[Rank 4]") + DS_STEP.replace("[Rank 0]", "[Rank -1]")
    assert [(r[0], r[1], r[3]) for r in full(tmp_path / "b", text)] == [
        (1, 4, "skipped_steps_total"), (1, 4, "lr"), (2, None, "skipped_steps_total"), (2, None, "lr")]

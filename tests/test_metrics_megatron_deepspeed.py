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


def test_megatron_training_line_head(tmp_path):
    # [SRC] constructed from the HEAD format string (formats.md §1.2)
    assert rows(tmp_path, MEGATRON_HEAD) == [
        (100, "consumed_samples", 51200.0), (100, "step_time_ms", 1234.5), (100, "tflops", 400.1),
        (100, "lr", 1.5e-04), (100, "global_batch_size", 512.0), (100, "loss", 2.345678),
        (100, "loss_scale", 1.0), (100, "grad_norm", 0.812), (100, "skipped_steps", 0.0), (100, "nan_iterations", 0.0)]


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


def test_megatron_validation_memory_and_timers(tmp_path):
    text = (
        "-----------------------------------------------------------------------------------------\n"
        " validation loss at iteration 1000 | lm loss value: 2.123456E+00 | lm loss PPL: 8.360123E+00 | \n"
        "-----------------------------------------------------------------------------------------\n"
        "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1234.56 | max allocated: 2345.67 | reserved: 3000.00 | max reserved: 3100.00\n"
        "(min, max) time across ranks (ms):\n"
        "    forward-backward ...............................: (1234.56, 1240.01)\n"
        " validation loss at iteration 2000 on test set | lm loss value: 2.000000E+00 | lm loss PPL: 7.389056E+00 | \n"
    )
    assert full(tmp_path, text) == [
        (2, None, 1000, "eval_loss", 2.123456, "megatron_validation"),
        (2, None, 1000, "eval_ppl", 8.360123, "megatron_validation"),
        (4, 0, 10, "mem_allocated_mib", 1234.56, "megatron_memory"),
        (4, 0, 10, "mem_max_mib", 2345.67, "megatron_memory"),
        (4, 0, 10, "mem_reserved_mib", 3000.0, "megatron_memory"),
        (4, 0, 10, "mem_max_reserved_mib", 3100.0, "megatron_memory"),
        # timers carry the step of the nearest earlier step line of the same (unknown) rank
        (6, None, 1000, "timer_forward_backward_ms", 1240.01, "megatron_timers"),
        (6, None, 1000, "timer_forward_backward_min_ms", 1234.56, "megatron_timers"),
        (7, None, 2000, "test_loss", 2.0, "megatron_validation"),
        (7, None, 2000, "test_ppl", 7.389056, "megatron_validation"),
    ]


DS_STEP = "[2021-11-26 03:07:16,494] [INFO] [logging.py:69:log_dist] [Rank 0] step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]\n"


def test_deepspeed_step_line_and_time(tmp_path):
    # [OBS] transformers#14531
    text = DS_STEP
    assert [r[2:] for r in full(tmp_path, text)] == [
        (2000, "skipped_steps_total", 1995.0, "deepspeed"), (2000, "lr", 0.001, "deepspeed")]
    from tests.metrics_util import metrics

    ts = metrics(tmp_path / "b", {"train.log": text}).get_column("ts")[0]
    assert ts == dt.datetime(2021, 11, 26, 3, 7, 16, 494000, tzinfo=dt.timezone.utc)


def test_deepspeed_timer_lines_every_era(tmp_path):
    text = (
        # [OBS] deepspeedai/DeepSpeed#5779 (>= v0.8)
        "[2024-07-17 19:53:24,981] [INFO] [timer.py:258:stop] epoch=0/micro_step=4500/global_step=4500, RunningAvgSamplesPerSec=16.124955167964504, CurrSamplesPerSec=16.807402094161112, MemAllocated=0.02GB, MaxMemAllocated=0.97GB\n"
        # [OBS] transformers#14531 (<= v0.6)
        "[2021-11-26 03:07:16,495] [INFO] [timer.py:181:stop] 0/2000, SamplesPerSec=9.526738918021234\n"
        # [OBS] deepspeedai/DeepSpeed#1825 (v0.5-v0.6 with memory)
        "[2022-03-11 02:06:58,985] [INFO] [timer.py:189:stop] 0/40, SamplesPerSec=83.48609168106144, MemAllocated=0.26GB, MaxMemAllocated=9.02GB\n"
    )
    assert rows(tmp_path, text) == [
        (4500, "samples_per_s", 16.807402094161112), (4500, "samples_per_s_avg", 16.124955167964504),
        (4500, "mem_allocated_mib", 0.02 * 1024), (4500, "mem_max_mib", 0.97 * 1024),
        (2000, "samples_per_s", 9.526738918021234),
        (40, "samples_per_s", 83.48609168106144), (40, "mem_allocated_mib", 0.26 * 1024), (40, "mem_max_mib", 9.02 * 1024)]


def test_deepspeed_wall_clock_memory_and_pipeline(tmp_path):
    text = (
        "[2023-04-28 06:59:46,878] [INFO] [logging.py:96:log_dist] [Rank 0] step=510, skipped=8, lr=[2e-05], mom=[(0.9, 0.999)]\n"
        "[2023-04-28 06:59:46,879] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd_microstep: 12.34 | bwd_microstep: 45.67 | bwd_inner_microstep: 40.01 | bwd_allreduce_microstep: 5.55 | step_microstep: 3.21\n"
        # [OBS] deepspeedai/DeepSpeed#2302
        "[2022-11-11 08:40:17,899] [INFO] [utils.py:832:see_memory_usage] MA 0.02 GB         Max_MA 0.08 GB         CA 0.08 GB         Max_CA 0 GB \n"
        "[2022-11-11 08:40:17,899] [INFO] [utils.py:837:see_memory_usage] CPU Virtual Memory:  used = 4.07 GB, percent = 32.1%\n"
        "steps: 100 loss: 2.3456 iter time (s): 1.234 samples/sec: 207.456\n"
    )
    assert rows(tmp_path, text) == [
        (510, "skipped_steps_total", 8.0), (510, "lr", 2e-05),
        (510, "time_fwd_microstep_ms", 12.34), (510, "time_bwd_microstep_ms", 45.67),
        (510, "time_bwd_inner_microstep_ms", 40.01), (510, "time_bwd_allreduce_microstep_ms", 5.55),
        (510, "time_step_microstep_ms", 3.21),
        (510, "mem_allocated_mib", 0.02 * 1024), (510, "mem_max_mib", 0.08 * 1024),
        (510, "mem_reserved_mib", 0.08 * 1024), (510, "mem_max_reserved_mib", 0.0),
        (510, "host_mem_used_mib", 4.07 * 1024), (510, "host_mem_pct", 32.1),
        (100, "loss", 2.3456), (100, "step_time_ms", 1.234 * 1000), (100, "samples_per_s", 207.456)]


def test_deepspeed_overflow_lines_every_era(tmp_path):
    text = (
        # [OBS] deepspeedai/DeepSpeed#931 (>= v0.8.3, int scales, hysteresis branch)
        "[2023-04-28 06:51:29,903] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1\n"
        "[2023-04-28 06:51:30,648] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768\n"
        # [OBS] transformers#9996 (<= v0.6, [deepscale], floats)
        "[2021-02-01 10:00:00,000] [INFO] [stage2.py:1357:step] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 134217728.0, reducing to 67108864.0\n"
        # bf16: no scale printed
        "[2024-01-01 00:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step.\n"
        "Reducing dynamic loss scale from 1024.0 to 512.0\n"
        "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n"
    )
    assert rows(tmp_path, text) == [
        (None, "loss_scale", 65536.0), (None, "skipped_steps", 1.0),
        (None, "loss_scale", 32768.0), (None, "skipped_steps", 1.0),
        (None, "loss_scale", 67108864.0), (None, "skipped_steps", 1.0),
        (None, "skipped_steps", 1.0),
        (None, "loss_scale", 512.0)]


def test_apex_fairseq_colossal_scaler_messages(tmp_path):
    text = (
        "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n"  # apex amp [SRC]
        "Gradient overflow.  Skipping step, reducing loss scale to 16384.0\n"  # apex FP16_Optimizer [SRC]
        "NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 64.0\n"  # fairseq [SRC]
        "NOTE: overflow detected, setting loss scale to: 32.0\n"  # fairseq older [OBS fairseq#1967]
        "AMP: overflow detected, setting scale to to 16.0\n"  # fairseq amp_optimizer [SRC]
        "Overflow occurs, the loss scale is adjusted to 8.0\n"  # Colossal-AI [SRC]
        "No overflow for consecutive 1000 steps, the loss scale is adjusted to 16.0\n"
        "Found overflow. Skip step\n"
        "Grad overflow on iteration 1234\n"  # DeepSpeed fp16 optimizer [SRC]
    )
    assert rows(tmp_path, text) == [
        (None, "loss_scale", 32768.0), (None, "skipped_steps", 1.0),
        (None, "loss_scale", 16384.0), (None, "skipped_steps", 1.0),
        (None, "loss_scale", 64.0), (None, "skipped_steps", 1.0),
        (None, "loss_scale", 32.0), (None, "skipped_steps", 1.0),
        (None, "loss_scale", 16.0), (None, "skipped_steps", 1.0),
        (None, "loss_scale", 8.0), (None, "skipped_steps", 1.0),
        (None, "loss_scale", 16.0),
        (None, "skipped_steps", 1.0),
        (1234, "skipped_steps", 1.0)]


def test_deepspeed_log_dist_rank(tmp_path):
    # `[Rank 0]` ends the record prefix's bracket run: it names the rank, it is not swallowed.
    assert {r[1] for r in full(tmp_path, DS_STEP)} == {0}
    # A non-zero rank (log_dist(..., ranks=[-1]) prints on every rank) and `[Rank -1]` before dist init.
    text = DS_STEP.replace("[Rank 0]", "[Rank 4]") + DS_STEP.replace("[Rank 0]", "[Rank -1]")
    assert [(r[0], r[1], r[3]) for r in full(tmp_path / "b", text)] == [
        (1, 4, "skipped_steps_total"), (1, 4, "lr"), (2, None, "skipped_steps_total"), (2, None, "lr")]

"""Real logs pasted in public GitHub issues (each test cites its thread): they must ingest to the right rows."""

from __future__ import annotations

from tests.metrics_util import NAN, full, rows


def test_colossalai_bar_glued_to_deepspeed_overflow(tmp_path):
    # https://github.com/hpcaitech/ColossalAI-Examples/issues/37 — both the bar postfix and the glued
    # overflow message are read, each once.
    text = (
        "[Epoch 0 / Train]:   0%|          | 1/8614 [00:00<1:03:35,  2.26it/s, loss=265.25, lr=2.5e-05, throughput=4.5244][deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4294967296, reducing to 2147483648.0\n"
        "[Epoch 0 / Train]:   0%|          | 2/8614 [00:00<1:00:07,  2.39it/s, loss=nan, lr=2.5e-05, throughput=4.9813][deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 2147483648.0, reducing to 1073741824.0\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 1, "loss", 265.25, "tqdm_postfix"), (1, None, 1, "lr", 2.5e-05, "tqdm_postfix"),
        (1, None, 1, "throughput", 4.5244, "tqdm_postfix"),
        (1, None, 1, "loss_scale", 2147483648.0, "loss_scaler"), (1, None, 1, "skipped_steps", 1.0, "loss_scaler"),
        (2, None, 2, "loss", NAN, "tqdm_postfix"), (2, None, 2, "lr", 2.5e-05, "tqdm_postfix"),
        (2, None, 2, "throughput", 4.9813, "tqdm_postfix"),
        (2, None, 2, "loss_scale", 1073741824.0, "loss_scaler"), (2, None, 2, "skipped_steps", 1.0, "loss_scaler"),
    ]


def test_hf_bar_glued_to_deepspeed_log_lines(tmp_path):
    # https://github.com/dredwardhyde/gpt-neo-fine-tuning-example/issues/7 (DeepSpeed <= 0.6 inside HF Trainer)
    text = (
        "  0%|                                      | 9/63645 [00:19<37:53:00,  2.14s/it][2021-06-08 12:02:45,001] [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 16777216.0, reducing to 8388608.0\n"
        "[2021-06-08 12:02:45,002] [INFO] [timer.py:157:stop] 0/10, SamplesPerSec=1.8825260836384787\n"
        "  0%|                                     | 10/63645 [00:21<37:46:42,  2.14s/it][2021-06-08 12:02:47,123] [INFO] [stage3.py:2323:_overflow_clean_up] [deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 8388608.0, reducing to 4194304.0\n"
    )
    assert rows(tmp_path, text) == [
        (None, "loss_scale", 8388608.0), (None, "skipped_steps", 1.0),
        (10, "samples_per_s", 1.8825260836384787),
        (10, "loss_scale", 4194304.0), (10, "skipped_steps", 1.0)]


def test_hf_dict_between_bar_lines_gets_the_bar_step(tmp_path):
    # https://github.com/ymcui/Chinese-LLaMA-Alpaca/issues/534 (\r turned into line breaks)
    text = (
        " 12%|\u2588\u258f        | 319/2724 [11:47:40<88:43:09, 132.80s/it]\n"
        " 12%|\u2588\u258f        | 320/2724 [11:49:53<88:41:03, 132.80s/it]\n"
        "                                                         \n"
        "{'loss': 1.6693, 'learning_rate': 0.0001977758764447498, 'epoch': 0.23}\n"
        "\n"
        " 12%|\u2588\u258f        | 320/2724 [11:49:53<88:41:03, 132.80s/it]\n"
        " 12%|\u2588\u258f        | 321/2724 [11:52:06<88:39:38, 132.82s/it]\n"
    )
    assert rows(tmp_path, text) == [(320, "loss", 1.6693), (320, "lr", 0.0001977758764447498), (320, "epoch", 0.23)]


def test_hf_dict_below_its_bar_line(tmp_path):
    # https://github.com/axolotl-ai-cloud/axolotl/issues/592 (terminal paste: bar line, dict, then log lines)
    text = (
        " 30%|\u2588\u2588\u2588\u258b       | 258/873 [22:15<43:27,  4.24s/it]\n"
        "\n"
        "\n"
        " 30%|\u2588\u2588\u2588\u2589       | 260/873 [22:24<43:01,  4.21s/it]\n"
        "{'loss': 1.0226, 'learning_rate': 0.00014229432213209734, 'epoch': 0.89}\n"
        "[2023-09-17 13:15:13,336] [INFO] [axolotl.utils.dataloader._len_est:264] [PID:11100] [RANK:0] packing_efficiency_estimate: 0.77 total_num_tokens per device: 26275\n"
    )
    assert rows(tmp_path, text) == [(260, "loss", 1.0226), (260, "lr", 0.00014229432213209734), (260, "epoch", 0.89)]


def test_trl_dpo_dict_keeps_its_own_keys(tmp_path):
    # https://github.com/axolotl-ai-cloud/axolotl/pull/1735 (DPO-style keys with slashes)
    text = ("{'loss': 0.4766, 'grad_norm': 5.125, 'learning_rate': 0.00015594912061278626, 'rewards/chosen': -1.9593877792358398, "
            "'rewards/rejected': -3.4484448432922363, 'rewards/accuracies': 0.5, 'epoch': 1.0}\n")
    assert rows(tmp_path, text) == [
        (None, "loss", 0.4766), (None, "grad_norm", 5.125), (None, "lr", 0.00015594912061278626),
        (None, "rewards/chosen", -1.9593877792358398), (None, "rewards/rejected", -3.4484448432922363),
        (None, "rewards/accuracies", 0.5), (None, "epoch", 1.0)]


def test_megatron_moe_line_with_timestamp(tmp_path):
    # https://github.com/NVIDIA/Megatron-LM/issues/756 (core_v0.6 timestamp, MoE aux loss, num zeros)
    text = (" [2024-04-06 02:59:36] iteration       43/     100 | consumed samples:         5504 | elapsed time per iteration (ms): 5444.9 | "
            "throughput per GPU (TFLOP/s/GPU): 239.8 | learning rate: 8.600000E-06 | global batch size:   128 | lm loss: 1.825991E+00 | "
            "load_balancing_loss: 1.019746E+00 | loss scale: 1.0 | grad norm: 1.426 | num zeros: 0.0 | number of skipped iterations:   0 | "
            "number of nan iterations:   0 |\n")
    assert rows(tmp_path, text) == [
        (43, "consumed_samples", 5504.0), (43, "step_time_ms", 5444.9), (43, "tflops", 239.8), (43, "lr", 8.6e-06),
        (43, "global_batch_size", 128.0), (43, "loss", 1.825991), (43, "load_balancing_loss", 1.019746),
        (43, "loss_scale", 1.0), (43, "grad_norm", 1.426), (43, "num_zeros", 0.0), (43, "skipped_steps", 0.0),
        (43, "nan_iterations", 0.0)]


def test_deepspeed_timer_after_a_launcher_prefix(tmp_path):
    # https://github.com/deepspeedai/DeepSpeed/issues/2629 (v0.7: `stdout: ` prefix from the caller's launcher)
    text = ("stdout: [2022-12-20 08:26:26,101] [INFO] [timer.py:197:stop] 0/17, RunningAvgSamplesPerSec=158.31157878546472, "
            "CurrSamplesPerSec=159.628891629629, MemAllocated=1.75GB, MaxMemAllocated=2.6GB\n")
    assert rows(tmp_path, text) == [
        (17, "samples_per_s", 159.628891629629), (17, "samples_per_s_avg", 158.31157878546472),
        (17, "mem_allocated_mib", 1.75 * 1024), (17, "mem_max_mib", 2.6 * 1024)]


def test_mindyolo_hand_printed_lines(tmp_path):
    # https://github.com/mindspore-lab/mindyolo/issues/402 (a loss explosion; one line per step, ms unit after a space)
    text = (
        "2024-12-25 09:58:42,787 [INFO] Epoch 1/200, Step 100/3995, imgsize (640, 640), loss: 11.6707, lbox: 3.6262, lcls: 5.5689, dfl: 2.4756, cur_lr: 0.09924906492233276\n"
        "2024-12-25 10:00:57,655 [INFO] Epoch 1/200, Step 300/3995, imgsize (640, 640), loss: 8712.5938, lbox: 4.1268, lcls: 8705.2168, dfl: 3.2503, cur_lr: 0.09774718433618546\n"
    )
    assert rows(tmp_path, text) == [
        (100, "epoch", 1.0), (100, "loss", 11.6707), (100, "lbox", 3.6262), (100, "lcls", 5.5689), (100, "dfl", 2.4756),
        (100, "cur_lr", 0.09924906492233276),
        (300, "epoch", 1.0), (300, "loss", 8712.5938), (300, "lbox", 4.1268), (300, "lcls", 8705.2168), (300, "dfl", 3.2503),
        (300, "cur_lr", 0.09774718433618546)]


def test_open_clip_train_line(tmp_path):
    # https://github.com/mlfoundations/open_clip/pull/129
    text = "Train Epoch: 1 [ 32833536/407371776 (8%)] Loss: 0.40883 (0.4749) Data (t): 0.080 Batch (t): 1.762s, 37194/s LR: 0.000156 Logit Scale: 100.000\n"
    assert rows(tmp_path, text) == [
        (None, "epoch", 1.0), (None, "loss", 0.40883), (None, "data_time_ms", 0.080 * 1000),
        (None, "step_time_ms", 1.762 * 1000), (None, "lr", 0.000156), (None, "logit_scale", 100.0)]


def test_hand_printed_epoch_summaries(tmp_path):
    # https://github.com/dk-liang/CLTR/issues/15 (bracketed epoch, tab-separated k=v)
    # https://github.com/caiyuanhao1998/MST/issues/7 (`Avg. Loss:`; the psnr line has no loss: not a metric line here)
    text = (
        "2023-06-24 05:36:13,516 - CLTR - INFO - Training Epoch:[844/1500]\t loss=10.32482\t lr=0.000100\t epoch_time=150.973\n"
        "2022-07-20 11:54:51,376 - INFO: ===> Epoch 132 Complete: Avg. Loss: 0.014821 time: 666.83\n"
        "2022-07-20 11:54:51,890 - INFO: ===> Epoch 132: testing psnr = 34.28, ssim = 0.937, time: 0.02\n"
    )
    assert rows(tmp_path, text) == [
        (None, "epoch", 844.0), (None, "loss", 10.32482), (None, "lr", 0.0001), (None, "epoch_time", 150.973),
        (None, "epoch", 132.0), (None, "avg_loss", 0.014821), (None, "epoch_time_ms", 666.83 * 1000)]


def test_nemo_bar_and_nemo2_lines(tmp_path):
    # https://github.com/NVIDIA/NeMo-Framework-Launcher/issues/55 (NeMo 1.x: Lightning bar, running-mean `loss`)
    # https://github.com/NVIDIA-BioNeMo/bionemo-recipes/pull/740 (NeMo 2 / Megatron-bridge progress lines)
    text = (
        "Epoch 0:   1%|          | 795/77225 [9:07:58<878:01:48, 41.36s/it, loss=3.1, v_num=, reduced_train_loss=3.090, global_step=794.0, consumed_samples=1.63e+6]\n"
        "Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 | train_step_timing in s: 0.03146 | val_loss: 4.106\n"
    )
    assert rows(tmp_path, text) == [
        (794, "loss_avg", 3.1), (794, "loss", 3.09), (794, "consumed_samples", 1.63e+6),
        (120, "epoch", 0.0), (120, "lr", 3e-05), (120, "consumed_samples", 121.0), (120, "global_batch_size", 1.0),
        (120, "loss", 1.233), (120, "step_time_ms", 0.03146 * 1000), (120, "eval_loss", 4.106)]

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


def test_speechbrain_epoch_lines(tmp_path):
    # https://github.com/speechbrain/speechbrain/issues/980 (`lr: 7.46e-04` holds a `-`: the ` - ` sections
    # still split), https://github.com/speechbrain/speechbrain/pull/1892 (`steps: N` is the step, the
    # optimizer's name is no metric), and the closing test-set summary line (no rows).
    text = (
        "epoch: 1, lr: 7.46e-04 - train loss: 5.50 - valid loss: 1.56, valid ErrorRate: 4.64e-02\n"
        "epoch: 25, lr: 3.73e-04, steps: 44925, optimizer: Adam - train loss: 10.68 - valid loss: 7.27, valid ACC: 9.69e-01"
        + " " * 40 + "\n"
        "Epoch loaded: 30 - test loss: 7.41, test ACC: 9.69e-01, test WER: 8.92\n"
    )
    assert full(tmp_path, text) == [
        (1, None, None, "epoch", 1.0, "speechbrain"), (1, None, None, "lr", 0.000746, "speechbrain"),
        (1, None, None, "loss", 5.5, "speechbrain"), (1, None, None, "eval_loss", 1.56, "speechbrain"),
        (1, None, None, "eval_errorrate", 0.0464, "speechbrain"),
        (2, None, 44925, "epoch", 25.0, "speechbrain"), (2, None, 44925, "lr", 0.000373, "speechbrain"),
        (2, None, 44925, "loss", 10.68, "speechbrain"), (2, None, 44925, "eval_loss", 7.27, "speechbrain"),
        (2, None, 44925, "eval_acc", 0.969, "speechbrain")]


def test_speechbrain_console_with_logger_prefix_and_bars(tmp_path):
    # https://github.com/speechbrain/speechbrain/pull/2216: the console form (`speechbrain.utils.train_logger - `);
    # the epoch's `train loss` repeats the bar's last `train_loss=` at the same step: the bar's row stays.
    text = (
        "speechbrain.utils.epoch_loop - Going into epoch 2\n"
        "100%|█████████████████████████████████████████████████████████████████| 190/190 [03:02<00:00,  1.04it/s, train_loss=0.726]\n"
        "100%|███████████████████████████████████████████████████████████████████████████████████| 137/137 [02:17<00:00,  1.00s/it]\n"
        "speechbrain.nnet.schedulers - Changing lr from 1 to 0.8\n"
        "speechbrain.utils.train_logger - epoch: 2, lr: 1.00e+00 - train loss: 7.26e-01 - valid loss: 1.27, valid CER: 1.54e+02, valid WER: 1.54e+02\n"
    )
    assert full(tmp_path, text) == [
        (2, None, 190, "loss", 0.726, "tqdm_postfix"),
        (5, None, 190, "epoch", 2.0, "speechbrain"), (5, None, 190, "lr", 1.0, "speechbrain"),
        (5, None, 190, "eval_loss", 1.27, "speechbrain"),
        (5, None, 190, "eval_cer", 154.0, "speechbrain"), (5, None, 190, "eval_wer", 154.0, "speechbrain")]


def test_espnet2_batch_range_lines_and_epoch_results(tmp_path):
    # https://github.com/espnet/espnet/issues/2674: the step is the range's last batch, continued across
    # epochs (epoch 2's `1-375batch` follows epoch 1's last logged batch 7500); the `results` line gives only
    # its `[valid]` part (eval_loss, step carried); `time=1 minute and 42.6 seconds` and counts are no metric.
    text = (
        "[PC] 2020-11-11 16:30:14,840 (trainer:486) INFO: 1epoch:train:7126-7500batch: iter_time=0.001, forward_time=0.005, "
        "loss=2.339, backward_time=0.005, optim_step_time=1.963e-04, lr_0=0.100, train_time=0.014\n"
        "[PC] 2020-11-11 16:30:18,406 (trainer:243) INFO: 1epoch results: [train] iter_time=0.001, forward_time=0.005, "
        "loss=2.853, backward_time=0.005, optim_step_time=1.974e-04, lr_0=0.100, train_time=0.013, time=1 minute and 42.6 "
        "seconds, total_count=7507, [valid] loss=2.387, time=3 seconds, total_count=240, [att_plot] time=0.28 seconds, total_count=0\n"
        "[PC] 2020-11-11 16:30:18,969 (trainer:286) INFO: The best model has been updated: valid.loss\n"
        "[PC] 2020-11-11 16:30:18,969 (trainer:184) INFO: 2/20epoch started. Estimated time to finish: 33 minutes and 42.59 seconds\n"
        "[PC] 2020-11-11 16:30:24,312 (trainer:486) INFO: 2epoch:train:1-375batch: iter_time=0.001, forward_time=0.005, "
        "loss=2.313, backward_time=0.005, optim_step_time=2.000e-04, lr_0=0.100, train_time=0.014\n"
    )
    got = full(tmp_path, text)
    assert [(ln, s, n) for ln, _, s, n, _, _ in got] == [
        (1, 7500, "data_time_ms"), (1, 7500, "forward_time_ms"), (1, 7500, "loss"), (1, 7500, "backward_time_ms"),
        (1, 7500, "optim_step_time_ms"), (1, 7500, "lr"), (1, 7500, "step_time_ms"),
        (2, 7500, "eval_loss"),
        (5, 7875, "data_time_ms"), (5, 7875, "forward_time_ms"), (5, 7875, "loss"), (5, 7875, "backward_time_ms"),
        (5, 7875, "optim_step_time_ms"), (5, 7875, "lr"), (5, 7875, "step_time_ms")]
    values = {(ln, n): v for ln, _, _, n, v, _ in got}
    assert values[(1, "loss")] == 2.339 and values[(1, "lr")] == 0.1 and values[(2, "eval_loss")] == 2.387
    assert values[(1, "step_time_ms")] == 14.0 and values[(1, "data_time_ms")] == 1.0
    assert abs(values[(1, "optim_step_time_ms")] - 0.1963) < 1e-12 and values[(5, "loss")] == 2.313


def test_espnet2_asr_line_with_host_rank_prefix(tmp_path):
    # https://github.com/espnet/espnet/issues/2183 (`[gpu01:0/2]` host prefix; ASR losses and accuracy).
    text = (
        "[gpu01:0/2] 2020-07-19 08:54:09,601 (trainer:464) INFO: 1epoch:train:683-1364batch: iter_time=5.862e-05, "
        "forward_time=0.134, loss=68.722, loss_att=65.930, loss_ctc=75.235, acc=0.125, backward_time=0.111, "
        "optim_step_time=0.030, lr_0=1.028e-05, train_time=1.790\n"
    )
    got = {n: v for _, n, v in rows(tmp_path, text)}
    assert {s for s, _, _ in rows(tmp_path / "again", text)} == {1364}
    assert got == {"data_time_ms": 5.862e-05 * 1000.0, "forward_time_ms": 134.0, "loss": 68.722, "loss_att": 65.93,
                   "loss_ctc": 75.235, "acc": 0.125, "backward_time_ms": 111.0, "optim_step_time_ms": 30.0,
                   "lr": 1.028e-05, "step_time_ms": 1790.0}


def test_icefall_batch_lines_current_and_running_losses(tmp_path):
    # https://github.com/k2-fsa/icefall/pull/399: `loss[..]` is the batch's, `tot_loss[..]` the running
    # average (`*_avg`); frame counts are no metric. https://github.com/k2-fsa/icefall/issues/320: epoch 0
    # ends at batch 550 here, so epoch 1's batch 5 is step 555.
    text = (
        "2022-04-21 06:24:05,162 INFO [train.py:518] Epoch 0, batch 550, loss[ctc_loss=1.043, att_loss=0.9977, loss=1.007, "
        "over 2480 frames.], tot_loss[ctc_loss=1.099, att_loss=1.079, loss=1.083, over 447367.3462596891 frames.], batch size: 24\n"
        "2022-06-08 08:01:22,072 INFO [train.py:815] Epoch 1, batch 5, loss[loss=0.6028, simple_loss=1.206, pruned_loss=9.481, "
        "over 5392.00 frames.], tot_loss[loss=0.7444, simple_loss=1.489, pruned_loss=nan, over 31213.18 frames.], batch size: 18, lr: 3.00e-03\n"
    )
    assert rows(tmp_path, text) == [
        (550, "ctc_loss", 1.043), (550, "att_loss", 0.9977), (550, "loss", 1.007),
        (550, "ctc_loss_avg", 1.099), (550, "att_loss_avg", 1.079), (550, "loss_avg", 1.083), (550, "batch_size", 24.0),
        (555, "loss", 0.6028), (555, "simple_loss", 1.206), (555, "pruned_loss", 9.481),
        (555, "loss_avg", 0.7444), (555, "simple_loss_avg", 1.489), (555, "pruned_loss_avg", NAN),
        (555, "batch_size", 18.0), (555, "lr", 0.003)]


def test_ddim_style_logging_prefix(tmp_path):
    # https://github.com/JegZheng/truncated-diffusion-probabilistic-models/issues/3: DDIM's
    # `%(levelname)s - %(filename)s - %(asctime)s - ` prefix is cut, so the line is read (it was not before).
    text = (
        "INFO - diffusion.py - 2023-01-04 22:14:28,975 - Epoch: 0, step: 3, loss: 1856.43701171875, implicit loss: "
        "0.7036036252975464, data time: 0.0358583132425944\n"
        "INFO - diffusion.py - 2023-01-04 22:14:30,250 - Epoch: 0, step: 5, loss: nan, implicit loss: nan, data time: 0.02159852981567383\n"
    )
    assert rows(tmp_path, text) == [
        (3, "epoch", 0.0), (3, "loss", 1856.43701171875), (3, "implicit_loss", 0.7036036252975464),
        (3, "data_time_ms", 0.0358583132425944 * 1000.0),
        (5, "epoch", 0.0), (5, "loss", NAN), (5, "implicit_loss", NAN), (5, "data_time_ms", 0.02159852981567383 * 1000.0)]


def test_deepspeed_pipeline_steps_beside_log_dist_lines(tmp_path):
    # https://github.com/tdrussell/diffusion-pipe/issues/531: the pipeline engine's `steps: N loss: ..` lines and
    # `log_dist` step lines alternate; each metric once, NaN kept.
    text = (
        "steps: 17 loss: 0.5994 iter time (s): 3.162 samples/sec: 0.316\n"
        "[2026-07-30 09:16:32,952] [INFO] [logging.py:123:log_dist] [Rank 0] step=18, skipped=0, lr=[1e-06], mom=[0.0]\n"
        "steps: 18 loss: nan iter time (s): 3.235 samples/sec: 0.309\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 17, "loss", 0.5994, "deepspeed_pipe"), (1, None, 17, "step_time_ms", 3162.0, "deepspeed_pipe"),
        (1, None, 17, "samples_per_s", 0.316, "deepspeed_pipe"),
        (2, 0, 18, "skipped_steps_total", 0.0, "deepspeed"), (2, 0, 18, "lr", 1e-06, "deepspeed"),
        (3, None, 18, "loss", NAN, "deepspeed_pipe"), (3, None, 18, "step_time_ms", 3235.0, "deepspeed_pipe"),
        (3, None, 18, "samples_per_s", 0.309, "deepspeed_pipe")]


def test_undescribed_bar_restarted_each_epoch_counts_on(tmp_path):
    # https://github.com/speechbrain/speechbrain/pull/2216: one finished bar per epoch (190 batches), pasted
    # without its redraws. Epoch 2's bar is steps 191..380, not step 190 again (before, epoch 1's loss was
    # dropped as a redraw of the same step); the validation bar (137 batches, no postfix) is another bar.
    text = (
        "speechbrain.utils.epoch_loop - Going into epoch 1\n"
        "100%|█████████████████████████████████████████████████████████████████| 190/190 [03:08<00:00,  1.01it/s, train_loss=0.945]\n"
        "100%|███████████████████████████████████████████████████████████████████████████████████| 137/137 [01:43<00:00,  1.33it/s]\n"
        "speechbrain.utils.train_logger - epoch: 1, lr: 1.00e+00 - train loss: 9.45e-01 - valid loss: 1.23, valid CER: 35.42, valid WER: 39.14\n"
        "speechbrain.utils.epoch_loop - Going into epoch 2\n"
        "100%|█████████████████████████████████████████████████████████████████| 190/190 [03:02<00:00,  1.04it/s, train_loss=0.726]\n"
        "100%|███████████████████████████████████████████████████████████████████████████████████| 137/137 [02:17<00:00,  1.00s/it]\n"
    )
    assert [(ln, s, n, v) for ln, _, s, n, v, _ in full(tmp_path, text) if n == "loss"] == [
        (2, 190, "loss", 0.945), (6, 380, "loss", 0.726)]  # line 4's `train loss` repeats line 2's bar: dropped


def test_total_less_bar_with_loss_description_restarted_each_epoch(tmp_path):
    # https://github.com/primepake/wav2lip_288x288/issues/33: `Loss: x: : 11it [..]`, one line per epoch.
    text = (
        "Loss: 0.5212869264862754: : 11it [00:06,  1.59it/s]\n"
        "Loss: 0.516353040933609: : 11it [00:06,  1.66it/s] \n"
        "Loss: 0.506797579201785: : 11it [00:06,  1.58it/s] \n"
    )
    assert rows(tmp_path, text) == [(11, "loss", 0.5212869264862754), (22, "loss", 0.516353040933609), (33, "loss", 0.506797579201785)]


def test_diffusers_steps_bar_nan_from_the_first_step(tmp_path):
    # https://github.com/replicate/dreambooth/issues/31: `Steps:` bar, loss NaN at once; the `0/100` state (its
    # postfix set before the first update) is not a step.
    text = (
        "Steps:   0%|          | 0/100 [00:00<?, ?it/s]\n"
        "Steps:   0%|          | 0/100 [00:09<?, ?it/s, loss=nan, lr=1e-6]\n"
        "Steps:   1%|          | 1/100 [00:09<16:00,  9.70s/it, loss=nan, lr=1e-6]\n"
        "Steps:   2%|▏         | 2/100 [00:09<06:47,  4.16s/it, loss=nan, lr=1e-6]\n"
    )
    assert rows(tmp_path, text) == [(1, "loss", NAN), (1, "lr", 1e-06), (2, "loss", NAN), (2, "lr", 1e-06)]


def test_rvc_step_lr_pair_then_loss_components(tmp_path):
    # https://github.com/RVC-Project/Retrieval-based-Voice-Conversion-WebUI/issues/507: the logger name holds
    # `-` (`INFO:Kobo-Kanaeru-First-Try:` is a logging prefix), `[global_step, lr]` gives the step and lr, the
    # `loss_*=` line after it takes that step; epoch banners and `Train Epoch: N [1%]` give nothing.
    text = (
        "INFO:torch.nn.parallel.distributed:Reducer buckets have been rebuilt in this iteration.\n"
        "INFO:Kobo-Kanaeru-First-Try:====> Epoch: 1 [2023-06-11 08:52:05] | (1:32:29.395655)\n"
        "INFO:Kobo-Kanaeru-First-Try:Train Epoch: 2 [1%]\n"
        "INFO:Kobo-Kanaeru-First-Try:[200, 9.99875e-05]\n"
        "INFO:Kobo-Kanaeru-First-Try:loss_disc=3.859, loss_gen=3.076, loss_fm=10.436,loss_mel=21.974, loss_kl=1.270\n"
        "INFO:Kobo-Kanaeru-First-Try:====> Epoch: 2 [2023-06-11 10:25:02] | (1:32:56.852602)\n"
        "INFO:Kobo-Kanaeru-First-Try:[400, 9.99750015625e-05]\n"
        "INFO:Kobo-Kanaeru-First-Try:loss_disc=nan, loss_gen=nan, loss_fm=nan,loss_mel=21.974, loss_kl=9.000\n"
    )
    assert full(tmp_path, text) == [
        (4, None, 200, "lr", 9.99875e-05, "vits"),
        (5, None, 200, "loss_disc", 3.859, "generic"), (5, None, 200, "loss_gen", 3.076, "generic"),
        (5, None, 200, "loss_fm", 10.436, "generic"), (5, None, 200, "loss_mel", 21.974, "generic"),
        (5, None, 200, "loss_kl", 1.27, "generic"),
        (7, None, 400, "lr", 9.99750015625e-05, "vits"),
        (8, None, 400, "loss_disc", NAN, "generic"), (8, None, 400, "loss_gen", NAN, "generic"),
        (8, None, 400, "loss_fm", NAN, "generic"), (8, None, 400, "loss_mel", 21.974, "generic"),
        (8, None, 400, "loss_kl", 9.0, "generic")]


def test_two_item_lists_and_loss_scale_alone_are_not_metrics(tmp_path):
    # Near misses of the VITS pair and of `loss_<part>=`: a list of two counts, a list whose second item is
    # not a learning rate, a bare loss-scale setting.
    text = "[3, 5]\n[200, 1.5]\nloss_scale=1024\n"
    assert rows(tmp_path, text) == []


SB3_BOX = (
    "-----------------------------------------\n"
    "| time/                   |             |\n"
    "|    fps                  | 1284        |\n"
    "|    iterations           | 2           |\n"
    "|    time_elapsed         | 3           |\n"
    "|    total_timesteps      | 4096        |\n"
    "| train/                  |             |\n"
    "|    approx_kl            | 0.015479716 |\n"
    "|    clip_fraction        | 0.118       |\n"
    "|    clip_range           | 0.2         |\n"
    "|    entropy_loss         | -0.685      |\n"
    "|    explained_variance   | -171        |\n"
    "|    learning_rate        | 0.0003      |\n"
    "|    loss                 | 6.04        |\n"
    "|    n_updates            | 10          |\n"
    "|    policy_gradient_loss | -0.0183     |\n"
    "|    value_loss           | 48.8        |\n"
    "-----------------------------------------\n"
)


def test_stable_baselines3_boxes_read_with_total_timesteps_as_step(tmp_path):
    # https://github.com/DLR-RM/stable-baselines3/issues/156 (PPO, no rollout/ section) and
    # https://github.com/DLR-RM/rl-baselines3-zoo/pull/521 (with rollout/, a second box right after the first).
    box2 = (
        "---------------------------------------\n"
        "| rollout/                |           |\n"
        "|    ep_len_mean          | 200       |\n"
        "|    ep_rew_mean          | -213      |\n"
        "| time/                   |           |\n"
        "|    fps                  | 8507      |\n"
        "|    iterations           | 18        |\n"
        "|    time_elapsed         | 8         |\n"
        "|    total_timesteps      | 73728     |\n"
        "| train/                  |           |\n"
        "|    loss                 | nan       |\n"
        "|    n_updates            | 170       |\n"
        "---------------------------------------\n"
    )
    assert full(tmp_path, SB3_BOX + box2) == [
        (3, None, 4096, "time/fps", 1284.0, "sb3"), (8, None, 4096, "train/approx_kl", 0.015479716, "sb3"),
        (9, None, 4096, "train/clip_fraction", 0.118, "sb3"), (10, None, 4096, "train/clip_range", 0.2, "sb3"),
        (11, None, 4096, "train/entropy_loss", -0.685, "sb3"), (12, None, 4096, "train/explained_variance", -171.0, "sb3"),
        (13, None, 4096, "lr", 0.0003, "sb3"), (14, None, 4096, "loss", 6.04, "sb3"),
        (16, None, 4096, "train/policy_gradient_loss", -0.0183, "sb3"), (17, None, 4096, "train/value_loss", 48.8, "sb3"),
        (21, None, 73728, "rollout/ep_len_mean", 200.0, "sb3"), (22, None, 73728, "rollout/ep_rew_mean", -213.0, "sb3"),
        (24, None, 73728, "time/fps", 8507.0, "sb3"), (29, None, 73728, "loss", NAN, "sb3")]


def test_boxes_without_total_timesteps_and_old_stable_baselines_tables_give_nothing(tmp_path):
    # A two-column box with SB3's layout but no `total_timesteps` (a settings table), and the stable-baselines
    # (TF) box of https://github.com/hill-a/stable-baselines/issues/121 (no sections; not read).
    text = (
        "| Parameter | Value |\n"
        "|    lr                   | 0.001     |\n"
        "|    batch_size           | 32        |\n"
        "\n"
        " --------------------------------------\n"
        " | approxkl                 | 0.00069229305 |\n"
        " | ep_rewmean           | nan           |\n"
        " | policy_loss              | -0.011813248  |\n"
        " | total_timesteps      | 100096        |\n"
        " | value_loss               | 0.4478733     |\n"
        " --------------------------------------\n"
    )
    assert rows(tmp_path, text) == []


def test_dassl_epoch_iteration_meters(tmp_path):
    # https://github.com/htyao89/KgCoOp/issues/2 (CoOp-family, Dassl.pytorch): tab-separated meters, `current
    # (average)`; `time`/`data` seconds -> ms; `eta` no metric; step (e - 1) * n + i.
    text = (
        "epoch [1/100][1/1]\ttime 1.927 (1.927)\tdata 1.723 (1.723)\teta 0:03:10\tloss 2.7969 (2.7969)\tacc 48.7500 (48.7500)\tlr 2.000000e-03\n"
        "epoch [46/100][1/1]\ttime 1.111 (1.111)\tdata 0.998 (0.998)\teta 0:01:00\tloss nan (nan)\tacc 85.0000 (85.0000)\tlr 6.686703e-04\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 1, "step_time_ms", 1927.0, "dassl"), (1, None, 1, "data_time_ms", 1723.0, "dassl"),
        (1, None, 1, "loss", 2.7969, "dassl"), (1, None, 1, "acc", 48.75, "dassl"), (1, None, 1, "lr", 0.002, "dassl"),
        (2, None, 46, "step_time_ms", 1111.0, "dassl"), (2, None, 46, "data_time_ms", 998.0, "dassl"),
        (2, None, 46, "loss", NAN, "dassl"), (2, None, 46, "acc", 85.0, "dassl"), (2, None, 46, "lr", 0.0006686703, "dassl")]


def test_mmseg_v0_iteration_lines_with_validation_fields(tmp_path):
    # https://github.com/open-mmlab/mmsegmentation/issues/2300 (mmcv 1.x `Iter [i/N]`, tab after the header;
    # `*_val` fields a hook added) and https://github.com/open-mmlab/mmsegmentation/issues/2242.
    text = (
        "2022-11-12 21:28:32,346 - mmseg - INFO - Iter [2600/120000]\tlr: 9.807e-03, eta: 4:17:15, time: 0.103, data_time: 0.003, "
        "memory: 6566, decode.loss_ce: 0.1195, decode.acc_seg: 97.6243, aux.loss_ce: 0.0479, aux.acc_seg: 97.6243, loss: 0.1675, "
        "decode.loss_ce_val: 0.1237, loss_val: 0.1805\n"
        "2022-10-27 17:28:08,770 - mmseg - INFO - Iter [1100/160000]     lr: 4.366e-05, eta: 6:30:57, time: 0.137, data_time: 0.005, "
        "memory: 970, decode.loss_ce: 0.0045, decode.acc_seg: 100.0000, loss: nan\n"
    )
    assert rows(tmp_path, text) == [
        (2600, "lr", 0.009807), (2600, "step_time_ms", 103.0), (2600, "data_time_ms", 3.0), (2600, "mem_max_mib", 6566.0),
        (2600, "decode.loss_ce", 0.1195), (2600, "decode.acc_seg", 97.6243), (2600, "aux.loss_ce", 0.0479),
        (2600, "aux.acc_seg", 97.6243), (2600, "loss", 0.1675), (2600, "decode.loss_ce_val", 0.1237), (2600, "loss_val", 0.1805),
        (1100, "lr", 4.366e-05), (1100, "step_time_ms", 137.0), (1100, "data_time_ms", 5.0), (1100, "mem_max_mib", 970.0),
        (1100, "decode.loss_ce", 0.0045), (1100, "decode.acc_seg", 100.0), (1100, "loss", NAN)]


def test_nanogpt_eval_line_between_iteration_lines(tmp_path):
    # https://github.com/karpathy/nanoGPT/issues/215 (timestamped fork; NaN from iter 3010).
    text = (
        "2023-03-22 09:31:56 iter 2990: loss 3.8853, time 1096.65ms, mfu 15.34%\n"
        "2023-03-22 09:32:32 step 3000: train loss 4.0390, val loss 4.0427\n"
        "saving checkpoint to out\n"
        "2023-03-22 09:32:52 iter 3010: loss nan, time 1019.95ms, mfu 14.12%\n"
    )
    assert rows(tmp_path, text) == [
        (2990, "loss", 3.8853), (2990, "step_time_ms", 1096.65), (2990, "mfu", 15.34),
        (3000, "eval_train_loss", 4.039), (3000, "eval_loss", 4.0427),
        (3010, "loss", NAN), (3010, "step_time_ms", 1019.95), (3010, "mfu", 14.12)]

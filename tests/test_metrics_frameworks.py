"""torchtitan (formats.md §1.8), nanoGPT/nanochat (§1.9), fairseq (§1.10), fairseq2 (§1.11),
MetricLogger loops (§1.15), mmengine, and tqdm/Lightning bars (§1.4, §1.16)."""

from __future__ import annotations

from tests.metrics_util import NAN, full, rows

NEMO2 = (
    "Training epoch 0, iteration {i}/149 | lr: 3e-05 | consumed_samples: {c} | global_batch_size: 1 | global_step: {i} | "
    "reduced_train_loss: {l} | train_step_timing in s: {t} | val_loss: {v}\n"
)


def test_fairseq_json_and_tqdm_modes(tmp_path):
    text = (
        # [OBS] facebookresearch/fairseq#2201 (json log format: quoted values)
        '{"epoch": 27, "update": 26.267, "loss": "8.206", "nll_loss": "7.049", "ppl": "132.47", "wps": "1195.4", "ups": "1.62", "wpb": "738.1", "bsz": "46.4", "num_updates": "33700", "lr": "0.00017226", "gnorm": "1.833", "clip": "1", "train_wall": "61", "wall": "30542"}\n'
        # [OBS] facebookresearch/fairseq#1955 (tqdm mode)
        "81989/88743 [10:51:46<53:53,  2.09it/s, loss=5.72711e-14, wps=8.90638e+19, ups=2.11, wpb=4.2243e+19, bsz=5.26836e+06, num_updates=348000, lr=0.00020708, gnorm=0, clip=0, loss_scale=4, train_wall=47, wall=166952]\n"
    )
    got = rows(tmp_path, text)
    assert got[:5] == [(33700, "epoch", 27.0), (33700, "update", 26.267), (33700, "loss", 8.206), (33700, "nll_loss", 7.049), (33700, "ppl", 132.47)]
    assert (33700, "grad_norm", 1.833) in got and (33700, "tokens_per_s", 1195.4) in got
    assert [r for r in got if r[0] == 348000][:3] == [(348000, "loss", 5.72711e-14), (348000, "tokens_per_s", 8.90638e+19), (348000, "updates_per_s", 2.11)]
    assert (348000, "loss_scale", 4.0) in got


def test_fairseq2_metrics_line(tmp_path):
    # [SRC] fairseq2 LogMetricRecorder: "{title} Metrics (step {n}) - name: value | ..." (shape constructed in formats.md)
    text = ("Train Metrics (step 100) - Loss: 2.345 | Gradient Norm: 0.81 | "
            "Learning Rate: 0.0003 | Elements per Second: 12,345 | Data Time: 1.5s | Peak Reserved Device Memory: 1.5GiB | "
            "Peak Reserved Device Memory (%): 45%\n"
            "Validation Metrics (step 100) - Loss: 2.5 | Wall Time: 30s\n")
    got = rows(tmp_path, text)
    assert got == [
        (100, "loss", 2.345), (100, "grad_norm", 0.81), (100, "lr", 0.0003), (100, "elements_per_s", 12345.0),
        (100, "data_time_ms", 1500.0), (100, "mem_max_reserved_mib", 1.5 * 1024), (100, "mem_max_reserved_pct", 45.0),
        (100, "eval_loss", 2.5), (100, "eval_wall_time_ms", 30000.0)]


def test_metriclogger_train_and_test_lines(tmp_path):
    text = (
        # [OBS] microsoft/unilm#598
        "Epoch: [115]  [1298/1299]  eta: 0:00:00  lr: 0.001435  min_lr: 0.001435  loss: 6.5993 (6.5971)  loss_scale: 8192.0000 (8646.0600)  weight_decay: 0.0500 (0.0500)  grad_norm: 0.3922 (nan)  time: 0.4944  data: 0.0001  max mem: 19152\n"
        # [OBS] facebookresearch/dino#69 (Epoch: [e/E])
        "Epoch: [0/100]  [2240/2502]  eta: 0:02:44  loss: 5.385776 (7.546279)  lr: 0.000089 (0.000045)  wd: 0.040071 (0.040024)  time: 0.618063  data: 0.000170  max mem: 13871\n"
        # torchvision references test header
        "Test:   [ 0/50]  eta: 0:00:31  loss: 0.5600 (0.5600)  acc1: 85.9375 (85.9375)  acc5: 96.8750 (96.8750)  time: 0.6220  data: 0.4940  max mem: 1120\n"
    )
    got = rows(tmp_path, text)
    step = 115 * 1299 + 1298
    assert got[:9] == [
        (step, "lr", 0.001435), (step, "min_lr", 0.001435), (step, "loss", 6.5993), (step, "loss_scale", 8192.0),
        (step, "weight_decay", 0.05), (step, "grad_norm", 0.3922), (step, "step_time_ms", 0.4944 * 1000),
        (step, "data_time_ms", 0.0001 * 1000), (step, "mem_max_mib", 19152.0)]
    assert got[9:17] == [
        (2240, "loss", 5.385776), (2240, "lr", 0.000089), (2240, "weight_decay", 0.040071),
        (2240, "step_time_ms", 0.618063 * 1000), (2240, "data_time_ms", 0.000170 * 1000), (2240, "mem_max_mib", 13871.0),
        # the Test: line has no step of its own; it carries the last training step
        (2240, "eval_loss", 0.56), (2240, "eval_acc1", 85.9375)]


def test_interleaved_ranks_in_one_file_are_kept_apart(tmp_path):
    # Two ranks' tqdm bars and prints interleaved in one stream (rank prefixes on every line):
    # the same step of each rank is one row per rank, never merged or repeated.
    text = (
        "[rank0]:step 1 loss 2.50 lr 1e-3\n"
        "[rank1]:step 1 loss 2.60 lr 1e-3\n"
        "[rank1]:Epoch 0:  10%|#         | 1/10 [00:01<00:09,  1.00it/s, train_loss=2.60]\n"
        "[rank0]:Epoch 0:  10%|#         | 1/10 [00:01<00:09,  1.00it/s, train_loss=2.50]\n"
        "[rank0]:Epoch 0:  10%|#         | 1/10 [00:01<00:09,  1.00it/s, train_loss=2.50]\n"
        "[rank1]:Epoch 0:  20%|##        | 2/10 [00:02<00:08,  1.00it/s, train_loss=2.40]\n"
    )
    assert [(r[1], r[2], r[3], r[4], r[5]) for r in full(tmp_path, text)] == [
        (0, 1, "loss", 2.5, "generic"), (0, 1, "lr", 1e-3, "generic"),
        (1, 1, "loss", 2.6, "generic"), (1, 1, "lr", 1e-3, "generic"),
        (1, 1, "loss", 2.6, "tqdm_postfix"),
        (0, 1, "loss", 2.5, "tqdm_postfix"),
        (1, 2, "loss", 2.4, "tqdm_postfix")]


def test_tee_prefix_rank_reaches_carriage_return_segments(tmp_path):
    text = "[default1]:\r  5%|5         | 1/20 [00:00<00:01, 10.00it/s, loss=3.1]\n"
    assert [r[1] for r in full(tmp_path, text)] == [1]


def test_verl_near_misses(tmp_path):
    # torchtitan's `step:  4  loss: ..` stays torchtitan's; `step:N` without ` - key:value` items is no verl line.
    text = ("[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%\n"
            "saving checkpoint at step:100 - done\n")
    assert [r[3] for r in full(tmp_path, text)] == ["loss", "grad_norm", "mem_max_reserved_mib", "mem_max_reserved_pct", "tokens_per_s", "tflops", "mfu"]
    assert {r[5] for r in full(tmp_path / "b", text)} == {"torchtitan"}


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


def test_nemo2_val_loss_reprinted_on_every_line_is_read_once(tmp_path):
    # https://github.com/NVIDIA-BioNeMo/bionemo-recipes/pull/740: NeMo 2 prints the last validation loss
    # (`| val_loss: 4.106`) on every training line; it is one validation, so one eval_loss row (at the first line).
    lines = [(120, 121, "1.233", "0.03146"), (121, 122, "1.288", "0.03163"), (122, 123, "1.333", "0.03215")]
    text = "".join(NEMO2.format(i=i, c=c, l=loss, t=t, v="4.106") for i, c, loss, t in lines)
    got = rows(tmp_path, text)
    assert [r for r in got if r[1] == "eval_loss"] == [(120, "eval_loss", 4.106)]
    assert [r for r in got if r[1] == "loss"] == [(120, "loss", 1.233), (121, "loss", 1.288), (122, "loss", 1.333)]


def test_nemo2_val_loss_is_read_again_where_it_changes(tmp_path):
    # Near miss of the above: the same thread's lines with the reprinted value changed by hand (standing for
    # the next validation, which the paste does not reach): a new value is a new row.
    text = (
        NEMO2.format(i=120, c=121, l="1.233", t="0.03146", v="4.106")
        + NEMO2.format(i=121, c=122, l="1.288", t="0.03163", v="4.106")
        + NEMO2.format(i=122, c=123, l="1.333", t="0.03215", v="3.9")
        + NEMO2.format(i=123, c=124, l="1.245", t="0.03157", v="3.9")
    )
    got = rows(tmp_path, text)
    assert [r for r in got if r[1] == "eval_loss"] == [(120, "eval_loss", 4.106), (122, "eval_loss", 3.9)]

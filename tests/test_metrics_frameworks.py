"""torchtitan (formats.md §1.8), nanoGPT/nanochat (§1.9), fairseq (§1.10), fairseq2 (§1.11),
MetricLogger loops (§1.15), mmengine, and tqdm/Lightning bars (§1.4, §1.16)."""

from __future__ import annotations

from tests.metrics_util import NAN, full, rows


def test_torchtitan_current_and_v010_lines(tmp_path):
    text = (
        # [OBS] pytorch/torchtitan#2389 (v0.2.2+: grad_norm, loss 8.5f)
        "[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%\n"
        # [OBS] pytorch/torchtitan#1287 (no grad_norm, rank prefix)
        "[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  memory: 49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 4, "loss", 7.62585, "torchtitan"), (1, None, 4, "grad_norm", 26.625, "torchtitan"),
        (1, None, 4, "mem_max_reserved_mib", 66.91 * 1024, "torchtitan"), (1, None, 4, "mem_max_reserved_pct", 37.51, "torchtitan"),
        (1, None, 4, "tokens_per_s", 10050.0, "torchtitan"), (1, None, 4, "tflops", 314.71, "torchtitan"),
        (1, None, 4, "mfu", 13.99, "torchtitan"),
        (2, 0, 200, "loss", 6.1384, "torchtitan"),
        (2, 0, 200, "mem_max_reserved_mib", 49.66 * 1024, "torchtitan"), (2, 0, 200, "mem_max_reserved_pct", 52.28, "torchtitan"),
        (2, 0, 200, "tokens_per_s", 5856.0, "torchtitan"), (2, 0, 200, "tflops", 339.16, "torchtitan"),
        (2, 0, 200, "mfu", 34.29, "torchtitan")]


def test_torchtitan_with_colour_codes_wps_era_and_mfu_na(tmp_path):
    # [SRC] torchtitan/components/metrics.py colours (tools/utils.py escape codes); 2024 `wps`; quantized `mfu: N/A`
    e = "\x1b["
    text = (
        f"[titan] 2024-06-01 10:00:00,000 - root - INFO - {e}36mstep:  1  {e}32mloss: 10.8765  {e}38;2;54;234;195mmemory:  9.50GiB(10.00%)  "
        f"{e}34mwps: 1,234  {e}35mmfu: 1.50%{e}39m\n"
        f"[titan] 2026-02-24 19:46:17,508 - root - INFO - {e}31mstep: 10  {e}32mloss:      nan  {e}38;2;180;60;0mgrad_norm:     nan  "
        f"{e}38;2;54;234;195mmemory: 66.91GiB(37.51%)  {e}34mtps: 10,050  {e}36mtflops: 314.71  {e}35mmfu: N/A{e}39m\n"
        "[titan] 2026-02-24 19:50:00,000 - root - INFO - validate step: 10  loss:  7.1234  memory: 66.91GiB(37.51%)  tps: 20,100\n"
    )
    assert rows(tmp_path, text) == [
        (1, "loss", 10.8765), (1, "mem_max_reserved_mib", 9.5 * 1024), (1, "mem_max_reserved_pct", 10.0),
        (1, "tokens_per_s", 1234.0), (1, "mfu", 1.5),
        (10, "loss", NAN), (10, "grad_norm", NAN), (10, "mem_max_reserved_mib", 66.91 * 1024),
        (10, "mem_max_reserved_pct", 37.51), (10, "tokens_per_s", 10050.0), (10, "tflops", 314.71),
        (10, "eval_loss", 7.1234), (10, "eval_mem_max_reserved_mib", 66.91 * 1024), (10, "eval_mem_max_reserved_pct", 37.51),
        (10, "eval_tokens_per_s", 20100.0)]


def test_nanogpt_iter_eval_nan_and_placeholder_mfu(tmp_path):
    text = (
        "iter 0: loss 4.2648, time 9371.81ms, mfu -100.00%\n"  # [OBS] karpathy/nanoGPT#178
        "iter 10: loss 3.2202, time 893.76ms, mfu 16.68%\n"
        "step 250: train loss 1.5440, val loss 1.7220\n"
        "2023-03-22 09:32:52 iter 3010: loss nan, time 1019.95ms, mfu 14.12%\n"  # [OBS] karpathy/nanoGPT#215
        "iter 1631: loss 4.0863, time 561.94ms\n"  # [OBS] karpathy/nanoGPT#110 (no mfu)
    )
    assert rows(tmp_path, text) == [
        (0, "loss", 4.2648), (0, "step_time_ms", 9371.81),
        (10, "loss", 3.2202), (10, "step_time_ms", 893.76), (10, "mfu", 16.68),
        (250, "eval_train_loss", 1.544), (250, "eval_loss", 1.722),
        (3010, "loss", NAN), (3010, "step_time_ms", 1019.95), (3010, "mfu", 14.12),
        (1631, "loss", 4.0863), (1631, "step_time_ms", 561.94)]


def test_nanochat_line(tmp_path):
    # [OBS] karpathy/nanochat#147
    text = "step 00004/21400 (0.02%) | loss: 8.893647 | lrm: 1.00 | dt: 989.44ms | tok/sec: 529,882 | mfu: 74.13 | total time: 0.00m\n"
    assert rows(tmp_path, text) == [
        (4, "loss", 8.893647), (4, "lrm", 1.0), (4, "step_time_ms", 989.44), (4, "tokens_per_s", 529882.0),
        (4, "mfu", 74.13), (4, "total_time_ms", 0.0)]


def test_fairseq_simple_old_and_summaries(tmp_path):
    text = (
        # [OBS] facebookresearch/fairseq#2338
        "2020-07-17 07:11:02 | INFO | train_inner | epoch 001:   2800 / 160368 loss=9.255, ppl=611.12, wps=57.3, ups=0.04, wpb=1613, bsz=80, num_updates=2800, lr=2.8e-05, gnorm=3.23, train_wall=13, wall=1236\n"
        # [OBS] facebookresearch/fairseq#940 (pre-2020 `| ` form)
        "| epoch 001:    450 / 1891 loss=11.521, nll_loss=10.881, ppl=1886.05, wps=52922, ups=0.5, wpb=104928, bsz=5325, num_updates=445, lr=8.90889e-05, gnorm=1.543, clip=0%, oom=0, loss_scale=2.000, wall=882, train_wall=756\n"
        "| epoch 001 | valid on 'valid' subset | valid_loss 8.11425 | valid_nll_loss 6.8834 | valid_ppl 118.06 | num_updates 600\n"
        # [OBS] facebookresearch/fairseq#301 (oldest: `loss=1.27 (1.50)`, summaries with spaced keys)
        "| epoch 010  2000 / 8223 loss=1.27 (1.50), wps=962, wpb=908, bsz=32, lr=0.001, clip=100%, gnorm=2.1427\n"
        "| epoch 010 | train loss 1.44 | train ppl 2.72 | s/checkpoint    7747 | words/s    961 | words/batch    906 | bsz    32 | lr 0.001000 | clip 100% | gnorm 2.1113\n"
        "| epoch 010 | valid on 'valid' subset | valid loss 1.94 | valid ppl 3.83\n"
    )
    assert rows(tmp_path, text) == [
        (2800, "loss", 9.255), (2800, "ppl", 611.12), (2800, "tokens_per_s", 57.3), (2800, "updates_per_s", 0.04),
        (2800, "wpb", 1613.0), (2800, "bsz", 80.0), (2800, "lr", 2.8e-05), (2800, "grad_norm", 3.23),
        (2800, "train_wall", 13.0), (2800, "wall", 1236.0),
        (445, "loss", 11.521), (445, "nll_loss", 10.881), (445, "ppl", 1886.05), (445, "tokens_per_s", 52922.0),
        (445, "updates_per_s", 0.5), (445, "wpb", 104928.0), (445, "bsz", 5325.0), (445, "lr", 8.90889e-05),
        (445, "grad_norm", 1.543), (445, "clip_pct", 0.0), (445, "oom", 0.0), (445, "loss_scale", 2.0),
        (445, "wall", 882.0), (445, "train_wall", 756.0),
        (600, "eval_loss", 8.11425), (600, "eval_nll_loss", 6.8834), (600, "eval_ppl", 118.06),
        # the oldest lines carry no num_updates: their step is carried from the line above
        (600, "loss", 1.27), (600, "tokens_per_s", 962.0), (600, "wpb", 908.0), (600, "bsz", 32.0), (600, "lr", 0.001),
        (600, "clip_pct", 100.0), (600, "grad_norm", 2.1427),
        (600, "train_loss", 1.44), (600, "train_ppl", 2.72),
        (600, "eval_loss", 1.94), (600, "eval_ppl", 3.83)]


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


def test_mmengine_lines(tmp_path):
    # [OBS] open-mmlab/mmpretrain#1632
    text = ("2023/06/09 21:58:41 - mmengine - INFO - Epoch(train) [147][300/351] lr: 2.3723e-03 eta: 5 days, 23:52:36 "
            "time: 1.0105 data_time: 0.0024 memory: 48596 loss: 0.4665\n"
            "2023/06/09 22:00:41 - mmengine - INFO - Iter(train) [  100/10000]  lr: 1.0e-04  eta: 1:00:00  time: 0.5000  data_time: 0.0100  memory: 2000  loss: nan\n")
    step = 146 * 351 + 300
    assert rows(tmp_path, text) == [
        (step, "lr", 2.3723e-03), (step, "step_time_ms", 1.0105 * 1000), (step, "data_time_ms", 0.0024 * 1000),
        (step, "mem_max_mib", 48596.0), (step, "loss", 0.4665),
        (100, "lr", 1.0e-04), (100, "step_time_ms", 500.0), (100, "data_time_ms", 0.01 * 1000), (100, "mem_max_mib", 2000.0),
        (100, "loss", NAN)]


def test_lightning_1x_bar_lines_read_once_per_step(tmp_path):
    # [OBS] Lightning-AI/pytorch-lightning#4225: each n drawn twice, the first with the previous loss
    text = (
        "Epoch 0:   0%|          | 0/18 [00:00<?, ?it/s] \n"
        "Epoch 0:   6%|\u258c         | 1/18 [00:08<02:29,  8.77s/it]\n"
        "Epoch 0:   6%|\u258c         | 1/18 [00:08<02:29,  8.77s/it, loss=10.473, v_num=193315]\n"
        "Epoch 0:  11%|\u2588         | 2/18 [00:11<01:33,  5.82s/it, loss=10.473, v_num=193315]\n"
        "Epoch 0:  11%|\u2588         | 2/18 [00:11<01:33,  5.82s/it, loss=10.224, v_num=193315]\n"
        "Epoch 0:  17%|\u2588\u258b        | 3/18 [00:14<01:13,  4.87s/it, loss=10.224, v_num=193315]\n"
        "Epoch 0:  17%|\u2588\u258b        | 3/18 [00:14<01:13,  4.87s/it, loss=10.047, v_num=193315]\n"
    )
    assert full(tmp_path, text) == [
        (3, None, 1, "loss", 10.473, "tqdm_postfix"), (5, None, 2, "loss", 10.224, "tqdm_postfix"),
        (7, None, 3, "loss", 10.047, "tqdm_postfix")]


def test_lightning_colab_bar_without_bar_glyphs(tmp_path):
    # [OBS] Lightning-AI/pytorch-lightning#3866 (notebook rendering drops the |bar|)
    text = ("Epoch 0:  97% 1651/1702 [13:00<00:24,  2.11it/s, loss=0.158, v_num=0, train_loss=0.149]\n"
            "Epoch 0:  97% 1652/1702 [13:01<00:23,  2.11it/s, loss=0.158, v_num=0, train_loss=0.149]\n")
    # Lightning 1.x: `loss` is the running mean it adds (-> loss_avg), `train_loss` the logged value (-> loss).
    assert full(tmp_path, text) == [
        (1, None, 1651, "loss_avg", 0.158, "tqdm_postfix"), (1, None, 1651, "loss", 0.149, "tqdm_postfix"),
        (2, None, 1652, "loss_avg", 0.158, "tqdm_postfix"), (2, None, 1652, "loss", 0.149, "tqdm_postfix")]


def test_data_loading_and_shard_bars_give_no_metrics(tmp_path):
    text = ("Loading checkpoint shards: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 3/3 [00:00<00:00,  5.13it/s]\n"
            "Map: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 1000/1000 [00:00<00:00, 5000.00 examples/s]\n"
            "  0%|          | 0/800 [00:22<?, ?it/s]\n"
            " 14%|\u2588\u258d        | 378/2724 [13:58:09<86:18:35, 132.44s/it]\n")
    assert rows(tmp_path, text) == []


def test_user_loop_set_postfix_with_carriage_returns(tmp_path):
    # A raw capture of `pbar.set_postfix(loss=...)`: each step redraws n with the old then the new value.
    states = [
        "  0%|          | 0/4 [00:00<?, ?it/s]",
        "  0%|          | 0/4 [00:00<?, ?it/s, loss=2.31]",
        " 25%|\u2588\u2588\u258c       | 1/4 [00:00<00:00,  9.90it/s, loss=2.31]",
        " 25%|\u2588\u2588\u258c       | 1/4 [00:00<00:00,  9.90it/s, loss=2.05]",
        " 50%|\u2588\u2588\u2588\u2588\u2588     | 2/4 [00:00<00:00,  9.95it/s, loss=2.05]",
        " 50%|\u2588\u2588\u2588\u2588\u2588     | 2/4 [00:00<00:00,  9.95it/s, loss=nan]",
    ]
    text = "\r".join(states) + "\n"
    assert rows(tmp_path, text) == [(1, "loss", 2.05), (2, "loss", NAN)]


def test_memory_summary_and_profiler_footer(tmp_path):
    # formats.md §4.2 rows [OBS] and the older KB/MB units; §4.1 footers [SRC]
    text = (
        "step 7 loss 2.5\n"
        "|===========================================================================|\n"
        "|                  PyTorch CUDA memory summary, device ID 0                 |\n"
        "|---------------------------------------------------------------------------|\n"
        "|            CUDA OOMs: 0            |        cudaMalloc retries: 3         |\n"
        "|===========================================================================|\n"
        "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n"
        "|---------------------------------------------------------------------------|\n"
        "| Allocated memory      | 184648 KiB | 192833 KiB | 258378 KiB |  73729 KiB |\n"
        "|       from large pool | 184576 KiB | 192768 KiB | 254208 KiB |  69632 KiB |\n"
        "| GPU reserved memory   |  146836 KB |    4261 MB |     847 GB |     840 GB |\n"
        "Self CPU time total: 12.345ms\n"
        "Self CUDA time total: 3.456s\n"
    )
    assert rows(tmp_path, text) == [
        (7, "loss", 2.5),
        (7, "cuda_ooms", 0.0), (7, "alloc_retries", 3.0),
        (7, "mem_allocated_mib", 184648 / 1024), (7, "mem_max_mib", 192833 / 1024),
        (7, "mem_reserved_mib", 146836 / 1024), (7, "mem_max_reserved_mib", 4261.0),
        (7, "profiler_self_cpu_ms", 12.345), (7, "profiler_self_cuda_ms", 3.456 * 1000)]


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

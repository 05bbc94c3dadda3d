"""More real logs pasted in public GitHub issues (each test cites its thread), by trainer family."""

from __future__ import annotations

from tests.metrics_util import NAN, full, rows


def test_mmcv1_epoch_lines_after_an_mmdet_record_prefix(tmp_path):
    # https://github.com/open-mmlab/mmdetection/issues/5911 (mmcv 1.x TextLoggerHook; a NaN loss)
    # https://github.com/open-mmlab/mmdetection/issues/2739 (`1 day, ` eta; spaces instead of the tab in the paste)
    # https://github.com/junjie18/CMT/issues/83 (epoch 7: the step counts the iterations of the epochs before)
    text = (
        "2021-08-18 19:37:12,902 - mmdet - INFO - Epoch [1][150/5808]\tlr: 1.000e-02, eta: 4:46:48, time: 0.736, data_time: 0.020, memory: 8104, loss_rpn_cls: 0.3319, loss_rpn_bbox: 0.1191, loss_cls: 0.4035, acc: 92.7739, loss_bbox: nan, loss: nan\n"
        "2020-05-15 14:43:24,071 - mmdet - INFO - Epoch [1][300/2500]    lr: 0.00150, eta: 1 day, 15:05:35, time: 1.889, data_time: 1.121, memory: 6226, loss_rpn_cls: 0.2355, loss_rpn_bbox: 0.2700, loss_cls: 0.3596, acc: 84.7324, loss_bbox: 0.4131\n"
        "2023-10-24 08:06:41,294 - mmdet - INFO - Epoch [7][5850/32025]\tlr: 7.146e-04, eta: 4 days, 0:19:04, time: 0.775, data_time: 0.025, memory: 30983, loss_cls: 0.4233, loss_bbox: 2.1202, d0.loss_cls: 0.4411, d0.loss_bbox: 2.3103, loss: 31.4201, grad_norm: 3637.0292\n"
    )
    s3 = 6 * 32025 + 5850
    assert rows(tmp_path, text) == [
        (150, "lr", 0.01), (150, "step_time_ms", 736.0), (150, "data_time_ms", 20.0), (150, "mem_max_mib", 8104.0),
        (150, "loss_rpn_cls", 0.3319), (150, "loss_rpn_bbox", 0.1191), (150, "loss_cls", 0.4035), (150, "acc", 92.7739),
        (150, "loss_bbox", NAN), (150, "loss", NAN),
        (300, "lr", 0.0015), (300, "step_time_ms", 1889.0), (300, "data_time_ms", 1121.0), (300, "mem_max_mib", 6226.0),
        (300, "loss_rpn_cls", 0.2355), (300, "loss_rpn_bbox", 0.27), (300, "loss_cls", 0.3596), (300, "acc", 84.7324),
        (300, "loss_bbox", 0.4131),
        (s3, "lr", 0.0007146), (s3, "step_time_ms", 775.0), (s3, "data_time_ms", 25.0), (s3, "mem_max_mib", 30983.0),
        (s3, "loss_cls", 0.4233), (s3, "loss_bbox", 2.1202), (s3, "d0.loss_cls", 0.4411), (s3, "d0.loss_bbox", 2.3103),
        (s3, "loss", 31.4201), (s3, "grad_norm", 3637.0292)]


def test_mmcv1_without_record_prefix_and_nested_loss_names(tmp_path):
    # https://github.com/JiaquanYe/TableMASTER-mmocr/issues/32 (grad_norm nan), https://github.com/ZYang2077/DAOcc/issues/25
    text = (
        " Epoch [1][100/62598]\tlr: 1.000e-03, eta: 6 days, 15:22:46, time: 0.539, data_time: 0.051, memory: 7239, loss_ce: 1.2757, loss: 1.9091, grad_norm: nan\n"
        "2025-08-12 11:58:41,374 - mmdet3d - INFO - Epoch [1][90/30895]\tlr: 9.040e-05, eta: 4 days, 7:34:04, time: 1.947, data_time: 0.082, memory: 13148, loss/object/heatmap/task0: 0.1459, loss/occ/loss_occ: 0.9262, loss: 15.4544, grad_norm: 186.7009\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 100, "lr", 0.001, "mmengine"), (1, None, 100, "step_time_ms", 539.0, "mmengine"),
        (1, None, 100, "data_time_ms", 51.0, "mmengine"), (1, None, 100, "mem_max_mib", 7239.0, "mmengine"),
        (1, None, 100, "loss_ce", 1.2757, "mmengine"), (1, None, 100, "loss", 1.9091, "mmengine"),
        (1, None, 100, "grad_norm", NAN, "mmengine"),
        (2, None, 90, "lr", 9.04e-05, "mmengine"), (2, None, 90, "step_time_ms", 1947.0, "mmengine"),
        (2, None, 90, "data_time_ms", 82.0, "mmengine"), (2, None, 90, "mem_max_mib", 13148.0, "mmengine"),
        (2, None, 90, "loss/object/heatmap/task0", 0.1459, "mmengine"), (2, None, 90, "loss/occ/loss_occ", 0.9262, "mmengine"),
        (2, None, 90, "loss", 15.4544, "mmengine"), (2, None, 90, "grad_norm", 186.7009, "mmengine")]


def test_mmcv1_near_misses(tmp_path):
    # The PyTorch-tutorial shape `Epoch [1/10], Step [100/600], Loss: ..` is not mmcv's (read as generic pairs);
    # mmcv's own status lines hold no metric.
    text = (
        "Epoch [1/10], Step [100/600], Loss: 0.2345\n"
        "2020-07-31 22:39:20,626 - mmdet - INFO - workflow: [('train', 1)], max: 3 epochs\n"
        "2020-07-31 22:39:20,625 - mmdet - INFO - Start running, host: ivan@ivan-System-Product-Name, work_dir: /home/ivan/projects/DetectoRS\n"
    )
    assert full(tmp_path, text) == [(1, None, 100, "epoch", 1.0, "generic"), (1, None, 100, "loss", 0.2345, "generic")]


def test_metriclogger_fork_without_eta(tmp_path):
    # https://github.com/Alpha-VLLM/LLaMA2-Accessory/issues/48 (`Epoch: [e]  [i/n]  ...`, no eta meter; the
    # epoch summary lines give nothing)
    text = (
        "[07:15:39.400163] Epoch: [2]  [1480/1504]  lr: 0.000005  closs: 0.8662 (0.8558)  grad_norm: 0.2537 (0.3329)  time: 4.3713  data: 0.0001  max mem: 51710\n"
        "[07:17:15.926522] Epoch: [2] Total time: 1:52:15\n"
        "[07:17:15.963773] Averaged stats: lr: 0.000005  closs: 0.6884 (0.8518)  grad_norm: 0.2534 (0.3311)\n"
    )
    step = 2 * 1504 + 1480
    assert full(tmp_path, text) == [
        (1, None, step, "lr", 5e-06, "metriclogger"), (1, None, step, "closs", 0.8662, "metriclogger"),
        (1, None, step, "grad_norm", 0.2537, "metriclogger"), (1, None, step, "step_time_ms", 4371.3, "metriclogger"),
        (1, None, step, "data_time_ms", 0.1, "metriclogger"), (1, None, step, "mem_max_mib", 51710.0, "metriclogger")]


def test_detectron2_events_lines(tmp_path):
    # https://github.com/facebookresearch/detectron2/issues/214, #1134 (`2 days, ` eta), d2go#524 (last_time era)
    text = (
        "[11/01 19:16:10 d2.engine.train_loop]: Starting training from iteration 0\n"
        "[11/01 19:16:15 d2.utils.events]: eta: 4:52:26  iter: 19  total_loss: 1.750  loss_cls: 1.248  loss_box_reg: 0.503  time: 0.1960  data_time: 0.0033  lr: 0.000200  max_mem: 2996M\n"
        "[04/01 17:30:43 d2.utils.events]:  eta: 2 days, 12:13:20  iter: 319  total_loss: 3.342  loss_mask: 1.207  time: 0.4089  data_time: 0.0023  lr: 0.006394  max_mem: 4237M\n"
    )
    assert full(tmp_path, text) == [
        (2, None, 19, "loss", 1.75, "detectron"), (2, None, 19, "loss_cls", 1.248, "detectron"),
        (2, None, 19, "loss_box_reg", 0.503, "detectron"), (2, None, 19, "step_time_ms", 196.0, "detectron"),
        (2, None, 19, "data_time_ms", 3.3, "detectron"), (2, None, 19, "lr", 0.0002, "detectron"),
        (2, None, 19, "mem_max_mib", 2996.0, "detectron"),
        (3, None, 319, "loss", 3.342, "detectron"), (3, None, 319, "loss_mask", 1.207, "detectron"),
        (3, None, 319, "step_time_ms", 408.9, "detectron"), (3, None, 319, "data_time_ms", 2.3, "detectron"),
        (3, None, 319, "lr", 0.006394, "detectron"), (3, None, 319, "mem_max_mib", 4237.0, "detectron")]


def test_maskrcnn_benchmark_lines(tmp_path):
    # https://github.com/tianzhi0549/FCOS/issues/6 (`median (global_avg)` meters, `max mem` with a space)
    text = ("2019-04-20 17:25:55,002 maskrcnn_benchmark.trainer INFO: eta: 8:00:58  iter: 60  loss: 5.9007 (5.6273)  "
            "loss_cls: 0.0000 (0.6047)  loss_reg: 4.3461 (4.3368)  time: 0.2908 (0.2888)  data: 0.0025 (0.0134)  lr: 0.003333  max mem: 2082\n")
    assert rows(tmp_path, text) == [
        (60, "loss", 5.9007), (60, "loss_cls", 0.0), (60, "loss_reg", 4.3461), (60, "step_time_ms", 290.8),
        (60, "data_time_ms", 2.5), (60, "lr", 0.003333), (60, "mem_max_mib", 2082.0)]


def test_timm_train_and_test_lines(tmp_path):
    # https://github.com/huggingface/pytorch-image-models/issues/814, https://github.com/yitu-opensource/T2T-ViT/issues/19
    text = (
        "Train: 1 [ 350/5004 (  7%)]  Loss:  6.732388 (6.8414)  Time: 1.271s,  201.43/s  (0.608s,  420.96/s)  LR: 2.133e-02  Data: 1.056 (0.403)\n"
        "Train: 0 [1550/2502 ( 62%)]  Loss:  nan (6.9453)  Time: 0.339s, 1512.00/s  (0.320s, 1598.03/s)  LR: 1.000e-06  Data: 0.005 (0.007)\n"
        "Test: [   0/390]  Time: 0.686 (0.686)  Loss:  0.8057 (0.8057)  Acc@1: 85.1562 (85.1562)  Acc@5: 96.0938 (96.0938)\n"
    )
    assert rows(tmp_path, text) == [
        (5354, "loss", 6.732388), (5354, "step_time_ms", 1271.0), (5354, "lr", 0.02133), (5354, "data_time_ms", 1056.0),
        (5354, "samples_per_s", 201.43),
        (1550, "loss", NAN), (1550, "step_time_ms", 339.0), (1550, "lr", 1e-06), (1550, "data_time_ms", 5.0),
        (1550, "samples_per_s", 1512.0),
        (1550, "eval_step_time_ms", 686.0), (1550, "eval_loss", 0.8057), (1550, "eval_acc@1", 85.1562), (1550, "eval_acc@5", 96.0938)]


def test_verl_console_lines(tmp_path):
    # https://github.com/verl-project/verl/issues/7412 (full-precision values, `actor/loss` present; line abridged)
    # https://github.com/zhaochenyang20/Awesome-ML-SYS-Tutorial/issues/106 (rounded values, only `actor/pg_loss`; abridged)
    text = (
        "(TaskRunner pid=222265) step:34 - global_seqlen/min:419336 - actor/entropy:0.22266578674316406 - actor/pg_loss:0.042396901015308686 - "
        "actor/kl_loss:0.0013280365410537343 - actor/loss:0.042398229241371155 - actor/grad_norm:0.129638671875 - "
        "actor/perf/max_memory_allocated_gb:24.52155876159668 - actor/lr:2e-06 - training/global_step:34 - training/epoch:0 - "
        "critic/score/mean:-0.0182796623557806\n"
        "(TaskRunner pid=87031) step:83 - actor/kl_loss:0.024 - actor/pg_loss:0.000 - actor/grad_norm:0.006 - perf/mfu/actor:0.298 - "
        "perf/max_memory_reserved_gb:68.541 - actor/lr:0.000 - training/global_step:83.000 - training/epoch:2.000 - timing_s/gen:29.641\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 34, "global_seqlen/min", 419336.0, "verl"), (1, None, 34, "actor/entropy", 0.22266578674316406, "verl"),
        (1, None, 34, "actor/pg_loss", 0.042396901015308686, "verl"), (1, None, 34, "actor/kl_loss", 0.0013280365410537343, "verl"),
        (1, None, 34, "loss", 0.042398229241371155, "verl"), (1, None, 34, "grad_norm", 0.129638671875, "verl"),
        (1, None, 34, "mem_max_mib", 24.52155876159668 * 1024, "verl"), (1, None, 34, "lr", 2e-06, "verl"),
        (1, None, 34, "epoch", 0.0, "verl"), (1, None, 34, "critic/score/mean", -0.0182796623557806, "verl"),
        (2, None, 83, "actor/kl_loss", 0.024, "verl"), (2, None, 83, "loss", 0.0, "verl"), (2, None, 83, "grad_norm", 0.006, "verl"),
        (2, None, 83, "mfu", 0.298 * 100, "verl"), (2, None, 83, "mem_max_reserved_mib", 68.541 * 1024, "verl"),
        (2, None, 83, "lr", 0.0, "verl"), (2, None, 83, "epoch", 2.0, "verl"), (2, None, 83, "timing_s/gen", 29.641, "verl")]


def test_verl_near_misses(tmp_path):
    # torchtitan's `step:  4  loss: ..` stays torchtitan's; `step:N` without ` - key:value` items is no verl line.
    text = ("[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%\n"
            "saving checkpoint at step:100 - done\n")
    assert [r[3] for r in full(tmp_path, text)] == ["loss", "grad_norm", "mem_max_reserved_mib", "mem_max_reserved_pct", "tokens_per_s", "tflops", "mfu"]
    assert {r[5] for r in full(tmp_path / "b", text)} == {"torchtitan"}


def test_hf_log_metrics_block_repeats_the_summary_dict(tmp_path):
    # https://github.com/hiyouga/LlamaFactory/pull/10488 (v0 output): the block repeats the dict above it and its
    # `train_loss` is the run's average, not a step's loss: only the dict gives rows.
    text = (
        "{'train_runtime': '2219', 'train_samples_per_second': '1.474', 'train_steps_per_second': '0.185', 'train_loss': '0.7228', 'epoch': '3'}\n"
        "***** train metrics *****\n"
        "  epoch                    =        3.0\n"
        "  train_loss               =     0.7228\n"
        "  train_runtime            = 0:36:58.55\n"
        "  train_samples_per_second =      1.474\n"
    )
    assert full(tmp_path, text) == [
        (1, None, None, "train_runtime", 2219.0, "hf_dict"), (1, None, None, "train_samples_per_second", 1.474, "hf_dict"),
        (1, None, None, "train_steps_per_second", 0.185, "hf_dict"), (1, None, None, "train_loss", 0.7228, "hf_dict"),
        (1, None, None, "epoch", 3.0, "hf_dict")]
    # Not the block's two-space layout: a hand-printed pair is still read.
    assert rows(tmp_path / "b", "train_loss = 0.7228\n") == [(None, "loss", 0.7228)]


def test_megatron_deepspeed_tokens_per_gpu(tmp_path):
    # https://github.com/deepspeedai/Megatron-DeepSpeed/pull/434 (NaN loss shown only by the missing `lm loss`)
    text = (" iteration        9/      10 | consumed samples:          108 | consumed tokens:       442368 | elapsed time per iteration (ms): 1979.2 | "
            "learning rate: 4.219E-07 | global batch size:    12 | loss scale: 1.0 | actual seqlen:  4096 | number of skipped iterations:   0 | "
            "number of nan iterations:   0 | samples per second: 6.063 | tokens per gpu per second (tgs): 2069.506 | TFLOPs: 127.00 |\n")
    assert rows(tmp_path, text) == [
        (9, "consumed_samples", 108.0), (9, "consumed_tokens", 442368.0), (9, "step_time_ms", 1979.2), (9, "lr", 4.219e-07),
        (9, "global_batch_size", 12.0), (9, "loss_scale", 1.0), (9, "actual_seqlen", 4096.0), (9, "skipped_steps", 0.0),
        (9, "nan_iterations", 0.0), (9, "samples_per_s", 6.063), (9, "tokens_per_s", 2069.506), (9, "tflops", 127.0),
        (9, "loss", NAN)]


def test_deit_log_txt_train_lr_is_lr(tmp_path):
    # https://github.com/yuhuan-wu/P2T/issues/13 (DeiT-style log.txt lines inside a text log)
    text = ('{"train_lr": 9.999999999999953e-07, "train_loss": 6.91375186203195, "test_loss": 6.880830226053718, "test_acc1": 0.2800000106811523, "test_acc5": 1.2460000416564943, "epoch": 0, "n_parameters": 11590840}\n'
            "not json\n")
    assert rows(tmp_path, text) == [
        (None, "lr", 9.999999999999953e-07), (None, "loss", 6.91375186203195), (None, "test_loss", 6.880830226053718),
        (None, "test_acc1", 0.2800000106811523), (None, "test_acc5", 1.2460000416564943), (None, "epoch", 0.0),
        (None, "n_parameters", 11590840.0)]


def test_yolo_table_rows_named_by_their_header(tmp_path):
    # https://github.com/ultralytics/ultralytics/issues/21765 (the first row comes before any header: not read;
    # the validation table rows are not training metrics)
    text = (
        "       8/55      9.03G     0.1321      8.032      3.308         22        640: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 954/954 [11:41<00:00,  1.36it/s]\n"
        "                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 66/66 [00:36<00:00,  1.79it/s]\n"
        "                   all       1049       1164          0          0          0          0\n"
        "\n"
        "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\n"
        "       9/55      9.02G     0.1295      7.585      3.256         16        640: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 954/954 [11:32<00:00,  1.38it/s]\n"
        "                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 66/66 [00:37<00:00,  1.74it/s]\n"
        "                   all       1049       1164      0.764      0.776      0.739      0.526\n"
        "\n"
        "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\n"
        "      10/55      9.02G     0.1271      7.321      3.224         12        640: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 954/954 [11:25<00:00,  1.39it/s]\n"
    )
    mem = 9.02e9 / 2**20
    assert full(tmp_path, text) == [
        (6, None, 9 * 954, "mem_reserved_mib", mem, "yolo"), (6, None, 9 * 954, "box_loss", 0.1295, "yolo"),
        (6, None, 9 * 954, "cls_loss", 7.585, "yolo"), (6, None, 9 * 954, "dfl_loss", 3.256, "yolo"),
        (11, None, 10 * 954, "mem_reserved_mib", mem, "yolo"), (11, None, 10 * 954, "box_loss", 0.1271, "yolo"),
        (11, None, 10 * 954, "cls_loss", 7.321, "yolo"), (11, None, 10 * 954, "dfl_loss", 3.224, "yolo")]


def test_yolo_header_carries_across_chunks_and_near_misses(tmp_path):
    # https://github.com/ultralytics/ultralytics/issues/7653 (one epoch); a plain tqdm bar with a numeric
    # description and no YOLO header before it is not a table row.
    text = (
        "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\n"
        "    70/1000      6.73G      1.081     0.4706      1.084         10        640: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 16/16 [00:05<00:00,  2.78it/s]\n"
    )
    assert rows(tmp_path, text) == [(69 * 16 + 16, "mem_reserved_mib", 6.73e9 / 2**20), (69 * 16 + 16, "box_loss", 1.081),
                                    (69 * 16 + 16, "cls_loss", 0.4706), (69 * 16 + 16, "dfl_loss", 1.084)]
    assert rows(tmp_path / "b", text.split("\n", 1)[1]) == []


def test_deepspeed_verbose_overflow_counted_once(tmp_path):
    # https://github.com/deepspeedai/DeepSpeedExamples/issues/307: `_update_scale` reports the overflow (with its
    # iteration) and the new scale, then `step` reports the same skip again through log_dist.
    text = (
        "[2023-04-15 05:51:04,058] [INFO] [fused_optimizer.py:362:_update_scale] \n"
        "Grad overflow on iteration 1860\n"
        "[2023-04-15 05:51:04,058] [INFO] [fused_optimizer.py:363:_update_scale] Reducing dynamic loss scale from 1 to 1\n"
        "[2023-04-15 05:51:04,058] [INFO] [logging.py:96:log_dist] [Rank 0] Overflow detected. Skipping step. Attempted loss scale: 1, reducing to 1\n"
        "epoch: 0|step: 3721|ppo_ep: 1|act_loss: nan|cri_loss: nan|unsuper_loss: 0.0\n"
        "average reward score: nan\n"
    )
    assert full(tmp_path, text) == [
        (2, None, 1860, "skipped_steps", 1.0, "loss_scaler"), (3, None, 1860, "loss_scale", 1.0, "loss_scaler"),
        (5, None, 3721, "epoch", 0.0, "generic"), (5, None, 3721, "ppo_ep", 1.0, "generic"),
        (5, None, 3721, "act_loss", NAN, "generic"), (5, None, 3721, "cri_loss", NAN, "generic"),
        (5, None, 3721, "unsuper_loss", 0.0, "generic")]
    # Without the verbose `_update_scale` lines the log_dist message is the skip.
    assert rows(tmp_path / "b", "\n".join(text.split("\n")[3:4]) + "\n") == [(None, "loss_scale", 1.0), (None, "skipped_steps", 1.0)]


def test_config_dumps_give_no_metrics(tmp_path):
    # DeepSpeed `config.py:print` rows ([OBS] zai-org/CogVideo#233 for the shape) and a pretty-printed user config:
    # numbers next to `loss_scale` / `lr` keys are settings, not measurements.
    text = (
        "[2024-09-03 02:37:24,137] [INFO] [config.py:1001:print]   bfloat16_enabled ............. False\n"
        "[2024-09-03 02:37:24,137] [INFO] [config.py:1001:print]   checkpoint_tag_validation_enabled  True\n"
        "[2024-09-03 02:37:24,137] [INFO] [config.py:1001:print]   communication_data_type ...... None\n"
        '    "max_train_micro_batch_size_per_gpu": 1.024000e+03, \n'
        '        "loss_scale": 0,\n'
    )
    assert rows(tmp_path, text) == []


def test_axolotl_eval_dict_memory_in_gib(tmp_path):
    # https://github.com/axolotl-ai-cloud/axolotl/pull/3148 (axolotl's memory keys carry a `(GiB)` unit)
    text = ("{'eval_loss': 1.3642939329147339, 'eval_runtime': 16.2872, 'eval_samples_per_second': 6.14, 'eval_steps_per_second': 3.07, "
            "'memory/max_active (GiB)': 1.92, 'memory/max_allocated (GiB)': 10.97, 'memory/device_reserved (GiB)': 0, 'epoch': 0}\n")
    assert rows(tmp_path, text) == [
        (None, "eval_loss", 1.3642939329147339), (None, "eval_runtime", 16.2872), (None, "eval_samples_per_second", 6.14),
        (None, "eval_steps_per_second", 3.07), (None, "mem_max_active_mib", 1.92 * 1024), (None, "mem_max_mib", 10.97 * 1024),
        (None, "mem_reserved_mib", 0.0), (None, "epoch", 0.0)]

"""Real logs pasted in public GitHub issues (each test cites its thread), sweep 6: values reprinted on every
line (read once), JSON-lines records of mmcv/mmengine, Caffe solver lines, and the near misses around them."""

from __future__ import annotations

from tests.metrics_util import full, rows

NEMO2 = (
    "Training epoch 0, iteration {i}/149 | lr: 3e-05 | consumed_samples: {c} | global_batch_size: 1 | global_step: {i} | "
    "reduced_train_loss: {l} | train_step_timing in s: {t} | val_loss: {v}\n"
)


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


MMDET_4927 = (
    '{"mode": "train", "epoch": 2, "iter": 325, "lr": 0.02, "memory": 5693, "data_time": 0.09812, "loss_rpn_cls": 0.01966, '
    '"loss_rpn_bbox": 0.01442, "loss_cls": 0.09682, "acc": 96.5332, "loss_bbox": 0.10037, "loss_mask": 0.32674, "loss": 0.55801, '
    '"time": 0.43141}\n'
    '{"mode": "val", "epoch": 2, "iter": 325, "lr": 0.02, "bbox_mAP": 0.296, "bbox_mAP_50": 0.66, "bbox_mAP_75": 0.21, '
    '"bbox_mAP_s": 0.109, "bbox_mAP_m": 0.243, "bbox_mAP_l": 0.304, "bbox_mAP_copypaste": "0.296 0.660 0.210 0.109 0.243 0.304", '
    '"segm_mAP": 0.196, "segm_mAP_50": 0.543, "segm_mAP_75": 0.114, "segm_mAP_s": 0.097, "segm_mAP_m": 0.232, "segm_mAP_l": 0.206, '
    '"segm_mAP_copypaste": "0.196 0.543 0.114 0.097 0.232 0.206"}\n'
)
MMDET_4927_VAL = [
    (325, "eval_bbox_map", 0.296), (325, "eval_bbox_map_50", 0.66), (325, "eval_bbox_map_75", 0.21),
    (325, "eval_bbox_map_s", 0.109), (325, "eval_bbox_map_m", 0.243), (325, "eval_bbox_map_l", 0.304),
    (325, "eval_segm_map", 0.196), (325, "eval_segm_map_50", 0.543), (325, "eval_segm_map_75", 0.114),
    (325, "eval_segm_map_s", 0.097), (325, "eval_segm_map_m", 0.232), (325, "eval_segm_map_l", 0.206)]


def test_mmcv_log_json_val_records_take_eval_names(tmp_path):
    # https://github.com/open-mmlab/mmdetection/issues/4927 (mmcv 1.x `log.json`, EpochBasedRunner): the
    # `"mode": "val"` record's metrics are evaluation metrics, its `epoch`/`lr` repeat the training record's
    # (no second row at the step), `memory` is max allocated MB, the `*_copypaste` strings give nothing.
    got = rows(tmp_path, MMDET_4927, name="20210409.log.json")
    assert got[:4] == [(325, "epoch", 2.0), (325, "lr", 0.02), (325, "mem_max_mib", 5693.0), (325, "data_time_ms", 98.12)]
    assert got[4:12] == [(325, "loss_rpn_cls", 0.01966), (325, "loss_rpn_bbox", 0.01442), (325, "loss_cls", 0.09682),
                         (325, "acc", 96.5332), (325, "loss_bbox", 0.10037), (325, "loss_mask", 0.32674), (325, "loss", 0.55801),
                         (325, "step_time_ms", 431.41)]
    assert got[12:] == MMDET_4927_VAL


def test_mmcv_json_records_inside_a_text_log(tmp_path):
    # The same records printed among other lines (read by the JSON-line grammar of the text log), and
    # https://github.com/open-mmlab/mmsegmentation/issues/271 (IterBasedRunner: `iter` is the global iteration).
    text = (
        "2021-04-09 10:00:00,000 - mmdet - INFO - Saving checkpoint at 2 epochs\n" + MMDET_4927
        + '{"mode": "train", "epoch": 8, "iter": 19350, "lr": 0.00055, "memory": 6912, "data_time": 0.00859, "decode.loss_seg": 0.39321, '
        '"decode.acc_seg": 76.11157, "aux.loss_seg": 0.28087, "aux.acc_seg": 67.6572, "loss": 0.67408, "time": 1.43717}\n'
    )
    got = rows(tmp_path, text)
    assert (325, "mem_max_mib", 5693.0) in got and (325, "memory", 5693.0) not in got
    assert [r for r in got if r[1].startswith("eval_")] == MMDET_4927_VAL
    assert [r for r in got if r[1] in ("epoch", "lr")] == [(325, "epoch", 2.0), (325, "lr", 0.02), (19350, "epoch", 8.0), (19350, "lr", 0.00055)]
    assert got[-8:] == [(19350, "mem_max_mib", 6912.0), (19350, "data_time_ms", 8.59), (19350, "decode.loss_seg", 0.39321),
                        (19350, "decode.acc_seg", 76.11157), (19350, "aux.loss_seg", 0.28087), (19350, "aux.acc_seg", 67.6572),
                        (19350, "loss", 0.67408), (19350, "step_time_ms", 1437.17)]


def test_mmcv_train_mode_record_takes_no_eval_names(tmp_path):
    # Near miss: a `mode` that is not val/test renames nothing. https://github.com/open-mmlab/mmsegmentation/issues/2899
    # (a validation record that mmcv wrote as `"mode": "train"`: it is read as printed, no `eval_`).
    text = '{"mode": "train", "epoch": 6, "iter": 500, "lr": 5e-05, "memory": 4718, "aAcc": 0.8972, "mIoU": 0.4799, "mAcc": 0.5863}\n'
    assert rows(tmp_path, "header line\n" + text) == [
        (500, "epoch", 6.0), (500, "lr", 5e-05), (500, "mem_max_mib", 4718.0), (500, "aacc", 0.8972), (500, "miou", 0.4799),
        (500, "macc", 0.5863)]


def test_speechbrain_epoch_line_after_its_bar_keeps_one_loss(tmp_path):
    # https://github.com/speechbrain/speechbrain/issues/938 (Colab paste, `Epoch: 6` capitalised by the recipe):
    # the epoch line's `train loss` is the mean the training bar's last state already showed (`train_loss=5.86`,
    # step 2774): the bar's row stays, the epoch line gives epoch, lr and the validation stats at that step.
    text = (
        "100% 2774/2774 [14:15<00:00,  3.24it/s, train_loss=5.86]\n"
        "100% 736/736 [00:27<00:00, 26.83it/s]\n"
        "speechbrain.nnet.schedulers - Changing lr from 8.4e-05 to 8.1e-05\n"
        "speechbrain.utils.train_logger - Epoch: 6, lr: 8.45e-05 - train loss: 5.86 - valid loss: 5.55, valid error: 3.98e-01\n"
        "speechbrain.utils.checkpoints - Saved an end-of-epoch checkpoint in results/ECAPA-TDNN/1986/save/CKPT+2021-08-15+10-12-07+00\n"
        "speechbrain.utils.checkpoints - Deleted checkpoint in results/ECAPA-TDNN/1986/save/CKPT+2021-08-15+09-57-24+00\n"
        "speechbrain.utils.epoch_loop - Going into epoch 7\n"
        "100% 2774/2774 [14:16<00:00,  3.24it/s, train_loss=5.49]\n"
        "100% 736/736 [00:27<00:00, 26.93it/s]\n"
        "speechbrain.nnet.schedulers - Changing lr from 8.1e-05 to 7.8e-05\n"
        "speechbrain.utils.train_logger - Epoch: 7, lr: 8.14e-05 - train loss: 5.49 - valid loss: 5.31, valid error: 3.72e-01\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 2774, "loss", 5.86, "tqdm_postfix"),
        (4, None, 2774, "epoch", 6.0, "speechbrain"), (4, None, 2774, "lr", 8.45e-05, "speechbrain"),
        (4, None, 2774, "eval_loss", 5.55, "speechbrain"), (4, None, 2774, "eval_error", 0.398, "speechbrain"),
        (8, None, 5548, "loss", 5.49, "tqdm_postfix"),
        (11, None, 5548, "epoch", 7.0, "speechbrain"), (11, None, 5548, "lr", 8.14e-05, "speechbrain"),
        (11, None, 5548, "eval_loss", 5.31, "speechbrain"), (11, None, 5548, "eval_error", 0.372, "speechbrain")]


def test_speechbrain_epoch_lines_without_a_bar_keep_their_loss(tmp_path):
    # Near miss: https://github.com/speechbrain/speechbrain/issues/2584 (`train_log.txt`, `Epoch: N` form): no
    # bar printed the loss, so the epoch line's `train loss` is the loss.
    text = (
        "Epoch: 1, lr: 1.00e-03 - train loss: 8.84e-01 - valid loss: 1.76e-01, valid error: 5.25e-02\n"
        "Epoch: 2, lr: 9.95e-04 - train loss: 2.20e-01 - valid loss: 1.21e-01, valid error: 3.72e-02\n"
    )
    assert rows(tmp_path, text) == [
        (None, "epoch", 1.0), (None, "lr", 0.001), (None, "loss", 0.884), (None, "eval_loss", 0.176), (None, "eval_error", 0.0525),
        (None, "epoch", 2.0), (None, "lr", 0.000995), (None, "loss", 0.22), (None, "eval_loss", 0.121), (None, "eval_error", 0.0372)]


def test_caffe_solver_lines_loss_lr_speed_and_train_outputs(tmp_path):
    # https://github.com/wy1iu/sphereface/issues/103 (Caffe 1.0 solver: speed in the iteration line) and
    # https://github.com/yjxiong/caffe/issues/2 (older solver: `Iteration N, loss = X` only). The lr line gives
    # `lr` at its iteration; a train output takes the iteration before it (`lambda` is a layer output as printed).
    text = (
        "I0718 01:35:50.598567 23375 sgd_solver.cpp:105] Iteration 9700, lr = 0.001\n"
        "I0718 01:37:31.993999 23375 solver.cpp:218] Iteration 9800 (0.986216 iter/s, 101.398s/100 iters), loss = 9.61773\n"
        "I0718 01:37:31.994256 23375 solver.cpp:237]     Train net output #0: lambda = 5\n"
        "I0718 01:37:31.994319 23375 solver.cpp:237]     Train net output #1: softmax_loss = 9.61773 (* 1 = 9.61773 loss)\n"
        "I0718 01:37:31.994367 23375 sgd_solver.cpp:105] Iteration 9800, lr = 0.001\n"
        "I0815 20:41:26.810891 52129 solver.cpp:232] Iteration 1660, loss = 2.19062\n"
        "I0815 20:41:26.811189 52129 solver.cpp:631] Iteration 1660, lr = 0.001\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 9700, "lr", 0.001, "caffe"),
        (2, None, 9800, "loss", 9.61773, "caffe"), (2, None, 9800, "step_time_ms", 101.398 * 1000 / 100, "caffe"),
        (3, None, 9800, "lambda", 5.0, "caffe"), (4, None, 9800, "softmax_loss", 9.61773, "caffe"),
        (5, None, 9800, "lr", 0.001, "caffe"),
        (6, None, 1660, "loss", 2.19062, "caffe"), (7, None, 1660, "lr", 0.001, "caffe")]


def test_caffe_test_net_outputs_take_the_testing_iteration(tmp_path):
    # https://github.com/BVLC/caffe/issues/6373 (GoogLeNet: weighted auxiliary losses, the unweighted value is read)
    # and https://github.com/BVLC/caffe/issues/5144 (`s/40 iter`, a train output named `loss_*` is a component).
    text = (
        "I0413 08:58:58.719501 22206 solver.cpp:242] Iteration 2720 (0.268203 iter/s, 149.141s/40 iter), loss = -6.43825e-20\n"
        "I0413 08:58:58.719606 22206 solver.cpp:261] Train net output #0: loss_bbox = 0 (* 2 = 0 loss)\n"
        "I0413 08:58:58.719629 22206 sgd_solver.cpp:106] Iteration 2720, lr = 0.001\n"
        "I0427 16:14:58.721990  4532 solver.cpp:330] Iteration 3000, Testing net (#0)                                            \n"
        "I0427 16:16:13.445799  4532 solver.cpp:397]     Test net output #0: loss1/loss1 = 0.286547 (* 0.3 = 0.0859641 loss)     \n"
        "I0427 16:16:13.445799  4532 solver.cpp:397]     Test net output #1: loss1/top-1 = 0.8822                                \n"
        "I0427 16:16:13.448792  4532 solver.cpp:397]     Test net output #6: loss3/loss3 = 0.247474 (* 1 = 0.247474 loss)        \n"
    )
    assert rows(tmp_path, text) == [
        (2720, "loss", -6.43825e-20), (2720, "step_time_ms", 149.141 * 1000 / 40), (2720, "loss_bbox", 0.0), (2720, "lr", 0.001),
        (3000, "eval_loss1/loss1", 0.286547), (3000, "eval_loss1/top-1", 0.8822), (3000, "eval_loss3/loss3", 0.247474)]


def test_caffe_near_misses(tmp_path):
    # Near misses: https://github.com/BVLC/caffe/issues/2864: a train output named `loss` is the current batch's and
    # differs from the iteration's (smoothed) loss: `net_output_loss`, not a second `loss` at the step;
    # https://github.com/senlinuc/caffe_ocr/issues/55: a `Testing net` line alone gives nothing, its outputs `eval_`.
    text = (
        "Iteration 4400, loss = 0\n"
        "I0805 11:10:16.976716 1936085760 solver.cpp:229]     Train net output #0: loss = 2.92436 (* 1 = 2.92436 loss)\n"
        "I0322 17:23:39.161901 17215 solver.cpp:330] Iteration 2500, Testing net (#0)\n"
        "I0322 17:24:01.905066 17215 solver.cpp:397]     Test net output #0: acc = 0.773306\n"
    )
    assert rows(tmp_path, text) == [(4400, "loss", 0.0), (4400, "net_output_loss", 2.92436), (2500, "eval_acc", 0.773306)]


def test_valid_set_index_is_no_metric_and_its_line_is_an_evaluation(tmp_path):
    # https://github.com/gentaiscool/end2end-asr-pytorch/issues/39: `VALID SET 0 LOSS:0.1780 CER:5.78%` (the 0 is the
    # validation set's index): eval_loss/eval_cer, no `valid_set` row. Near miss: the `(Epoch 20) TRAIN LOSS:` line
    # of the same log stays a training line (`loss`, `cer`), and the bare `VALID` / `TRAIN` phase lines give nothing.
    text = (
        "2020-11-13 09:32:47,406 - (Epoch 20) TRAIN LOSS:0.1903 CER:6.53% LR:0.0000167\n"
        "2020-11-13 09:32:47,461 - VALID\n"
        "2020-11-13 09:33:31,062 - VALID SET 0 LOSS:0.1780 CER:5.78%\n"
        "2020-11-13 09:33:34,481 - SHUFFLE\n"
        "2020-11-13 09:33:34,487 - TRAIN\n"
    )
    assert full(tmp_path, text) == [
        (1, None, None, "epoch", 20.0, "generic"), (1, None, None, "loss", 0.1903, "generic"),
        (1, None, None, "cer", 6.53, "generic"), (1, None, None, "lr", 1.67e-05, "generic"),
        (3, None, None, "eval_loss", 0.178, "generic"), (3, None, None, "eval_cer", 5.78, "generic")]


def test_tf_seq2seq_global_step_lines_with_perplexity(tmp_path):
    # https://github.com/QingyaoAi/Deep-Listwise-Context-Model-for-Ranking-Refinement/issues/4 (the TensorFlow
    # seq2seq tutorial's loop): `perplexity` is the metric (-> ppl), `step-time` seconds, `  eval: perplexity` the
    # evaluation at the step before it. Near miss: https://github.com/songhaoyu/BoB/issues/2 prose
    # (`Perplexity on test set is 21.037 and 7.813.`) gives nothing.
    text = (
        "global step 6000 learning rate 0.1937 step-time 0.67 perplexity 13.56\n"
        "  eval: perplexity 13.34\n"
        "global step 6100 learning rate 0.1937 step-time 0.67 perplexity 13.34\n"
        "  eval: perplexity 13.35\n"
        "Perplexity on test set is 21.037 and 7.813.\n"
    )
    assert rows(tmp_path, text) == [
        (6000, "lr", 0.1937), (6000, "step_time_ms", 670.0), (6000, "ppl", 13.56), (6000, "eval_ppl", 13.34),
        (6100, "lr", 0.1937), (6100, "step_time_ms", 670.0), (6100, "ppl", 13.34), (6100, "eval_ppl", 13.35)]

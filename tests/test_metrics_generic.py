"""Hand-printed metric shapes, JSON lines (in logs and as files), and near misses that must give nothing."""

from __future__ import annotations

import polars as pl

from tests.metrics_util import NAN, metrics, rows

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


def test_llamafactory_trainer_log_jsonl_file(tmp_path):
    # [OBS] hiyouga/LlamaFactory#774 (older keys: learning_rate, null values); newer files use `lr`
    text = (
        '{"current_steps": 3200, "total_steps": 3235, "loss": 4.4671, "eval_loss": null, "predict_loss": null, "reward": null, "learning_rate": 1.4439610072863874e-08, "epoch": 0.99, "percentage": 98.92, "elapsed_time": "5:13:22", "remaining_time": "0:03:25"}\n'
        '{"current_steps": 3235, "total_steps": 3235, "loss": null, "eval_loss": null, "predict_loss": null, "reward": null, "learning_rate": null, "epoch": 1.0, "percentage": 100.0, "elapsed_time": "5:16:48", "remaining_time": "0:00:00"}\n'
        '{"current_steps": 10, "total_steps": 1000, "loss": NaN, "lr": 4.99e-05, "epoch": 0.01, "percentage": 1.0, "elapsed_time": "0:01:23", "remaining_time": "2:17:00", "throughput": 1234.5, "total_tokens": 20480, "vram_allocated": 12.5, "vram_reserved": 20.0}\n'
    )
    m = metrics(tmp_path, {"out/trainer_log.jsonl": text})
    got = [(ln, s, n, NAN if v != v else v) for ln, s, n, v in m.select("line", "step", "name", "value").iter_rows()]
    assert got == [
        (1, 3200, "loss", 4.4671), (1, 3200, "lr", 1.4439610072863874e-08), (1, 3200, "epoch", 0.99),
        (2, 3235, "epoch", 1.0),
        (3, 10, "loss", NAN), (3, 10, "lr", 4.99e-05), (3, 10, "epoch", 0.01), (3, 10, "tokens_per_s", 1234.5),
        (3, 10, "tokens_seen", 20480.0), (3, 10, "mem_allocated_mib", 12.5 * 1024), (3, 10, "mem_reserved_mib", 20.0 * 1024)]
    assert set(m.get_column("source")) == {"jsonl"}


def test_jsonl_file_with_a_truncated_last_line_is_partial(tmp_path):
    from forensics.ingest import ingest
    from tests.helpers import frame, write_run

    text = '{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.9}\n{"step": 3, "lo'
    run = ingest(write_run(tmp_path, {"metrics.jsonl": text}))
    files = frame(run, "files")
    assert files.select("kind", "status").row(0) == ("jsonl_metrics", "partial")
    assert "1 line(s) are not JSON objects" in files.get_column("error")[0]
    m = frame(run, "metrics")
    assert m.select("line", "step", "name", "value").rows() == [(1, 1, "loss", 2.0), (2, 2, "loss", 1.9)]


def test_mae_log_txt_epoch_records(tmp_path):
    # [OBS] sunsmarterjie/beyond_masking#1 (MAE log.txt: one JSON object per epoch, no step)
    text = ('{"train_lr": 7.974358974358974e-05, "train_loss": 0.9499255213886499, "epoch": 0}\n'
            '{"train_lr": 0.00023974358974358984, "train_loss": 0.7823955785029401, "epoch": 1}\n')
    m = metrics(tmp_path, {"log.txt": text})
    assert m.select("step", "name", "value").rows() == [
        (None, "lr", 7.974358974358974e-05), (None, "loss", 0.9499255213886499), (None, "epoch", 0.0),
        (None, "lr", 0.00023974358974358984), (None, "loss", 0.7823955785029401), (None, "epoch", 1.0)]


def test_csv_metric_file_and_a_csv_that_is_not_one(tmp_path):
    from forensics.ingest import ingest
    from tests.helpers import frame, write_run

    run = ingest(write_run(tmp_path, {
        "metrics.csv": "epoch,step,train_loss,lr-AdamW\n0,0,2.5,0.001\n0,1,nan,0.001\n0,2,,0.0009\n",
        "data.csv": "id,text,label\n1,hello,0\n2,world,1\n",
    }))
    files = dict(frame(run, "files").select("file", "kind").iter_rows())
    assert files["metrics.csv"] == "csv_metrics" and files["data.csv"] != "csv_metrics"
    m = frame(run, "metrics").filter(pl.col("file") == "metrics.csv")
    got = [(ln, s, n, NAN if v != v else v) for ln, s, n, v in m.select("line", "step", "name", "value").iter_rows()]
    assert got == [(2, 0, "epoch", 0.0), (2, 0, "loss", 2.5), (2, 0, "lr-adamw", 0.001),
                   (3, 1, "epoch", 0.0), (3, 1, "loss", NAN), (3, 1, "lr-adamw", 0.001),
                   (4, 2, "epoch", 0.0), (4, 2, "lr-adamw", 0.0009)]


def test_log_that_starts_with_json_lines_keeps_its_events(tmp_path):
    from forensics.ingest import ingest
    from tests.helpers import frame, write_run

    head = "".join(f'{{"step": {i}, "loss": 2.0}}\n' for i in range(1, 4))
    tail = "Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\nRuntimeError: boom\nstill text\n"
    big = head + "x" * 70000 + "\n" + tail  # the non-JSON part lies beyond the 64 KB head
    run = ingest(write_run(tmp_path, {"train.log": big}))
    assert frame(run, "metrics").select("step", "name", "value").rows() == [(1, "loss", 2.0), (2, "loss", 2.0), (3, "loss", 2.0)]
    assert frame(run, "events").height >= 1


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

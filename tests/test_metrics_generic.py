"""Hand-printed metric shapes, JSON lines (in logs and as files), and near misses that must give nothing."""

from __future__ import annotations

import polars as pl

from tests.metrics_util import NAN, full, metrics, rows


def test_space_separated_step_loss_lr(tmp_path):
    assert rows(tmp_path, "step 120 loss 2.31 lr 3e-4\n") == [(120, "loss", 2.31), (120, "lr", 3e-4)]


def test_key_equals_value_pairs(tmp_path):
    assert rows(tmp_path, "loss=2.31, grad_norm=0.8\nstep=5, loss=nan, grad_norm=inf\n") == [
        (None, "loss", 2.31), (None, "grad_norm", 0.8), (5, "loss", NAN), (5, "grad_norm", float("inf"))]


def test_pipe_separated_epoch_step_loss(tmp_path):
    assert rows(tmp_path, "Epoch 3 | Step 120 | Loss: 2.31\n") == [(120, "epoch", 3.0), (120, "loss", 2.31)]


def test_pytorch_examples_mnist_line(tmp_path):
    # pytorch/examples mnist/main.py: 'Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'
    assert rows(tmp_path, "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.305400\n") == [(None, "epoch", 1.0), (None, "loss", 2.3054)]


def test_units_time_and_memory(tmp_path):
    text = "iter 10 | loss 2.5 | time 123.4ms | data_time 0.05s | mem_allocated 1.5GB | tok/s 12,345\n"
    assert rows(tmp_path, text) == [
        (10, "loss", 2.5), (10, "step_time_ms", 123.4), (10, "data_time_ms", 0.05 * 1000),
        (10, "mem_allocated_mib", 1.5 * 1024), (10, "tokens_per_s", 12345.0)]


def test_step_with_total_and_train_val_loss(tmp_path):
    text = "[Step 100/1000] train loss: 2.31, val loss: 2.50, grad norm: 0.91, learning rate: 3.0e-04\n"
    assert rows(tmp_path, text) == [
        (100, "loss", 2.31), (100, "eval_loss", 2.5), (100, "grad_norm", 0.91), (100, "lr", 3.0e-04)]


def test_json_lines_in_a_log(tmp_path):
    text = (
        'INFO: {"step": 10, "loss": 2.31, "lr": 0.0003, "grad_norm": NaN}\n'
        '{"train/loss": 2.2, "train/learning_rate": 0.0003, "train/global_step": 20, "note": "ok"}\n'
        # [OBS] facebookresearch/metaseq PR #507: json log line after a launcher prefix, quoted values, GB memory
        'slurm_procid 0 : 2022-11-11 14:05:27 | INFO | train_inner | {"epoch": 1, "loss": "15.878", "ppl": "60214.8", '
        '"num_updates": "1", "lr": "2.80112e-07", "gnorm": "16.981", "cuda_gb_allocated": "19.7"}\n'
    )
    assert rows(tmp_path, text) == [
        (10, "loss", 2.31), (10, "lr", 0.0003), (10, "grad_norm", NAN),
        (20, "loss", 2.2), (20, "lr", 0.0003),
        (1, "epoch", 1.0), (1, "loss", 15.878), (1, "ppl", 60214.8), (1, "lr", 2.80112e-07), (1, "grad_norm", 16.981),
        (1, "mem_allocated_mib", 19.7 * 1024)]


def test_config_json_is_not_a_metric_line(tmp_path):
    assert rows(tmp_path, '{"lr": 0.001, "batch_size": 32, "model": "gpt2"}\n') == []


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


def test_near_misses_give_no_metrics(tmp_path):
    text = (
        "The loss went up to 2.3 after we changed the learning rate, see the plot below\n"
        "See https://example.com/runs/loss=2.31 for details\n"
        "Validation loss decreased (inf --> 2.345600).  Saving model ...\n"
        "Using loss function CrossEntropyLoss with label smoothing 0.1 and 2 classes of weights\n"
        "NOTE: the loss scale will be picked automatically\n"
        "ValueError: Expected input batch_size (16) to match target batch_size (8); loss 3 is invalid\n"
        "[2024-01-01 10:00:00,000] [INFO] [config.py:1000:print] steps_per_print .............. 10\n"
        "Downloading shards: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 2/2 [00:10<00:00,  5.00s/it]\n"
        "iteration counter reset after 3 retries\n"
        "{'input_ids': [101, 2023], 'attention_mask': [1, 1]}\n"
    )
    assert full(tmp_path, text) == []


def test_bare_nan_inf_values_are_not_read_as_key_words(tmp_path):
    # sample_logs/gradient-explosion/no-clipping and loss-scale-runaway/nearmiss print `grad_norm inf` mid-line
    text = "step 80 loss 2.5 lr 2.400e-01 grad_norm inf\nstep 175 loss nan lr 1.000e-02 grad_norm inf loss_scale 65536.0\n"
    assert rows(tmp_path, text) == [
        (80, "loss", 2.5), (80, "lr", 0.24), (80, "grad_norm", float("inf")),
        (175, "loss", NAN), (175, "lr", 0.01), (175, "grad_norm", float("inf")), (175, "loss_scale", 65536.0)]


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

"""NaN/overflow on real metric shapes no grammar read before: headerless `<step> <loss>` columns, GAN losses by their
long names, an evaluation loss NaN at every evaluation, an apex loss scale halved to a tiny value at start-up.
Near misses (healthy GAN lines, tables of counts, a transient NaN evaluation, a scale that grows back) stay quiet."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

APEX = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {}"


def run_of(tmp_path: Path, lines: list[str]) -> tuple[Analysis, pl.DataFrame]:
    ev = ingest(write_run(tmp_path, {"train.log": "\n".join(lines) + "\n"}))
    ctx = Context(ev)
    rows = ctx.metrics_select("line", "step", "name", "value") if ctx.has("metrics") else \
        pl.DataFrame(schema={"line": pl.Int64, "step": pl.Int64, "name": pl.String, "value": pl.Float64})
    return analyze(ctx), rows


def medium_plus(a: Analysis) -> set[str]:
    return {f.id for f in a.findings if f.severity >= Severity.MEDIUM}


def first(a: Analysis):
    return next(f for f in a.findings if f.severity > Severity.INFO)


# --- headerless step/value columns --------------------------------------------------------------------------------

def test_bare_step_loss_column_turning_nan_is_a_nan_loss(tmp_path):
    # prajdabre/yanmtt#7 shape: `print(step, loss)` with prose and `...` between
    lines = ["...", "76950 2.596339", "76960 2.735384", "76970 2.6265104", "76980 nan", "76990 nan", "Saving the model",
             "77000 nan"]
    a, rows = run_of(tmp_path, lines)
    assert first(a).id == "nan-loss"
    assert first(a).onset.step == 76980
    got = rows.filter(pl.col("name") == "unnamed_loss").sort("line")
    assert got.get_column("step").to_list() == [76950, 76960, 76970, 76980, 76990, 77000]


def test_bare_step_colon_gan_columns_inf_nan_is_a_nan_loss(tmp_path):
    # AYLIEN/gan-intro#1: `step: loss_d loss_g` every 10 steps
    lines = ["0: inf  nan", "10: nan nan", "20: nan nan", "30: nan nan"]
    a, rows = run_of(tmp_path, lines)
    assert first(a).id == "nan-loss"
    assert set(rows.get_column("name")) == {"unnamed_loss_1", "unnamed_loss_2"}


def test_healthy_bare_gan_columns_stay_quiet(tmp_path):
    lines = [f"{s}: {0.69 - s / 1e4:.4f}  {0.71 + s / 1e4:.4f}" for s in range(0, 200, 10)]
    a, rows = run_of(tmp_path, lines)
    assert rows.height == 40
    assert not medium_plus(a)


def test_integer_tables_and_unordered_numbers_are_not_columns(tmp_path):
    # near misses: counts (no float), a first column that does not grow (not a step), too few lines
    counts = ["1 20", "2 31", "3 45", "4 nan5"]
    unordered = ["5 0.1", "3 nan", "9 nan", "1 nan"]
    short = ["10 2.5", "20 nan"]
    for i, lines in enumerate((counts, unordered, short)):
        a, rows = run_of(tmp_path / str(i), lines)
        assert rows.filter(pl.col("name").str.starts_with("unnamed_loss")).height == 0, lines
        assert "nan-loss" not in medium_plus(a)


def test_header_table_rows_are_not_read_twice(tmp_path):
    lines = ["epoch  loss  accuracy", "1  2.31  0.10", "2  2.10  0.20", "3  1.90  0.30"]
    _, rows = run_of(tmp_path, lines)
    assert rows.filter(pl.col("name").str.starts_with("unnamed_loss")).height == 0
    assert rows.filter(pl.col("name") == "loss").height == 3


# --- GAN losses by their long names ---------------------------------------------------------------------------------

def test_deblurgan_count_first_discriminator_loss_nan(tmp_path):
    # LeeDoYup/DeblurGAN-tf#11
    lines = ["[2018-11-22 16:53:22,014 INFO] 0 epoch,  152  batch, Discriminator  Loss:  11.182838",
             "[2018-11-22 16:53:22,109 INFO] [!] Generator Optimization Start",
             "[2018-11-22 16:53:23,113 INFO] 0 epoch,  153  batch, Discriminator  Loss:  nan",
             "nan",
             "[2018-11-22 16:53:24,435 INFO] 0 epoch,  155 batch, Generator Loss:  nan, add loss: nan, perceptual_loss: 0.003620"]
    a, rows = run_of(tmp_path, lines)
    assert first(a).id == "nan-loss"
    d = rows.filter(pl.col("name") == "d_loss").sort("line").get_column("value").to_list()
    assert d[0] == 11.182838 and all(v != v for v in d[1:])
    assert rows.filter(pl.col("name") == "g_loss").height == 1
    assert rows.filter(pl.col("name") == "batch").get_column("value").to_list() == [152.0, 153.0, 155.0]


def test_psgan_discrim_loss_is_the_discriminator_loss(tmp_path):
    # zhysora/PSGan-Family#10: one metric per line
    _, rows = run_of(tmp_path, ["progress  epoch 50  step 602  image/sec 35.7  remaining 0m", "discrim_loss nan"])
    assert rows.filter(pl.col("name") == "d_loss").height == 1


def test_healthy_gan_losses_stay_quiet(tmp_path):
    # akanimax/BMSG-GAN#2: d_loss at 0 and a jumpy g_loss are normal GAN noise; DeblurGAN lines with finite losses
    lines = [f"Elapsed [8:{m:02d}:01.056768] batch: {37350 + m * 500}  d_loss: 0.000000  g_loss: {g:.6f}"
             for m, g in enumerate([20.78, 12.68, 11.16, 22.16, 15.88, 13.96, 30.81, 17.49, 10.83, 37.01])]
    lines += [f"[2018-11-22 16:53:22,014 INFO] 0 epoch,  {b}  batch, Discriminator  Loss:  {11 - b / 100:.6f}" for b in range(150, 160)]
    a, _ = run_of(tmp_path, lines)
    assert not medium_plus(a)


def test_prose_count_before_epochs_is_not_a_pair(tmp_path):
    _, rows = run_of(tmp_path, ["after 5 epochs, the loss: 2.31 went up to 3.4 and we stopped the training run early"])
    assert rows.filter(pl.col("name") == "epoch").height == 0


# --- an evaluation loss that is NaN at every evaluation -----------------------------------------------------------------

def test_val_loss_nan_at_every_eval_with_finite_train_loss_is_medium(tmp_path):
    # RyanWangZf/transtab#1
    lines = ["epoch: 0, test val_loss: nan", "epoch: 0, train loss: 7.0228, lr: 0.000100, spent: 0.7 secs",
             "epoch: 1, test val_loss: nan", "epoch: 1, train loss: 6.7598, lr: 0.000100, spent: 1.4 secs"]
    a, _ = run_of(tmp_path, lines)
    f = first(a)
    assert f.id == "nan-loss" and f.severity == Severity.MEDIUM
    assert f.evidence[0].line == 1


def test_single_nan_eval_that_turns_finite_stays_quiet(tmp_path):
    lines = ["epoch: 0, test val_loss: nan", "epoch: 0, train loss: 7.0228, lr: 0.000100",
             "epoch: 1, test val_loss: 6.91", "epoch: 1, train loss: 6.7598, lr: 0.000100",
             "epoch: 2, test val_loss: 6.52", "epoch: 2, train loss: 6.4012, lr: 0.000100"]
    a, _ = run_of(tmp_path, lines)
    assert "nan-loss" not in medium_plus(a)


def test_one_nan_eval_alone_stays_quiet(tmp_path):
    a, _ = run_of(tmp_path, ["epoch: 0, test val_loss: nan", "epoch: 0, train loss: 7.0228, lr: 0.000100"])
    assert "nan-loss" not in medium_plus(a)


# --- apex loss scale halved to a tiny value at start-up ------------------------------------------------------------------

def test_apex_startup_halvings_down_to_two_are_a_collapse(tmp_path):
    # lucidrains/stylegan2-pytorch#100: 16384 -> 2 in the first 22 iterations, a tqdm bar among the lines
    lines = [APEX.format(float(2 ** k)) for k in range(14, 0, -1)]
    lines.insert(3, "default<../imgs/>:   0%|          | 22/150000 [00:26<54:04:05,  1.30s/it]")
    a, _ = run_of(tmp_path, lines)
    assert first(a).id == "fp16-overflow"


def test_apex_scale_that_grows_back_after_a_low_is_normal_scaling(tmp_path):
    # near miss: down to 4 at start-up, later overflows at 1024 again (the scaler regrew after clean intervals)
    lines = [APEX.format(float(2 ** k)) for k in range(14, 1, -1)] + [APEX.format("1024.0")]
    a, _ = run_of(tmp_path, lines)
    assert "fp16-overflow" not in medium_plus(a)


def test_apex_startup_calibration_above_the_tiny_range_stays_quiet(tmp_path):
    # near miss: 32768 -> 16 (LEEYOONHYUNG/BVAE-TTS#3 style halvings), above 8
    a, _ = run_of(tmp_path, [APEX.format(float(2 ** k)) for k in range(15, 3, -1)])
    assert "fp16-overflow" not in medium_plus(a)

"""Real recordings in sample_logs/ (made by sample_logs/_scripts/record_*.sh): ingested values match what ran."""

from __future__ import annotations

import csv
import json
import re

import polars as pl
import pytest

from forensics.ingest import ingest
from tests.conftest import SAMPLES
from tests.helpers import frame


@pytest.fixture(scope="module")
def hf():
    run = ingest(SAMPLES / "healthy" / "hf-trainer")
    return frame(run, "metrics"), frame(run, "files")


def test_hf_console_and_trainer_state_agree_step_by_step(hf):
    m, files = hf
    assert files.filter(pl.col("file") == "trainer_state.json").get_column("kind").to_list() == ["trainer_state"]
    console = m.filter((pl.col("file") == "train.log") & (pl.col("name") == "loss"))
    state = m.filter((pl.col("file") == "trainer_state.json") & (pl.col("name") == "loss"))
    assert console.get_column("step").to_list() == list(range(1, 41))
    assert state.get_column("step").to_list() == list(range(1, 41))
    # transformers 5.x prints f"{v:.4g}" of the very value it stores in log_history.
    joined = console.join(state, on="step", suffix="_state")
    assert all(float(f"{s:.4g}") == c for c, s in joined.select("value", "value_state").iter_rows())
    assert console.filter(pl.col("step") == 1).get_column("value").to_list() == [3.913]
    assert console.filter(pl.col("step") == 40).get_column("value").to_list() == [2.666]


def test_hf_eval_and_end_of_training_rows(hf):
    m, _ = hf
    log = m.filter(pl.col("file") == "train.log")
    evals = log.filter(pl.col("name") == "eval_loss").select("line", "step", "value").rows()
    assert evals == [(26, 20, 2.961), (51, 40, 2.591)]
    assert log.filter(pl.col("name") == "train_loss").select("step", "value").rows() == [(40, 3.125)]
    # learning rate: 0 at step 1 (warmup), the 3e-3 peak at step 6 (5 warmup steps), as the console printed it
    lr = dict(log.filter(pl.col("name") == "lr").select("step", "value").iter_rows())
    assert lr[1] == 0.0 and lr[6] == 0.003 and lr[40] == 8.571e-05


def test_hf_trainer_state_rows_point_at_their_lines(hf):
    m, _ = hf
    state = m.filter(pl.col("file") == "trainer_state.json")
    lines = (SAMPLES / "healthy" / "hf-trainer" / "trainer_state.json").read_text().split("\n")
    for line, name in state.filter(pl.col("step") == 20).select("line", "name").iter_rows():
        key = {"lr": "learning_rate"}.get(name, name)
        assert lines[line - 1].startswith(f'      "{key}": ')
    history = json.loads((SAMPLES / "healthy" / "hf-trainer" / "trainer_state.json").read_text())["log_history"]
    want = [(e["step"], e["grad_norm"]) for e in history if "grad_norm" in e]
    assert state.filter(pl.col("name") == "grad_norm").select("step", "value").rows() == want


def test_plain_loop_values_are_what_was_printed():
    run = ingest(SAMPLES / "healthy" / "plain-loop")
    m = frame(run, "metrics")
    printed = []
    for line in (SAMPLES / "healthy" / "plain-loop" / "train.log").read_text().splitlines():
        g = re.fullmatch(r"step (\d+) loss (\S+) lr (\S+) grad_norm (\S+)", line)
        if g:
            s = int(g[1])
            printed += [(s, "loss", float(g[2])), (s, "lr", float(g[3])), (s, "grad_norm", float(g[4]))]
    assert len(printed) == 180
    assert m.select("step", "name", "value").rows() == printed
    assert set(m.get_column("source")) == {"generic"}
    assert m.filter(pl.col("step") == 1).select("name", "value").rows() == [("loss", 3.2222), ("lr", 0.01), ("grad_norm", 2.7402)]


@pytest.fixture(scope="module")
def gloo():
    run = ingest(SAMPLES / "healthy" / "torchrun-gloo")
    return frame(run, "metrics"), frame(run, "files")


def test_torchrun_ranks_from_tee_prefix_and_log_dir(gloo):
    m, files = gloo
    per_rank = m.filter(pl.col("file").str.ends_with("stderr.log"))
    for rank in (0, 1):
        mine = per_rank.filter(pl.col("file").str.contains(f"attempt_0/{rank}/"))
        assert set(mine.get_column("rank")) == {rank}
        assert mine.filter(pl.col("name") == "loss").get_column("step").to_list() == list(range(1, 31))
    console = m.filter(pl.col("file") == "console.log")
    assert set(console.get_column("rank")) == {0, 1}
    # the console ([defaultN]: prefixes) and the per-rank files hold the same observations
    key = ["rank", "step", "name", "value"]
    assert console.select(key).sort(key).rows() == per_rank.select(key).sort(key).rows()
    assert files.filter(pl.col("file").str.ends_with("stdout.log")).get_column("status").to_list() == ["unrecognized"] * 2


def test_torchrun_values_timestamps_and_allreduced_grad_norm(gloo):
    m, _ = gloo
    console = m.filter(pl.col("file") == "console.log")
    first = console.filter((pl.col("rank") == 1) & (pl.col("step") == 1)).select("name", "value").rows()
    assert first == [("loss", 2.5854), ("lr", 0.05), ("grad_norm", 3.5419), ("step_time_ms", 9.54)]
    ts = console.filter((pl.col("rank") == 1) & (pl.col("step") == 1)).get_column("ts")[0]
    assert ts.isoformat() == "2026-11-22T05:26:01.536000+00:00"
    # DDP all-reduces gradients: both ranks log the same grad norm at every step, different losses.
    gn = console.filter(pl.col("name") == "grad_norm").pivot(on="rank", index="step", values="value")
    assert gn.height == 30 and (gn.get_column("0") == gn.get_column("1")).all()
    loss = console.filter(pl.col("name") == "loss").pivot(on="rank", index="step", values="value")
    assert (loss.get_column("0") != loss.get_column("1")).any()


def test_lightning_bar_postfix_matches_csv_logger():
    run = ingest(SAMPLES / "healthy" / "lightning")
    m = frame(run, "metrics").filter(pl.col("file") == "train.log")
    loss = m.filter(pl.col("name") == "loss").select("step", "value").rows()
    with open(SAMPLES / "healthy" / "lightning" / "csv" / "version_0" / "metrics.csv") as fh:
        logged = [(int(r["step"]) + 1, float(r["train_loss"])) for r in csv.DictReader(fh) if r["train_loss"]]
    # The bar shows each step's value with tqdm's `.3g`; the CSV has the full float (0-based step).
    assert [(s, float(f"{v:.3g}")) for s, v in logged] == loss
    assert len(loss) == 60
    # val_loss sits in the postfix for a whole epoch: one row per validation, at the epoch's last batch
    assert m.filter(pl.col("name") == "eval_loss").select("step", "value").rows() == [(20, 0.124), (40, 0.0616), (60, 0.0229)]


def test_lightning_csv_logger_file():
    run = ingest(SAMPLES / "healthy" / "lightning")
    files = frame(run, "files")
    assert files.filter(pl.col("file") == "csv/version_0/metrics.csv").get_column("kind").to_list() == ["csv_metrics"]
    m = frame(run, "metrics").filter(pl.col("file") == "csv/version_0/metrics.csv")
    # header `epoch,step,train_loss,val_loss`; line 2 is `0,0,6.4042649269104,`
    assert m.filter(pl.col("line") == 2).select("step", "name", "value").rows() == [(0, "epoch", 0.0), (0, "loss", 6.4042649269104)]
    assert m.filter(pl.col("name") == "eval_loss").get_column("step").to_list() == [19, 39, 59]

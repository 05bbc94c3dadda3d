"""Lightning SimpleProfiler reports (`FIT Profiler Report`) in text logs: rows in `counters`, and dataloader-bottleneck
from `train_dataloader_next`'s share of the training epoch.

Layout from lightning/pytorch/profilers/simple.py `summary` (`|  action\\t|  mean\\t|  calls\\t|  total\\t|  pct\\t|`,
dash lines around the header and the `Total` row) and the 1.x form with `_` for the total calls and
`get_train_batch` (pytorch_lightning 1.4, as pasted in Lightning-AI/pytorch-lightning#9304). Positive: the
lag-llama report (time-series-foundation-models/lag-llama#51, 85% in the loader, pasted as a Markdown table).
Near misses: healthy 2.x reports from public repositories (loader at 0.9%, 3.9% and 4.8% of the total).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import frame, ingest_text, write_run

DASH = "-" * 120


def row(action: str, *cells: str) -> str:
    # simple.py log_row_extended: f"|  {action:<{max_key}s}\t|  {mean:<15}\t|  {calls:<15}\t|  {total:<15}\t|  {per:<15}\t|"
    return f"|  {action:<60s}\t|" + "".join(f"  {c:<15}\t|" for c in cells)


def report(rows: list[tuple[str, str, str, str, str]], total: tuple[str, str]) -> str:
    head = row("Action", "Mean duration (s)", "Num calls", "Total time (s)", "Percentage %")
    body = "\n".join(row(*r) for r in rows)
    return (f"FIT Profiler Report\n\n{DASH}\n{head}\n{DASH}\n{row('Total', '-', total[0], total[1], '100 %')}\n{DASH}\n"
            f"{body}\n{DASH}\n")


# A healthy single-GPU run (2 epochs, 544 batches): the loader takes 5.3 s of 593 s.
HEALTHY_SINGLE = report([
    ("run_training_epoch", "296.55", "2", "593.11", "96.975"),
    ("run_training_batch", "1.0341", "544", "562.55", "91.979"),
    ("[Strategy]SingleDeviceStrategy.backward", "0.61331", "544", "333.64", "54.551"),
    ("[Strategy]SingleDeviceStrategy.training_step", "0.41931", "544", "228.11", "37.296"),
    ("[_TrainingEpochLoop].train_dataloader_next", "0.0097045", "544", "5.2792", "0.86317"),
    ("[_EvaluationLoop].val_next", "0.010562", "30", "0.31686", "0.051807"),
    ("[Strategy]SingleDeviceStrategy.batch_to_device", "3.308e-05", "574", "0.018988", "0.0031046"),
], ("18171", "611.61"))

# A healthy DDP run whose host-to-device copy is slow (62%), not its loader (3.9%).
HEALTHY_DDP = report([
    ("run_training_epoch", "938.84", "1", "938.84", "81.165"),
    ("[Strategy]DDPStrategy.batch_to_device", "2.5586", "284", "726.63", "62.819"),
    ("run_training_batch", "0.33755", "250", "84.388", "7.2955"),
    ("[_EvaluationLoop].val_next", "2.2378", "35", "78.324", "6.7713"),
    ("[_TrainingEpochLoop].train_dataloader_next", "0.17849", "250", "44.622", "3.8577"),
], ("9572", "1156.7"))

# lag-llama#51 as pasted: the header turned into a Markdown table, rows with and without their leading `|`.
LAG_LLAMA = """Action |  Mean duration (s) |  Num calls |  Total time (s) |  Percentage %
--- | --- | --- | --- | ---
Total |  - |  1397 |  99.734 |  100 %
run_training_epoch |  91.657                |  1                    |  91.657               |  91.901               |
[_TrainingEpochLoop].train_dataloader_next |  5.2931                |  16                   |  84.689               |  84.915               |
[_EvaluationLoop].val_next |  0.246                 |  19                   |  4.674                |  4.6865               |
|  [LightningModule]LagLlamaLightningModule.optimizer_step                                                                                                                      |  0.10731               |  16                   |  1.717                |  1.7216               |
"""

# pytorch_lightning 1.4 layout (Lightning-AI/pytorch-lightning#9304: `_` total calls, no leading `|`); the first rows
# as printed there, the get_train_batch row (cut from the stored excerpt) with figures of ours.
V14 = """FIT Profiler Report

Action                                  |  Mean duration (s)    |Num calls              |  Total time (s)       |  Percentage %         |
--------------------------------------------------------------------------------------------------------------------------------------
Total                                   |  -                    |_                      |  65.955               |  100 %                |
--------------------------------------------------------------------------------------------------------------------------------------
run_training_epoch                      |  5.9453               |10                     |  59.453               |  90.142               |
run_training_batch                      |  0.036441             |1320                   |  48.102               |  72.932               |
get_train_batch                         |  0.0061               |1330                   |  8.113                |  12.301               |
--------------------------------------------------------------------------------------------------------------------------------------
"""


def problems(tmp: Path, text: str) -> list:
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f for f in a.findings if f.severity.name.lower() != "info"]


def profile(tmp: Path, text: str) -> pl.DataFrame:
    return frame(ingest_text(tmp, text), "counters").filter(pl.col("source") == "lightning_profiler")


def test_extended_report_rows_become_counters(tmp_path):
    c = profile(tmp_path, "Epoch 1: 100%|##########| 272/272\n" + HEALTHY_SINGLE)
    loader = {r["name"]: r["value"] for r in c.filter(pl.col("series") == "[_TrainingEpochLoop].train_dataloader_next").to_dicts()}
    assert loader == {"mean_s": 0.0097045, "calls": 544, "total_s": 5.2792, "pct": 0.86317}
    total = {r["name"]: r["value"] for r in c.filter(pl.col("series") == "Total").to_dicts()}
    assert total == {"calls": 18171, "total_s": 611.61, "pct": 100.0}  # `-` mean and `100 %` read as they are
    assert c.filter(pl.col("series") == "[Strategy]SingleDeviceStrategy.batch_to_device")["value"].to_list()[0] == 3.308e-05
    # Each row keeps its own line: the header is line 5, the Total row 7, the first action row 9.
    assert c.filter(pl.col("series") == "run_training_epoch")["line"].unique().to_list() == [9]


def test_markdown_and_1x_forms_are_read(tmp_path):
    md = profile(tmp_path / "md", LAG_LLAMA)
    assert md.filter((pl.col("series") == "[_TrainingEpochLoop].train_dataloader_next") & (pl.col("name") == "total_s"))["value"].to_list() == [84.689]
    assert md.filter(pl.col("series") == "[LightningModule]LagLlamaLightningModule.optimizer_step").height == 4
    old = profile(tmp_path / "old", V14)
    assert old.filter((pl.col("series") == "Total") & (pl.col("name") == "calls")).height == 0  # `_` is no number
    assert old.filter((pl.col("series") == "get_train_batch") & (pl.col("name") == "total_s"))["value"].to_list() == [8.113]


def test_an_old_report_without_the_action_header_is_not_a_table(tmp_path):
    # A prose line mentioning the columns, and a key_averages table, are not read as a SimpleProfiler report.
    text = "the profiler prints Mean duration (s) and Total time (s) per action\nAction | Mean duration (s) | Total time (s)\nnot a row\n"
    assert profile(tmp_path, text).height == 0


def test_loader_dominating_the_epoch_is_a_dataloader_bottleneck(tmp_path):
    found = problems(tmp_path, LAG_LLAMA)
    assert found and found[0].playbook.id == "dataloader-bottleneck" and found[0].severity.name == "MEDIUM"
    assert "92%" in found[0].summary and "16 batches" in found[0].summary
    assert [e.line for e in found[0].evidence] == [5, 4]  # the loader row, then run_training_epoch's


def test_loader_share_between_a_fifth_and_half_is_low(tmp_path):
    text = V14.replace("8.113   ", "20.113  ")
    found = problems(tmp_path, text)
    assert [(f.playbook.id, f.severity.name) for f in found] == [("dataloader-bottleneck", "LOW")]
    assert "34%" in found[0].summary


def test_healthy_reports_stay_quiet(tmp_path):
    for i, text in enumerate((HEALTHY_SINGLE, HEALTHY_DDP, V14)):
        assert problems(tmp_path / str(i), text) == []


def test_a_profile_of_a_few_batches_is_not_judged(tmp_path):
    # Four batches: the first next() (worker start-up) can dominate a short profile of a healthy loader.
    text = LAG_LLAMA.replace("|  16                   |  84.689", "|  4                    |  84.689")
    assert problems(tmp_path, text) == []

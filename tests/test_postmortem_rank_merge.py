"""The postmortem's metric plots draw one line for ranks that log the same values and every rank when they differ,
wherever in the run they differ (read from the Parquet cache, as `forensics report` does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics import cache
from forensics.contracts.context import Context
from forensics.ingest import ingest
from forensics.reports.postmortem.series import metric_plots
from tests.helpers import write_run


def titan(losses: list[float]) -> str:
    """A torchtitan rank log: one metrics line per step (the format of sample_logs/cuda-oom)."""
    return "".join(f"[titan] 2026-11-22 02:10:{i:02d},000 - root - INFO - step: {i}  loss: {v:.5f}  grad_norm:  0.2611\n"
                   for i, v in enumerate(losses, 1))


def loss_plot(tmp_path: Path, rank1: list[float]):
    rank0 = [6.4 - i / 100 for i in range(30)]
    run = write_run(tmp_path, {"rank0.log": titan(rank0), "rank1.log": titan(rank1)})
    cache.save(ingest(run), tmp_path / "cache")
    ctx = Context(cache.load(run, tmp_path / "cache"))
    return next(p for p in metric_plots(ctx, []) if p.key == "loss")


def test_ranks_that_log_the_same_loss_are_drawn_once(tmp_path):
    p = loss_plot(tmp_path, [6.4 - i / 100 for i in range(30)])
    assert p.note == "2 ranks log identical values; rank 0 drawn"
    assert [s.label for s in p.series] == ["loss"]


@pytest.mark.parametrize("where", [0, 14, 29], ids=["first step", "middle step", "last step"])
def test_ranks_that_differ_at_one_step_are_each_drawn(tmp_path, where):
    # Equal at every step but one: the first and last steps read first must not decide alone.
    rank1 = [6.4 - i / 100 for i in range(30)]
    rank1[where] += 0.5
    p = loss_plot(tmp_path, rank1)
    assert p.note == ""
    assert [s.label for s in p.series] == ["loss rank 0", "loss rank 1"]
    assert max(p.series[1].y) == pytest.approx(6.4 - where / 100 + 0.5)

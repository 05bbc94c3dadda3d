"""nan-loss from a logger's NaN/Inf warning: alone (no non-finite loss value) it is an info note; with a
logged `loss nan` it is a NaN loss."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

WARN = " WARNING NaN or Inf found in input tensor"


def run_of(tmp_path: Path, text: str) -> Analysis:
    return analyze(Context(ingest(write_run(tmp_path, {"console.log": text}))))


def test_lone_tensorboard_nan_warning_is_no_medium_nan_loss(tmp_path):
    a = run_of(tmp_path, WARN + "\n")
    assert all(f.severity <= Severity.INFO for f in a.findings)


def test_warning_then_nan_loss_values_is_a_nan_loss(tmp_path):
    lines = [WARN] * 2 + [f"2022-09-10 10:{m:02d}:00,000 DEBUG TRAIN Batch 0/{20000 + 100 * m} loss nan lr 0.00100000 rank 0"
                          for m in range(5)]
    a = run_of(tmp_path, "\n".join(lines) + "\n")
    nan = [f for f in a.findings if f.id == "nan-loss"]
    assert nan and nan[0].severity >= Severity.MEDIUM

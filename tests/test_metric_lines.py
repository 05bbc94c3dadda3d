"""The metrics lines: one row per logged line (where and when), the same from the cache as from the parsed run."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa

from forensics import cache, metric_lines
from forensics.contracts import tables as T
from forensics.contracts.context import Context, plain
from forensics.ingest import ingest

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


def test_a_line_of_several_metrics_is_one_row_and_lines_keep_table_order():
    t = T.conform("metrics", pa.table({
        "file": ["b.log"] * 3 + ["a.log"] * 2 + ["b.log"],
        "line": [7, 7, 7, 3, 4, 7],
        "step": [10, 10, 10, 1, 2, 11],  # the last row repeats line 7 with another step: a line of its own
        "name": ["loss", "lr", "grad_norm", "loss", "loss", "loss"],
        "value": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}))
    got = plain(metric_lines.of(pl.from_arrow(t).lazy()).collect())
    assert got.select("file", "line", "step").rows() == [("b.log", 7, 10), ("a.log", 3, 1), ("a.log", 4, 2), ("b.log", 7, 11)]
    assert got.columns == list(metric_lines.COLS)


def test_cached_lines_answer_as_the_parsed_runs(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "silent-hang/stackdump", run)
    parsed = ingest(run)
    cache.save(parsed, tmp_path / "cache")
    loaded = cache.load(run, tmp_path / "cache")
    a, b = Context(parsed).metric_lines(), Context(loaded).metric_lines()
    want, got = plain(a.collect()), plain(b.collect())
    assert got.equals(want)
    metrics = Context(parsed).metrics
    # Fewer rows than the metrics, and every metrics line is there.
    assert 0 < want.height < metrics.height
    assert metrics.select("file", "line").unique().sort("file", "line").equals(want.select("file", "line").unique().sort("file", "line"))
    assert "metrics" not in loaded.tables

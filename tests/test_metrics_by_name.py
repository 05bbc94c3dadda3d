"""The cached metrics grouped by name: one metric's rows come back in table order, read from its row groups only."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forensics import byname, cache
from forensics.contracts import tables as T
from forensics.contracts.context import Context
from forensics.ingest import ingest

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


def _part(file: str, rows: list[tuple[int, int, str, float]]) -> pa.Table:
    """Metrics rows (line, rank, name, value) of one file."""
    return T.conform("metrics", pa.table({
        "file": [file] * len(rows), "line": [r[0] for r in rows], "rank": pa.array([r[1] for r in rows], pa.int32()),
        "step": [r[0] for r in rows], "name": [r[2] for r in rows], "value": [r[3] for r in rows]}))


@pytest.fixture
def small_groups(monkeypatch):
    """Flushes and row groups of a few rows, so a tiny table spans many of both."""
    monkeypatch.setattr(byname, "FLUSH_ROWS", 7)
    monkeypatch.setattr(byname, "GROUP_ROWS", 3)


def _written(tmp_path: Path, parts: list[pa.Table]) -> byname.Reader:
    w = byname.Writer(tmp_path / "m.parquet")
    for p in parts:
        w.write(p)
    w.close()
    return byname.Reader(tmp_path / "m.parquet")


def _table(parts: list[pa.Table]) -> pl.DataFrame:
    return pl.from_arrow(T.concat("metrics", parts))


def test_rows_of_names_come_back_in_table_order_from_their_groups_only(tmp_path, small_groups):
    names = ["loss", "lr", "grad_norm", "loss"]
    parts = [_part(f"rank{r}.log", [(i, r, names[i % 4], float(i)) for i in range(10)]) for r in (1, 0)]
    parts.append(_part("rank0.log", [(20, 0, "tflops", 9.0)]))
    reader = _written(tmp_path, parts)
    table = _table(parts)
    for wanted in (["loss"], ["lr", "loss"], ["tflops"], ["grad_norm", "tflops", "lr"]):
        got = reader.rows(wanted).collect()
        assert got.equals(table.filter(pl.col("name").is_in(wanted)))
        # Only the groups that hold a wanted name are read: fewer than the file has.
        read = {g for n in wanted for g in reader.groups[n]}
        assert len(read) < pq.ParquetFile(tmp_path / "m.parquet").metadata.num_row_groups
    assert reader.names == {"loss", "lr", "grad_norm", "tflops"}
    assert reader.rows(["absent"]).collect().height == 0


def test_every_row_group_holds_the_names_its_index_entry_says(tmp_path, small_groups):
    parts = [_part("a.log", [(i, 0, f"m{i % 5}", float(i)) for i in range(23)])]
    reader = _written(tmp_path, parts)
    f = pq.ParquetFile(tmp_path / "m.parquet")
    for g in range(f.metadata.num_row_groups):
        held = set(f.read_row_group(g).column("name").cast(pa.string()).to_pylist())
        assert held == {n for n, groups in reader.groups.items() if g in groups}


def test_cached_run_reads_series_by_name_with_the_parsed_runs_rows(tmp_path, small_groups):
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "loss-spike/corrupt-batch", run)
    parsed = ingest(run)
    cache.save(parsed, tmp_path / "cache")
    loaded = cache.load(run, tmp_path / "cache")
    a, b = Context(parsed), Context(loaded)
    assert b.metric_names == a.metric_names and "loss" in a.metric_names
    for wanted in (["loss"], sorted(a.metric_names)):
        assert b.metric_rows(wanted).equals(a.metric_rows(wanted))
    assert b.metrics_select("step", "value", names=["loss"], where=pl.col("step") > 3).equals(
        a.metrics_select("step", "value", where=(pl.col("name") == "loss") & (pl.col("step") > 3)))
    assert "metrics" not in loaded.tables


def test_cache_without_its_by_name_index_is_parsed_again(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(SAMPLES / "loss-spike/corrupt-batch", run)
    cache.save(ingest(run), tmp_path / "cache")
    assert cache.load(run, tmp_path / "cache") is not None
    pq.write_table(pa.table({"name": ["loss"]}), tmp_path / "cache" / cache.METRICS_BY_NAME)
    assert cache.load(run, tmp_path / "cache") is None

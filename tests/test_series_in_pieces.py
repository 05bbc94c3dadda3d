"""A series read a few ranks at a time (written to disk in pieces, read back rank by rank, reduced to the rows a rule
decides on) gives what the whole series gives (playbooks/metric_series.py, timeseries.series_parts / onset_over)."""

from __future__ import annotations

import polars as pl
import pytest
from forensics.playbooks import metric_series as M
from forensics.playbooks import timeseries as ts

from forensics.contracts import tables as T
from forensics.contracts.context import Context
from forensics.ingest import Run
from tests.test_series_rank_by_rank import _metrics


def _context(tmp_path, df: pl.DataFrame) -> Context:
    return Context(Run(root=tmp_path, tables={"metrics": T.conform("metrics", df.to_arrow())}))


@pytest.mark.parametrize("name", ["loss", "accuracy"])  # shared (kept on disk) and not
def test_rank_pieces_make_up_the_series(tmp_path, monkeypatch, name):
    monkeypatch.setattr(ts, "PART_ROWS", 100)  # every rank a piece of its own (each has more than 100 rows)
    ctx = _context(tmp_path, _metrics().with_columns(pl.lit(name).alias("name")))
    for finite in (False, True):
        whole = M.series(ctx, name, finite=finite)
        parts = list(M.series_ranks(ctx, name, finite=finite))
        assert [p.get_column("rank").unique().to_list() for p in parts] == [[0], [1], [2], [None]]
        assert pl.concat(parts).equals(whole)
        for rank in (0, 1, None):
            assert M.series_rank(ctx, name, rank, finite=finite).equals(whole.filter(pl.col("rank").eq_missing(rank)))
        odd = ~pl.col("value").is_finite() | (pl.col("value") > 10)
        rows, points = M.series_where(ctx, name, odd, finite=finite)
        assert points == whole.height and rows.equals(whole.filter(odd))
        assert rows.height == (1 if finite else 2)  # the spike; the NaN too when non-finite points are kept


def test_onset_over_rank_pieces_is_the_onset_of_the_whole_series(tmp_path):
    s = ts.series(_metrics(), "loss")
    parts = s.partition_by("rank", maintain_order=True)
    for predicate, points in ((~pl.col("value").is_finite(), 1), (pl.col("value") < 1.9, 3), (pl.col("value") > 100, 1)):
        # repr: a NaN onset value is not equal to itself
        assert repr(ts.onset_over(parts, predicate, points)) == repr(ts.onset(s, predicate, points))
    assert ts.onset_over(parts, ~pl.col("value").is_finite()).rank == 1  # the NaN is on rank 1


def test_a_series_built_in_pieces_is_the_series_built_whole(monkeypatch):
    df = _metrics()
    lazy = df.lazy().with_columns(pl.col("file", "name", "source").cast(pl.Categorical))
    want = ts.series(df, "loss")
    for rows in (1, 1 << 20):  # each rank cleaned alone (a rank logging steps, a few steps at a time), or all at once
        monkeypatch.setattr(ts, "PART_ROWS", rows)
        pieces = list(ts.series_pieces(lazy, "loss"))
        ranks = [p.get_column("rank").unique().to_list() for p in pieces]
        assert all(len(r) == 1 for r in ranks)  # one rank a piece, in the series' order
        assert list(dict.fromkeys(r[0] for r in ranks)) == [0, 1, 2, None]
        assert (len(pieces) > 100) is (rows == 1)  # ranks 0, 1 and None came a step at a time; rank 2 logs none
        assert pl.concat(pieces).with_columns(pl.col(pl.Categorical).cast(pl.String)).equals(want)

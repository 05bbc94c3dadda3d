"""A series read as numbers (rank, step, value), with the file and line of the rows a rule quotes fetched at the end,
gives the onsets and rows the whole series gives (playbooks/metric_series.py onset_numbers, lowest_rank_numbers)."""

from __future__ import annotations

import polars as pl
import pytest
from forensics.playbooks import metric_series as M
from forensics.playbooks import timeseries as ts

from tests.test_series_in_pieces import _context
from tests.test_series_rank_by_rank import _metrics


@pytest.mark.parametrize("name", ["loss", "accuracy"])  # shared (kept on disk) and not
@pytest.mark.parametrize("finite", [False, True])
def test_onset_from_numbers_is_the_onset_of_the_whole_series(tmp_path, monkeypatch, name, finite):
    monkeypatch.setattr(ts, "PART_ROWS", 100)  # every rank a piece of its own
    ctx = _context(tmp_path, _metrics().with_columns(pl.lit(name).alias("name")))
    whole = M.series(ctx, name, finite=finite)
    found = 0
    for predicate, points in ((~pl.col("value").is_finite(), 1), (pl.col("value") < 1.9, 3), (pl.col("value") > 10, 1),
                              (pl.col("value") > 1e9, 1)):
        want = ts.onset(whole, predicate, points)
        got = M.onset_numbers(ctx, name, predicate, points, finite=finite)
        assert repr(got) == repr(want)  # repr: a NaN onset value is not equal to itself
        found += want is not None and want.file is not None and want.line is not None
    assert found >= 2  # the file and line were fetched, not left empty


def test_the_lowest_rank_as_numbers_is_the_lowest_rank_of_the_series(tmp_path, monkeypatch):
    monkeypatch.setattr(ts, "PART_ROWS", 100)
    ctx = _context(tmp_path, _metrics())
    for finite in (False, True):
        rows, total = M.series_lowest_rank(ctx, "loss", finite=finite)
        numbers, points = M.lowest_rank_numbers(ctx, "loss", finite=finite)
        assert points == total and numbers.equals(rows.select(M.NUMBERS))
        assert numbers.get_column("rank").unique().to_list() == [0]
        # The rows a finding quotes get back every column of the series, in the order asked.
        got = M.provenance(ctx, "loss", numbers.tail(2).reverse(), finite=finite)
        assert got.select(rows.columns).equals(rows.tail(2).reverse())
    empty, points = M.lowest_rank_numbers(ctx, "grad_norm")
    assert points == 0 and empty.height == 0 and empty.columns == list(M.NUMBERS)

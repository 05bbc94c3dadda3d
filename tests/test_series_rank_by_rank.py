"""The series helpers that work one rank at a time (and on row positions) give what the whole-frame forms give."""

from __future__ import annotations

import math

import polars as pl
from forensics.playbooks import timeseries as ts


def _metrics() -> pl.DataFrame:
    """Three ranks and a rankless file; a repeated step (a resume), a NaN, a spike, a file without steps."""
    rows = []
    for rank, file in ((1, "logs/b.log"), (0, "logs/a.log"), (None, "logs/c.log"), (2, "logs/d.log")):
        for i in range(120):
            value = 2.0 - i * 0.005 + (0.01 if i % 3 else -0.01)
            if rank == 0 and i == 70:
                value = 40.0  # a spike on rank 0 only
            if rank == 1 and i == 90:
                value = math.nan
            rows.append({"file": file, "line": 10 + i, "ts": None, "rank": rank, "step": None if rank == 2 else i,
                         "name": "loss", "value": value, "source": "hf_dict"})
        if rank == 1:  # rank 1 resumes from step 100: the second step 100..104 replaces the first
            rows += [{"file": file, "line": 500 + i, "ts": None, "rank": 1, "step": 100 + i, "name": "loss",
                      "value": 1.5, "source": "hf_dict"} for i in range(5)]
    return pl.DataFrame(rows, schema={"file": pl.String, "line": pl.Int64, "ts": pl.Datetime("us", "UTC"), "rank": pl.Int32,
                                      "step": pl.Int64, "name": pl.String, "value": pl.Float64, "source": pl.String})


def test_a_lazy_categorical_read_gives_the_same_series_as_plain_rows():
    df = _metrics()
    lazy = df.lazy().with_columns(pl.col("file", "name", "source").cast(pl.Categorical))
    for finite in (False, True):
        for dedupe in (False, True):
            want = ts.series(df, "loss", finite=finite, dedupe=dedupe)
            got = ts.series(lazy, "loss", finite=finite, dedupe=dedupe)
            assert got.equals(want)
            assert got.schema == want.schema
    s = ts.series(df, "loss")
    assert s.get_column("rank").to_list()[-120:] == [None] * 120  # the rankless rows come last
    assert s.filter((pl.col("rank") == 1) & (pl.col("step") == 102)).get_column("line").to_list() == [502]
    assert s.filter(pl.col("rank") == 2).get_column("step").to_list()[:3] == [1, 2, 3]  # positions stand in


def test_an_empty_lazy_read_is_the_empty_series():
    empty = _metrics().head(0).lazy()
    assert ts.series(empty, "loss").columns == ["file", "line", "ts", "rank", "step", "value", "name"]


def test_spikes_are_the_rows_robust_z_scores_beyond_k():
    s = ts.series(_metrics(), "loss", finite=True)
    sp = ts.spikes(s, k=5.0, window=20, min_points=5)
    assert sp.select("rank", "step", "file", "line").rows() == [(0, 70, "logs/a.log", 80)]
    z = ts.robust_z(s, window=20, min_points=5)
    assert z.filter(pl.col("z") > 5.0).select("rank", "step", "line").rows() == [(0, 70, 80)]
    assert z.height == s.height and z.columns[: len(s.columns)] == s.columns


def test_runs_over_all_ranks_are_each_ranks_runs_in_step_order():
    s = ts.series(_metrics(), "loss")
    hot = pl.col("value") > 1.6
    every = ts.runs(s, hot, 3)
    alone = pl.concat([ts.runs(s.filter(pl.col("rank").eq_missing(r)), hot, 3)
                       for r in s.get_column("rank").unique().to_list()])
    assert every.equals(alone.sort("start_step", "rank", nulls_last=True))
    assert set(every.get_column("rank").to_list()) == {0, 1, 2, None}
    first = every.row(0, named=True)
    assert (first["file"], first["line"]) == s.filter(pl.col("rank").eq_missing(first["rank"])).select("file", "line").row(0)
    nan = ts.first_nonfinite(s)
    assert (nan.rank, nan.step, nan.file, nan.line) == (1, 90, "logs/b.log", 100)

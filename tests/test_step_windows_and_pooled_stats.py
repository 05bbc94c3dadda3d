"""Cross-rank questions answered a window of steps or a rank at a time give what the whole series gives."""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from forensics.playbooks import metric_series as M
from forensics.playbooks import timeseries as ts

from forensics.config import Config
from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from forensics.reports import jsonout

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


class _Run:
    """A run whose metrics table is a given frame (what a Context reads of it)."""

    root = Path(".")
    meta: dict = {}
    event_sources = ("text_log",)

    def __init__(self, metrics: pl.DataFrame):
        self.metrics = metrics

    def scan(self, name: str) -> pl.LazyFrame:
        return self.metrics.lazy()

    def num_rows(self, name: str) -> int:
        return self.metrics.height if name == "metrics" else 0

    def metrics_named(self, names: list[str]) -> pl.LazyFrame:
        return self.metrics.lazy().filter(pl.col("name").is_in(names))

    def metric_names(self) -> set[str]:
        return set(self.metrics.get_column("name").drop_nulls().to_list())


def _metrics(same: bool = False) -> pl.DataFrame:
    """Four ranks logging `loss` (equal on every rank at some steps, or all), one rank missing some steps, a NaN,
    and a rankless file."""
    rng = random.Random(3)
    rows = []
    for rank in (2, 0, 1, 3, None):
        for i in range(300):
            if rank == 3 and i % 7 == 0:
                continue  # steps this rank never logged
            shared = 2.0 - i * 0.001
            value = shared if same or i % 5 == 0 else shared + rng.random() * 0.01
            if rank == 1 and i == 40:
                value = math.nan
            rows.append({"file": f"logs/r{rank}.log", "line": 10 + i, "ts": None, "rank": rank, "step": i * 3,
                         "name": "loss", "value": value, "source": "hf_dict"})
    return pl.DataFrame(rows, schema={"file": pl.String, "line": pl.Int64, "ts": pl.Datetime("us", "UTC"), "rank": pl.Int32,
                                      "step": pl.Int64, "name": pl.String, "value": pl.Float64, "source": pl.String})


def test_step_windows_hold_whole_steps_in_order_and_are_the_series(monkeypatch):
    monkeypatch.setattr(M, "WINDOW_ROWS", 100)
    ctx = Context(_Run(_metrics()))
    windows = list(M.series_steps(ctx, M.LOSS, finite=True))
    assert len(windows) > 5
    steps = [set(w.get_column("step").to_list()) for w in windows]
    assert all(max(a) < min(b) for a, b in zip(steps, steps[1:], strict=False))  # whole steps, lowest first
    whole = M.series_columns(ctx, M.LOSS, ("rank", "step", "value"), finite=True)
    # Each window is the series' rows of its steps, in series order (rank, then step).
    assert pl.concat(windows).sort("step", "rank", nulls_last=True).equals(whole.sort("step", "rank", nulls_last=True))
    for w in windows:
        assert w.equals(whole.filter(pl.col("step").is_in(w.get_column("step").unique().to_list())))


@pytest.mark.parametrize("same", [False, True])
def test_identical_steps_counted_window_by_window_are_the_whole_series(same, monkeypatch):
    monkeypatch.setattr(M, "WINDOW_ROWS", 100)
    ctx = Context(_Run(_metrics(same)))
    whole = M.series_columns(ctx, M.LOSS, ("rank", "step", "value"), finite=True)
    want = ts.identical_across_ranks(whole)
    got = ts.identical_over(M.series_steps(ctx, M.LOSS, finite=True))
    assert got == want
    assert got.ranks == [0, 1, 2, 3]
    last = ts.rank_spread(whole).filter(pl.col("rel_diff") == 0).get_column("step").max()
    assert got.last_identical == last
    spread, ranks = ts.spread_over(M.series_steps(ctx, M.LOSS, finite=True))
    assert spread.equals(ts.rank_spread(whole)) and ranks == [0, 1, 2, 3]
    assert (got.fraction == 1.0) is same


def test_per_rank_statistics_rank_by_rank_are_the_whole_series():
    ctx = Context(_Run(_metrics()))
    whole = M.series_columns(ctx, M.LOSS, ("rank", "step", "value"), finite=True)
    got = ts.per_rank_over(M.series_ranks(ctx, M.LOSS, finite=True, cols=("rank", "step", "value")))
    assert got.equals(ts.per_rank(whole))
    assert got.get_column("rank").to_list() == [0, 1, 2, 3, None]


def test_order_statistics_and_median_in_passes_are_exact():
    rng = np.random.default_rng(5)
    for keep in (1, 50, 1 << 21):
        for n in (1, 2, 7, 1000, 1001):
            x = np.round(rng.normal(size=n) * 10 ** rng.uniform(-3, 3), 2)
            pieces = np.array_split(x, 4)
            ks = sorted({0, n // 2, n - 1})
            assert ts.order_stats(lambda pieces=pieces: iter(pieces), ks, keep=keep) == np.sort(x)[ks].tolist()
            assert ts.median_over(lambda pieces=pieces: iter(pieces), n) == pl.Series(x).median()
    steps = [np.array([5, 3, 9]), np.array([3, 1])]
    assert ts.order_stats(lambda: iter(steps), [0, 2, 4]) == [1.0, 3.0, 9.0]


def test_a_trend_pooled_over_ranks_is_the_trend_of_the_whole_series():
    ctx = Context(_Run(_metrics()))
    whole = M.series_columns(ctx, M.LOSS, ("rank", "step", "value"), finite=True)
    want = ts.trend(whole)
    got = ts.trend_over(M.series_ranks(ctx, M.LOSS, finite=True, cols=("rank", "step", "value")))
    assert got is not None and want is not None
    assert (got.n, got.first_step, got.last_step) == (want.n, want.first_step, want.last_step)
    for a, b in ((got.slope, want.slope), (got.r2, want.r2), (got.intercept, want.intercept)):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12)
    one = whole.filter(pl.col("rank") == 0)
    assert ts.trend_over([one]) == ts.trend(one)  # one piece: the very same numbers
    assert ts.trend_over([]) is None


def test_groups_spilled_by_a_column_are_read_back_one_value_at_a_time():
    ctx = Context(_Run(_metrics()))
    pieces = [pl.DataFrame({"g": [2, 0, 2], "x": [1, 2, 3]}), pl.DataFrame({"g": [1, 2], "x": [4, 5]})]
    got = list(ctx.memo_groups(("t",), lambda: iter(pieces), "g"))
    assert [g.get_column("x").to_list() for g in got] == [[2], [4], [1, 3, 5]]
    assert got[0].columns == ["x"]
    assert list(ctx.memo_groups(("t",), lambda: iter([]), "g"))[2].get_column("x").to_list() == [1, 3, 5]  # kept


def _context(case: str, tmp: Path) -> Context:
    run = tmp / "run"
    shutil.copytree(SAMPLES / case, run)
    return Context(ingest(run))


def test_events_asked_by_a_predicate_are_the_rows_of_the_whole_table(tmp_path):
    ctx = _context("nccl-timeout/gloo", tmp_path)
    wheres = [pl.col("severity") == "error", pl.col("code").is_in(["nccl_watchdog_timeout", "python_traceback"]),
              (pl.col("end_line") > pl.col("line")) & pl.col("text").str.contains("Traceback"), pl.col("line") > 5,
              (pl.col("file") == "no/such.log") | ((pl.col("severity") != "info") & ~pl.col("code").is_in(["python_traceback"]))]
    got = [ctx.events_where(w) for w in wheres]
    assert "events" not in ctx.__dict__  # nothing read whole
    assert any(g.height for g in got)
    for w, g in zip(wheres, got, strict=True):
        assert g.equals(ctx.events.filter(w))
    assert ctx.events_where(wheres[0]).equals(ctx.events.filter(wheres[0]))  # and once the table is read whole


@pytest.mark.parametrize("case", ["sampler-duplication/same-seed-shuffle", "rank-straggler/gloo", "clipping-saturation/tiny-max-norm",
                                  "gradient-desync/nosync"])
def test_detectors_reading_windows_or_ranks_give_the_same_finding_with_tiny_windows(case, tmp_path, monkeypatch):
    pid = case.split("/")[0]
    ctx = _context(case, tmp_path)
    want = jsonout.render(analyze(ctx, Config(select=[pid])))
    assert f'"playbook": "{pid}"' in want
    monkeypatch.setattr(M, "WINDOW_ROWS", 3)
    monkeypatch.setattr(ts, "order_stats", _narrow(ts.order_stats))
    assert jsonout.render(analyze(Context(ctx.run), Config(select=[pid]))) == want


def _narrow(order_stats):
    """order_stats keeping at most one candidate (every radix pass is taken)."""
    return lambda read, ks, keep=1: order_stats(read, ks, keep=1)


@pytest.mark.parametrize("finite", [False, True])
def test_a_big_rank_cleaned_a_window_of_steps_at_a_time_is_the_same_series(finite, monkeypatch):
    df = _metrics()
    # A resumed rank (steps logged again later in its file: the later rows win), a file of a rank without steps
    # (dropped: the rank logs steps elsewhere), a rank logging no step at all (positions stand in), all-NaN rank 5.
    extra = [{"file": "logs/r0.log", "line": 900 + i, "ts": None, "rank": 0, "step": 30 + 3 * i, "name": "loss",
              "value": 9.0 + i, "source": "hf_dict"} for i in range(40)]
    extra += [{"file": "logs/r0b.log", "line": i, "ts": None, "rank": 0, "step": None, "name": "loss", "value": 7.0,
               "source": "hf_dict"} for i in range(20)]
    extra += [{"file": "logs/r4.log", "line": i, "ts": None, "rank": 4, "step": None, "name": "loss", "value": 1.0 + i,
               "source": "hf_dict"} for i in range(150)]
    extra += [{"file": "logs/r5.log", "line": i, "ts": None, "rank": 5, "step": i, "name": "loss", "value": math.nan,
               "source": "hf_dict"} for i in range(150)]
    lazy = pl.concat([df, pl.DataFrame(extra, schema=df.schema)]).lazy().with_columns(pl.col("file", "name", "source").cast(pl.Categorical))
    want = ts.series(lazy, "loss", finite=finite)
    monkeypatch.setattr(ts, "PART_ROWS", 40)
    pieces = list(ts.series_pieces(lazy, "loss", finite=finite))
    assert len(pieces) > 12  # the big ranks came in several windows each
    assert pl.concat(pieces).with_columns(pl.col(pl.Categorical).cast(pl.String)).equals(want)
    assert ts.series(lazy, "loss", finite=finite).equals(want)
    assert want.filter((pl.col("rank") == 0) & (pl.col("step") == 33)).get_column("value").to_list() == [10.0]

"""The fast paths of the analysis give exactly what the plain computations give: trailing medians,
spikes with the MAD computed only where a spike is possible, and the Context's narrow metric reads."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from forensics.playbooks import metric_series as M
from forensics.playbooks import timeseries as ts
from numpy.lib.stride_tricks import sliding_window_view

from forensics.contracts.context import Context
from tests.helpers import ingest_text


@pytest.mark.parametrize("window", [50, 49, 10])
@pytest.mark.parametrize("ties", [False, True])
def test_trailing_median_is_numpys_median_bit_for_bit(window, ties):
    rng = np.random.default_rng(window)
    x = rng.standard_normal(3000) * 1e3
    if ties:
        x = np.round(x, -2)  # many equal values: the two middle order statistics often coincide
    med = ts._trailing_median(x, window)
    want = np.median(sliding_window_view(x, window)[:-1], axis=1)  # the window before each point
    assert np.isnan(med[:window]).all()
    assert np.array_equal(med[window:], want)


def _series(n: int = 4000, ranks: int = 2, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(ranks):
        v = 3.0 - np.linspace(0, 1, n) + rng.gamma(2.0, 0.05, n)
        v[rng.integers(100, n, 12)] *= rng.choice([0.3, 2.5], 12)  # spikes both ways
        rows += [{"file": f"r{r}.log", "line": i + 1, "rank": r, "step": i + 1, "name": "loss", "value": float(x)}
                 for i, x in enumerate(v)]
    return ts.series(pl.DataFrame(rows), "loss")


@pytest.mark.parametrize("direction", ["up", "down", "both"])
@pytest.mark.parametrize("upper_q", [None, 0.95])
def test_spikes_equal_the_full_robust_z_filter(direction, upper_q):
    s = _series()
    got = ts.spikes(s, k=4.0, window=50, min_points=10, rel_floor=0.0, direction=direction, upper_q=upper_q)
    z = ts.robust_z(s, 50, 10, 0.0, upper_q=upper_q)
    cond = {"up": pl.col("z") > 4.0, "down": pl.col("z") < -4.0, "both": pl.col("z").abs() > 4.0}[direction]
    want = z.filter(cond.fill_null(False)).with_columns((pl.col("value") / pl.col("median")).alias("ratio"))
    assert got.height > 3
    assert got.equals(want)


def test_robust_z_full_matches_numpy_windows():
    s = _series(n=600, ranks=1)
    z = ts.robust_z(s, window=50, min_points=10)
    x = s.get_column("value").to_numpy()
    win = sliding_window_view(x, 50)[:-1]
    med = np.median(win, axis=1)
    mad = np.median(np.abs(win - med[:, None]), axis=1)
    assert np.array_equal(z.get_column("median").to_numpy()[50:], med)
    assert np.array_equal(z.get_column("mad").to_numpy()[50:], mad)


LOG = "\n".join(
    [f"{{'loss': {2.0 - i / 100:.4f}, 'grad_norm': {1.0 + i / 50:.3f}, 'learning_rate': 1e-4, 'epoch': 0.{i:02d}}}" for i in range(1, 40)]
    + ["{'loss': 0.5, 'grad_norm': 9.0, 'learning_rate': 1e-4, 'epoch': 0.99}"]
)


def test_context_metric_reads_equal_the_whole_table_filtered(tmp_path):
    ctx = Context(ingest_text(tmp_path, LOG + "\n"))
    whole = ctx.metrics
    assert whole.height > 80
    assert ctx.metric_names == set(whole.get_column("name").unique().to_list())
    assert {"loss", "grad_norm", "lr"} <= ctx.metric_names
    assert ctx.metric_rows("grad_norm").equals(whole.filter(pl.col("name") == "grad_norm"))
    assert ctx.metric_rows(["loss", "lr"]).equals(whole.filter(pl.col("name").is_in(["loss", "lr"])))
    sel = ctx.metrics_select("file", "line", "value", where=pl.col("name") == "loss")
    assert sel.equals(whole.filter(pl.col("name") == "loss").select("file", "line", "value"))
    assert sel.schema["file"] == pl.String
    raw = ctx.metrics_select("file", where=pl.col("name") == "loss", strings=False)
    assert raw.schema["file"] == pl.Categorical


def test_series_is_computed_once_and_equals_the_plain_series(tmp_path, monkeypatch):
    ctx = Context(ingest_text(tmp_path, LOG + "\n"))
    calls = []
    real = ts.series_pieces  # a shared series is built in pieces, written to disk as they come
    monkeypatch.setattr(ts, "series_pieces", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    a = M.series(ctx, M.LOSS, finite=True)
    assert calls == ["loss"]
    assert a.equals(ts.series(ctx.metrics, "loss", finite=True))
    assert a.get_column("value").to_list()[-1] == 0.5
    assert a.schema["file"] == pl.String and a.schema["name"] == pl.String  # kept on disk, given back plain
    calls.clear()
    assert M.series(ctx, M.LOSS, finite=True).equals(a)
    assert calls == []  # shared, not recomputed
    M.series(ctx, M.LOSS)
    assert calls == ["loss"]  # another variant is another series
    assert M.series(ctx, ("no_such_metric",)).height == 0

"""Each shared time-series detector on its own, on small series with known answers."""

from __future__ import annotations

import datetime as dt
import math
import random

import polars as pl
import pyarrow as pa
import pytest
from forensics.playbooks import timeseries as ts

from forensics.contracts.tables import conform


def metrics(rows: list[tuple], name: str = "loss", file: str = "train.log") -> pl.DataFrame:
    """Rows of (step, value) or (step, value, rank) or (step, value, rank, line) as a metrics frame."""
    out = []
    for i, r in enumerate(rows):
        step, value = r[0], r[1]
        rank = r[2] if len(r) > 2 else 0
        line = r[3] if len(r) > 3 else i + 1
        out.append({"file": file, "line": line, "rank": rank, "step": step, "name": name, "value": value})
    return pl.DataFrame(out, schema={"file": pl.String, "line": pl.Int64, "rank": pl.Int32, "step": pl.Int64,
                                     "name": pl.String, "value": pl.Float64})


def s_of(values, start=1, every=1, rank=0, name="loss") -> pl.DataFrame:
    return ts.series(metrics([(start + i * every, v, rank) for i, v in enumerate(values)], name), name)


# ---------------------------------------------------------------- series


def test_series_from_arrow_with_dictionary_columns():
    df = metrics([(1, 2.0), (2, 1.5)])
    table = conform("metrics", df.to_arrow())
    assert pa.types.is_dictionary(table.schema.field("name").type)
    s = ts.series(table, "loss")
    assert s.schema["file"] == pl.String
    assert s.get_column("value").to_list() == [2.0, 1.5]
    assert s.get_column("line").to_list() == [1, 2]


def test_series_dedupe_keeps_last_redraw():
    # tqdm redraws: step 2 printed three times, the last value is the one that stands.
    s = ts.series(metrics([(1, 3.0), (2, 2.9), (2, 2.8), (2, 2.7), (3, 2.5)]), "loss")
    assert s.get_column("step").to_list() == [1, 2, 3]
    assert s.get_column("value").to_list() == [3.0, 2.7, 2.5]
    assert s.get_column("line").to_list() == [1, 4, 5]


def test_series_restart_keeps_resumed_trajectory():
    # Ran to step 5, resumed from a checkpoint at step 3: steps 3-5 are redone.
    rows = [(1, 5.0), (2, 4.0), (3, 3.0), (4, 2.0), (5, 9.0), (3, 3.1), (4, 2.1), (5, 1.9), (6, 1.8)]
    df = metrics(rows)
    s = ts.series(df, "loss")
    assert s.get_column("step").to_list() == [1, 2, 3, 4, 5, 6]
    assert s.get_column("value").to_list() == [5.0, 4.0, 3.1, 2.1, 1.9, 1.8]
    r = ts.restarts(df)
    assert r.select("line", "from_step", "to_step").row(0) == (6, 5, 3)
    assert r.height == 1


def test_series_without_steps_uses_position_and_drops_unstepped_rows_elsewhere():
    hf = metrics([(None, 2.0), (None, 1.0), (None, 0.5)], file="hf.log")
    s = ts.series(hf, "loss")
    assert s.get_column("step").to_list() == [1, 2, 3]
    mixed = metrics([(None, 9.0), (10, 2.0), (20, 1.0)])
    assert ts.series(mixed, "loss").get_column("step").to_list() == [10, 20]
    # The console (no steps, logging every 5 steps) and trainer_state.json (steps) of one run.
    both = pl.concat([metrics([(None, 2.0), (None, 1.0)], file="train.log"),
                      metrics([(5, 2.0), (10, 1.0)], file="trainer_state.json")]).with_columns(pl.lit(None, pl.Int32).alias("rank"))
    s = ts.series(both, "loss")
    assert s.select("file", "step").rows() == [("trainer_state.json", 5), ("trainer_state.json", 10)]


def test_series_keeps_nan_unless_finite_and_filters_rank_and_aliases():
    df = pl.concat([metrics([(1, 1.0), (2, math.nan), (3, math.inf)]),
                    metrics([(1, 7.0, 1)]), metrics([(4, 0.5)], name="lm loss")])
    s = ts.series(df, ["loss", "lm loss"], rank=0)
    assert s.get_column("step").to_list() == [1, 2, 3, 4]
    assert math.isnan(s.item(1, "value")) and math.isinf(s.item(2, "value"))
    assert ts.series(df, "loss", finite=True).get_column("value").to_list() == [1.0, 7.0]


# ---------------------------------------------------------------- onset


def test_onset_needs_sustained_points_and_reports_provenance():
    # Grad norm above 1000 once at step 30 (noise), sustained from step 70 (logged every 10 steps).
    vals = [1.0] * 2 + [2000.0] + [1.0] * 3 + [1500.0, 3000.0, 9000.0, 20000.0]
    s = s_of(vals, start=10, every=10)
    o = ts.onset(s, pl.col("value") > 1000, min_points=3)
    assert (o.step, o.end_step, o.points, o.value, o.line, o.to_end) == (70, 100, 4, 1500.0, 7, True)
    assert ts.onset(s, pl.col("value") > 1000, min_points=1).step == 30
    assert ts.onset(s, pl.col("value") > 1e6, min_points=1) is None


def test_onset_earliest_over_ranks():
    df = pl.concat([metrics([(i, 0.0 if i >= 5 else 1.0, 0) for i in range(10)]),
                    metrics([(i, 0.0 if i >= 3 else 1.0, 1) for i in range(10)])])
    o = ts.onset(ts.series(df, "loss"), pl.col("value") == 0, min_points=3)
    assert (o.rank, o.step) == (1, 3)
    r = ts.runs(ts.series(df, "loss"), pl.col("value") == 0, 3)
    assert r.select("rank", "start_step").rows() == [(1, 3), (0, 5)]


def test_first_nonfinite_counts_consecutive():
    s = s_of([2.0, 2.1, math.nan, math.nan, math.inf, 2.0])
    o = ts.first_nonfinite(s)
    assert (o.step, o.points) == (3, 3)
    assert ts.first_nonfinite(s_of([1.0, 2.0])) is None


# ---------------------------------------------------------------- spikes


def _noisy(n: int, level: float = 2.0, noise: float = 0.05, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [level + rng.gauss(0, noise) for _ in range(n)]


def test_spike_found_at_its_step_and_not_inflating_its_baseline():
    vals = _noisy(120)
    vals[80] = 6.0
    vals[40] = math.nan  # ignored, not a spike and not poisoning the window
    s = s_of(vals)
    sp = ts.spikes(s, k=5.0, window=50)
    assert sp.get_column("step").to_list() == [81]
    row = sp.row(0, named=True)
    assert row["median"] == pytest.approx(2.0, abs=0.03)
    assert row["ratio"] == pytest.approx(3.0, rel=0.02)
    assert row["z"] > 20


def test_spike_within_noise_is_not_flagged():
    vals = _noisy(200, noise=0.2, seed=3)
    vals[120] = 2.5  # 2.5 sigma: inside the noise band
    assert ts.spikes(s_of(vals), k=5.0).height == 0


def test_spike_floor_on_flat_series():
    vals = [3.0] * 60
    vals[50] = 3.01  # 0.3% above a perfectly flat series: below the 1% floor x k
    vals[55] = 3.6  # 20% above: k * 1% floor exceeded
    assert ts.spikes(s_of(vals), k=5.0).get_column("step").to_list() == [56]


def test_recovered():
    vals = [2.0] * 20 + [8.0, 5.0, 2.1, 2.0]
    s = s_of(vals)
    assert ts.recovered(s, after_step=21, level=2.0, rel_tol=0.1)
    assert not ts.recovered(s_of([2.0] * 20 + [8.0, 7.0, 7.5]), after_step=21, level=2.0)


# ---------------------------------------------------------------- trend


def test_trend_of_a_line_and_of_noise():
    s = s_of([3.0 + 0.5 * i for i in range(10)], start=0)
    t = ts.trend(s)
    assert t.slope == pytest.approx(0.5)
    assert t.intercept == pytest.approx(3.0)
    assert t.r2 == pytest.approx(1.0)
    assert (t.first_step, t.last_step, t.n) == (0, 9, 10)
    assert t.rel_change == pytest.approx(4.5 / 3.0)
    noise = ts.trend(s_of(_noisy(300, seed=5)))
    assert noise.r2 < 0.05
    flat = ts.trend(s_of([1.0] * 10))
    assert (flat.slope, flat.r2) == (0.0, 0.0)


def test_trends_per_rank_ignore_nonfinite_and_gaps():
    df = pl.concat([
        metrics([(i * 10, 100.0 + 2.0 * i, 0) for i in range(20)] + [(200, math.nan, 0)]),
        metrics([(i * 10, 100.0, 1) for i in range(20)]),
    ])
    g = ts.trends(ts.series(df, "loss")).sort("rank")
    assert g.get_column("slope").to_list() == pytest.approx([0.2, 0.0])
    assert g.get_column("r2").to_list() == pytest.approx([1.0, 0.0])
    assert g.get_column("n").to_list() == [20, 20]
    assert ts.trend(s_of([1.0, 2.0])) is None


# ---------------------------------------------------------------- plateau


def test_plateau_at_ln_vocab_from_its_start():
    lnv = math.log(256)
    decay = [8.0 - 0.1 * i for i in range(20)]  # 8.0 .. 6.1, decreasing
    flat = [lnv + (0.01 if i % 2 else -0.01) for i in range(40)]
    s = s_of(decay + flat)
    p = ts.plateau(s, rel_tol=0.02, min_points=10, to_end=True)
    assert p.start_step == 21
    assert p.end_step == 60 and p.to_end
    assert p.level == pytest.approx(lnv, abs=0.011)
    assert p.points == 40
    assert abs(p.rel_drift) < 0.01


def test_no_plateau_on_steady_decrease_and_outlier_tolerated():
    assert ts.plateau(s_of([10.0 * 0.97**i for i in range(100)]), rel_tol=0.02, min_points=20) is None
    vals = [5.0] * 40
    vals[20] = 9.0  # one outlier inside a 20-point window does not break the plateau
    p = ts.plateau(s_of(vals), rel_tol=0.02, min_points=20)
    assert (p.start_step, p.end_step, p.points) == (1, 40, 40)


# ---------------------------------------------------------------- loss scale


def test_scale_runs_runaway_doubling():
    # Zero gradients: the scale doubles every 2 logged points and never backs off.
    vals = [2.0**10 * 2 ** (i // 2) for i in range(30)]
    r = ts.scale_runs(s_of(vals, name="loss_scale"))
    assert (r.ups, r.downs, r.longest_up, r.longest_up_start) == (14, 0, 14, 3)
    assert r.max.value == 2.0**24 and r.max.step == 29
    assert (r.above_fp16_max.step, r.above_fp16_max.value) == (13, 2.0**16)


def test_scale_runs_collapse_to_minimum():
    vals = [65536.0, 65536.0, 32768.0, 16384.0, 8192.0, 16384.0, 8192.0, 4096.0, 2048.0, 1.0, 1.0, 1.0]
    r = ts.scale_runs(s_of(vals, name="loss_scale"))
    assert (r.ups, r.downs, r.longest_down, r.longest_down_start) == (1, 7, 4, 7)
    assert (r.min.value, r.min.step, r.steps_at_min) == (1.0, 10, 3)
    assert r.above_fp16_max is not None and r.above_fp16_max.value == 65536.0


# ---------------------------------------------------------------- learning rate


def _warmup_cosine(n=200, warm=20, peak=3e-4):
    return [peak * (i + 1) / warm if i < warm else peak * 0.5 * (1 + math.cos(math.pi * (i - warm) / (n - warm)))
            for i in range(n)]


def kinds(values, **kw):
    return [a.kind for a in ts.lr_anomalies(s_of(values, name="lr"), **kw)]


def test_lr_healthy_shapes_raise_nothing():
    assert kinds(_warmup_cosine()) == []
    # Linear decay to exactly zero at the last point, after a warmup from zero.
    lin = [0.0] + [1e-4 * i / 10 for i in range(1, 11)] + [1e-4 * (1 - i / 50) for i in range(1, 51)]
    assert kinds(lin) == []
    # StepLR gamma=0.1 every 30 points: a planned staircase.
    assert kinds([0.1 * 0.1 ** (i // 30) for i in range(120)]) == []
    assert kinds([1e-3] * 50) == []  # constant, nothing configured


def test_lr_zero_while_training():
    a = ts.lr_anomalies(s_of([0.0] * 40, name="lr"))
    assert [(x.kind, x.step) for x in a] == [("zero_while_training", 1)]
    assert a[0].numbers["points"] == 40
    # Decays to zero long before the end: wrong total steps.
    vals = [1e-3 * (1 - i / 20) for i in range(21)] + [0.0] * 15
    a = ts.lr_anomalies(s_of(vals, name="lr"))
    assert [(x.kind, x.step) for x in a] == [("zero_while_training", 21)]


def test_lr_warmup_jump():
    vals = [1e-5 * (i + 1) for i in range(10)] + [1e-3] * 20  # warms to 1e-4 then jumps to 1e-3
    a = ts.lr_anomalies(s_of(vals, name="lr"))
    assert [(x.kind, x.step) for x in a] == [("warmup_jump", 11)]
    assert a[0].numbers["peak"] == 1e-3


def test_lr_warmup_over_a_gap_in_the_logged_steps_is_no_jump():
    """A paste that drops lines (`...`) between iterations 200 and 650 of a linear warmup (mmengine logs every
    50, real case gnas#2): the increment over the gap is 9x the others, the slope per step is the same."""
    steps = [50, 100, 150, 200, 650, 700, 750]
    vals = [min(4e-5 * s, 0.02) for s in steps[:4]] + [0.02, 0.02, 0.02]
    df = ts.series(metrics([(s, v, 0) for s, v in zip(steps, vals, strict=True)], "lr"), "lr")
    assert [x.kind for x in ts.lr_anomalies(df) if x.kind == "warmup_jump"] == []
    # The same values logged at consecutive steps do jump.
    assert [x.kind for x in ts.lr_anomalies(s_of(vals, name="lr")) if x.kind == "warmup_jump"] == ["warmup_jump"]


def test_lr_rising_after_decay():
    vals = _warmup_cosine(100)[:70] + _warmup_cosine(100)[20:60]  # scheduler restarted on resume
    a = ts.lr_anomalies(s_of(vals, name="lr"))
    assert [x.kind for x in a] == ["rising_after_decay"]
    assert a[0].step == 71 and a[0].numbers["low"] == pytest.approx(9.81e-05, rel=1e-3)


def test_lr_constant_when_scheduled_and_staircase():
    assert kinds([1e-3] * 50, scheduled=True) == ["constant_when_scheduled"]
    # Cosine over 1000 steps stepped once per 25-step epoch: tiny drops at each epoch boundary.
    stair = [1e-3 * 0.5 * (1 + math.cos(math.pi * (i // 25) / 1000)) for i in range(100)]
    a = ts.lr_anomalies(s_of(stair, name="lr"))
    assert [(x.kind, x.step) for x in a] == [("staircase", 26)]
    assert a[0].numbers["levels"] == 4 and a[0].numbers["points_per_level"] == 25


# ---------------------------------------------------------------- ranks


def _two_ranks(v0, v1, name="loss"):
    return ts.series(pl.concat([metrics([(i, v, 0) for i, v in enumerate(v0)], name),
                                metrics([(i, v, 1) for i, v in enumerate(v1)], name)]), name)


def test_rank_spread_finds_divergence_onset():
    v0 = [1.0] * 20
    v1 = [1.0] * 12 + [1.0 + 0.1 * i for i in range(1, 9)]
    sp = ts.rank_spread(_two_ranks(v0, v1))
    assert sp.height == 20
    o = ts.onset(sp.rename({"rel_diff": "value"}), pl.col("value") > 0.05, 3)
    assert o.step == 12
    last = sp.row(-1, named=True)
    assert last["max"] == pytest.approx(1.8) and last["ranks"] == 2


def test_identical_across_ranks():
    same = _noisy(30, seed=1)
    ident = ts.identical_across_ranks(_two_ranks(same, same))
    assert (ident.common_steps, ident.identical_steps, ident.first_identical) == (30, 30, 0)
    assert ident.ranks == [0, 1] and ident.fraction == 1.0
    diff = ts.identical_across_ranks(_two_ranks(same, _noisy(30, seed=2)))
    assert diff.identical_steps == 0 and diff.fraction == 0.0


def test_per_rank_ratio_finds_slow_rank():
    df = pl.concat([metrics([(i, 100.0 + (i % 3), r) for i in range(30)], "step_time_ms") for r in range(3)]
                   + [metrics([(i, 180.0, 3) for i in range(25)], "step_time_ms")])
    g = ts.per_rank(ts.series(df, "step_time_ms"))
    slow = g.filter(pl.col("rank") == 3).row(0, named=True)
    assert slow["ratio"] == pytest.approx(180 / 101)
    assert slow["last_step"] == 24
    assert g.filter(pl.col("rank") == 0).item(0, "ratio") == pytest.approx(1.0)


def test_first_divergence_between_runs():
    a = s_of([2.0, 1.9, 1.8, 1.7, 1.6])
    b = s_of([2.0, 1.9, 1.81, 1.75, math.nan])
    o = ts.first_divergence(a, b, rel_tol=1e-3)
    assert (o.step, o.value, o.points) == (3, 1.8, 3)
    assert ts.first_divergence(a, a) is None


def test_step_seconds_from_timestamps():
    t0 = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    df = metrics([(10, 1.0), (20, 1.0), (30, 1.0)]).with_columns(
        pl.Series("ts", [t0, t0 + dt.timedelta(seconds=5), t0 + dt.timedelta(seconds=25)]).dt.cast_time_unit("us")
    )
    out = ts.step_seconds(ts.series(df, "loss"))
    assert out.get_column("step").to_list() == [20, 30]
    assert out.get_column("value").to_list() == pytest.approx([0.5, 2.0])

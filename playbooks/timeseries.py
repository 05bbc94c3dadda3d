"""Vectorised time-series detectors over the `metrics` table, shared by the training-dynamics playbooks.

Every helper takes a *series*: a polars frame with columns step, value and usually
rank, file, line, ts, as returned by `series(metrics, name)`. That function does the
clean-up every detector relies on:

* categorical columns become plain strings;
* rows without a step get their ordinal position (only where a file logs no step at all);
* a step logged more than once per rank (tqdm redraws, a resumed run re-doing steps)
  keeps its last occurrence, so a resumed run's trajectory replaces the abandoned one;
  `restarts()` reports where a step went backwards;
* NaN and Inf stay in the series (`nan-loss` needs them); each detector says how it
  treats them (the rolling and fitting ones use finite values only).

Windows are counted in logged points, not in steps, so a run that logs every N steps
behaves like one that logs every step. Missing steps are simply absent rows.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import polars as pl
import pyarrow as pa
from numpy.lib.stride_tricks import sliding_window_view

# Columns of a series, in order; extra columns are carried along where present.
SERIES_COLS = ["file", "line", "ts", "rank", "step", "value"]

# The largest finite float16 value: a loss scale past it cannot be represented in fp16.
FP16_MAX = 65504.0


@dataclass(frozen=True)
class Point:
    """One logged observation that a finding can quote."""

    step: int | None
    value: float
    rank: int | None = None
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class Onset:
    """The first run of consecutive logged points for which a condition holds."""

    step: int
    end_step: int
    points: int  # logged points in the run
    value: float  # value at the onset
    rank: int | None = None
    file: str | None = None
    line: int | None = None
    to_end: bool = False  # the run lasts until the series' last point


@dataclass(frozen=True)
class Trend:
    """Least-squares line value = intercept + slope * step, with its goodness of fit."""

    slope: float  # value units per step
    intercept: float
    r2: float
    n: int
    first_step: int
    last_step: int
    first_fit: float  # fitted value at first_step
    last_fit: float  # fitted value at last_step

    @property
    def rel_change(self) -> float:
        """Fitted change over the range relative to the fitted start value."""
        if self.first_fit == 0:
            return math.inf if self.last_fit != self.first_fit else 0.0
        return (self.last_fit - self.first_fit) / abs(self.first_fit)


@dataclass(frozen=True)
class Plateau:
    """A stretch of logged points that stays within a relative tolerance of its level."""

    start_step: int
    end_step: int
    points: int
    level: float  # median over the plateau
    rel_spread: float  # (p95 - p5) / |level| over the whole plateau
    rel_drift: float  # (median of its last window - median of its first window) / |level|
    to_end: bool
    rank: int | None = None
    file: str | None = None
    line: int | None = None  # line of the plateau's first point


@dataclass(frozen=True)
class ScaleRuns:
    """Doublings and halvings of a loss-scale series (changes only; flat stretches ignored)."""

    ups: int  # changes by about x2 (or more)
    downs: int  # changes by about x0.5 (or less)
    longest_up: int  # most consecutive up-changes
    longest_up_start: int | None  # step where that run began
    longest_down: int
    longest_down_start: int | None
    first: Point
    last: Point
    min: Point
    max: Point
    steps_at_min: int  # logged points sitting at the minimum value
    above_fp16_max: Point | None  # first point where the scale exceeds FP16_MAX


@dataclass(frozen=True)
class LRAnomaly:
    """One way a logged learning-rate series departs from a warmup/decay shape."""

    kind: str  # zero_while_training | warmup_jump | rising_after_decay | constant_when_scheduled | staircase
    step: int
    value: float
    detail: str
    rank: int | None = None
    file: str | None = None
    line: int | None = None
    numbers: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Identical:
    """How often the ranks log exactly the same value at the same step."""

    ranks: list[int]
    common_steps: int  # steps logged by at least two ranks
    identical_steps: int  # of those, steps where every rank's value is equal
    first_step: int | None  # first common step
    first_identical: int | None
    last_identical: int | None = None

    @property
    def fraction(self) -> float:
        return self.identical_steps / self.common_steps if self.common_steps else 0.0


# --------------------------------------------------------------------------------------------
# Preparing a series
# --------------------------------------------------------------------------------------------


def prepare(metrics: pl.DataFrame | pa.Table) -> pl.DataFrame:
    """The metrics table as polars with categorical/dictionary columns cast to plain strings."""
    df = pl.from_arrow(metrics) if isinstance(metrics, pa.Table) else metrics
    assert isinstance(df, pl.DataFrame)
    casts = {c: pl.String for c, t in df.schema.items() if t in (pl.Categorical,) or isinstance(t, pl.Enum)}
    return df.cast(casts) if casts else df


def names(metrics: pl.DataFrame | pa.Table) -> set[str]:
    """The metric names present."""
    df = prepare(metrics)
    return set(df.get_column("name").unique().drop_nulls().to_list()) if df.height else set()


def _ensure_cols(df: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame | pl.LazyFrame:
    """Add the optional provenance columns as nulls so every helper can select them."""
    missing = {
        "file": pl.String, "line": pl.Int64, "ts": pl.Datetime("us", "UTC"), "rank": pl.Int32,
    }
    have = df.collect_schema().names()
    return df.with_columns(pl.lit(None, t).alias(c) for c, t in missing.items() if c not in have)


# The columns a rank's, step's or window's statistics read, empty.
SLIM_SCHEMA = {"rank": pl.Int32, "step": pl.Int64, "value": pl.Float64}

# A row's position in the series a helper was given (see `slim`).
AT = "_at"


def slim(s: pl.DataFrame, *cols: str) -> pl.DataFrame:
    """The columns a helper computes on (rank, step, value and `cols`) with each row's position in `s` (`AT`).

    A big series is mostly its provenance strings (file, name, source): helpers that filter, sort or
    partition the series work on this instead, and `fetch` takes the provenance of the rows they keep,
    so they copy a few numeric columns, not every string of every row."""
    return _ensure_cols(s).select(pl.int_range(pl.len(), dtype=pl.UInt32).alias(AT), "rank", "step", "value", *cols)


def fetch(out: pl.DataFrame, s: pl.DataFrame, cols: Sequence[str]) -> pl.DataFrame:
    """`out` (rows of `slim(s)`, or aggregates holding one `AT` each) with `cols` of those rows of `s` in place
    of `AT`; `cols` go where `AT` was."""
    at = out.columns.index(AT)
    got = _ensure_cols(s).select(cols)[out.get_column(AT)]
    return pl.concat([out.select(out.columns[:at]), got, out.select(out.columns[at + 1:])], how="horizontal")


def series(
    metrics: pl.DataFrame | pa.Table | pl.LazyFrame,
    name: str | Sequence[str],
    *,
    rank: int | None = None,
    dedupe: bool = True,
    finite: bool = False,
    strings: bool = True,
) -> pl.DataFrame:
    """One metric (or aliases of it) as a clean series sorted by rank and step.

    Where no file of a rank logs the metric with a step, each row's ordinal position in
    its file (1, 2, ...) stands in for the step; otherwise rows without a step are
    dropped (the console dicts of HF Trainer lose to trainer_state.json). With `dedupe`, each (rank, step) keeps its last occurrence in file/line
    order. `finite` drops NaN/Inf rows.

    `metrics` may be a lazy frame (a cached run's rows of the name, dictionary columns categorical): the clean-up
    then runs as one query and only the series it keeps becomes plain strings, so a big metric's rows are not
    held as strings and copied at every step (at 3M rows, about 300 MiB less at the peak). With `strings=False`
    the categorical columns of a lazy frame's rows stay categorical (for a series kept on disk).
    """
    wanted = [name] if isinstance(name, str) else list(name)
    empty = pl.DataFrame(schema={"file": pl.String, "line": pl.Int64, "ts": pl.Datetime("us", "UTC"),
                                 "rank": pl.Int32, "step": pl.Int64, "value": pl.Float64, "name": pl.String})
    if isinstance(metrics, pl.LazyFrame):
        lf = metrics
    else:
        df = prepare(metrics)
        if df.height == 0:
            return empty
        lf = df.lazy()
    lf = _ensure_cols(lf).filter(pl.col("name").is_in(wanted))
    if rank is not None:
        lf = lf.filter(pl.col("rank") == rank)
    parts = list(_pieces(lf if isinstance(metrics, pl.LazyFrame) else lf.collect(), finite, dedupe))
    out = pl.concat(parts) if len(parts) > 1 else parts[0]
    if out.height == 0 and isinstance(metrics, pl.LazyFrame) and metrics.select(pl.len()).collect().item() == 0:
        return empty  # what an empty table gives (below)
    return out.with_columns(pl.col(pl.Categorical).cast(pl.String)) if strings else out


# Rows of a metric cleaned at once by `series_parts`: whole ranks up to this many rows (one rank may have more).
PART_ROWS = 1 << 18


def series_pieces(metrics: pl.LazyFrame, name: str | Sequence[str], *, dedupe: bool = True,
                  finite: bool = False, apart: bool = True) -> Iterator[pl.DataFrame]:
    """`series(metrics, name, strings=False)` of a lazy frame (a cached run's rows of the name) in pieces, in order
    (see `series_parts`, and `apart` there): a consumer that streams them (a spill to disk) never holds the whole
    series. Nothing when the frame has no rows."""
    wanted = [name] if isinstance(name, str) else list(name)
    yield from _pieces(_ensure_cols(metrics).filter(pl.col("name").is_in(wanted)), finite, dedupe, apart)


def _pieces(rows: pl.LazyFrame | pl.DataFrame, finite: bool, dedupe: bool, apart: bool = True) -> Iterator[pl.DataFrame]:
    if not dedupe:
        yield _clean(rows.lazy(), finite, dedupe).collect()
        return
    yield from series_parts(rows, finite, apart=apart)


def series_parts(rows: pl.LazyFrame | pl.DataFrame, finite: bool, *, apart: bool = True) -> Iterator[pl.DataFrame]:
    """`series`' deduplicated rows of one metric one rank at a time, in the series' order (their concatenation
    is the series). Every step of the clean-up works within one rank, and deduplicated rows have no ties to order,
    so ranks are cleaned a few at a time: the sorts' temporaries hold those ranks' rows, not all. From a lazy frame
    (a cached run's rows of the name) each piece reads only its ranks' rows, so the whole metric is never in
    memory (categorical columns stay categorical). With `apart=False` the ranks cleaned together stay in one piece
    (whole ranks, about `PART_ROWS` rows; a big rank still comes in windows of its steps): for a consumer that puts
    pieces together anyway (thousands of tiny ranks are not split only to be joined again)."""
    split = _by_rank if apart else (lambda df: [df])
    lf = rows.lazy()
    counts = lf.group_by("rank").agg(pl.len().alias("n"), pl.col("step").min().alias("lo"), pl.col("step").max().alias("hi")) \
        .collect().sort("rank", nulls_last=True)
    if counts.height == 0:
        yield _clean(lf, finite, True).collect()
        return
    batch: list[int | None] = []
    size = 0
    for r, n, lo, hi in counts.iter_rows():
        if batch and size + n > PART_ROWS:
            yield from split(_clean(lf.filter(_ranks_in(batch)), finite, True).collect(engine="streaming"))
            batch, size = [], 0
        if n > PART_ROWS and lo is not None:
            yield from _rank_in_steps(lf.filter(_ranks_in([r])), n, lo, hi, finite)
            continue
        batch.append(r)
        size += n
    if batch:
        yield from split(_clean(lf.filter(_ranks_in(batch)), finite, True).collect(engine="streaming"))


def _rank_in_steps(rows: pl.LazyFrame, n: int, lo: int, hi: int, finite: bool) -> Iterator[pl.DataFrame]:
    """The clean series of one big rank that logs steps, a window of about `PART_ROWS` of its rows' steps at a time, in
    step order. Such a rank's rows without a step are dropped and each step keeps its last row (see `series`):
    both decided within the rows of that step, so each window's clean-up is the series' rows of its steps, and the
    sorts' temporaries hold one window (a cached run's rows are read by row groups of those steps)."""
    count = -(-n // PART_ROWS)
    width = max(1, -(-(hi - lo + 1) // count))
    piece, some = None, False
    for a in range(lo, hi + 1, width):
        piece = _clean(rows.filter((pl.col("step") >= a) & (pl.col("step") < a + width)), finite, True).collect(engine="streaming")
        if piece.height:
            some = True
            yield piece
    if not some and piece is not None:
        yield piece  # every value of the rank was dropped (not finite): its empty piece, for the schema


def _by_rank(df: pl.DataFrame) -> list[pl.DataFrame]:
    """A cleaned piece as one frame per rank (a reader of one rank then holds that rank only)."""
    return df.partition_by("rank", maintain_order=True) if df.height and df.get_column("rank").n_unique() > 1 else [df]


def _ranks_in(ranks: list[int | None]) -> pl.Expr:
    """Rows of these ranks (None: the rows without a rank)."""
    known = [r for r in ranks if r is not None]
    hit = pl.col("rank").is_in(known) if known else pl.lit(False)
    return hit | pl.col("rank").is_null() if None in ranks else hit


def _clean(lf: pl.LazyFrame, finite: bool, dedupe: bool) -> pl.LazyFrame:
    """`series`' query over the rows of one metric (see there)."""
    grp = ["file", "rank"]
    lf = (
        # Files in name order even where the column is categorical (its codes follow first appearance).
        lf.sort(pl.col("file").cast(pl.String), "line", nulls_last=True, maintain_order=True)
        .with_columns(
            pl.col("step").is_not_null().any().over(grp).alias("_has_step"),
            (pl.int_range(pl.len()).over(grp) + 1).cast(pl.Int64).alias("_ord"),
        )
        # A file with real steps for this rank (trainer_state.json) outranks one without (the
        # console dicts): positions are only a stand-in when no file of the rank knows the step.
        .with_columns(pl.col("_has_step").any().over("rank").alias("_rank_has_step"))
        .filter(pl.col("step").is_not_null() | ~pl.col("_rank_has_step"))
        .with_columns(pl.coalesce("step", "_ord").alias("step"))
        .drop("_has_step", "_rank_has_step", "_ord")
    )
    if finite:
        lf = lf.filter(pl.col("value").is_finite())
    if dedupe:
        # The last row of each (rank, step) in file/line order: sorted by rank, step and position,
        # a row is kept when the next one has another rank or step. The same rows as
        # unique(keep="last") (a null rank is one group, as there), at a fraction of its memory.
        lf = (lf.with_row_index("_i").sort("rank", "step", "_i", nulls_last=True)
              .filter(pl.col("rank").ne_missing(pl.col("rank").shift(-1)) | pl.col("step").ne_missing(pl.col("step").shift(-1)))
              .drop("_i"))
    have = lf.collect_schema().names()
    cols = [c for c in SERIES_COLS if c in have] + [c for c in ("name", "source") if c in have]
    return lf.select(cols).sort("rank", "step", nulls_last=True)


def restarts(metrics: pl.DataFrame | pa.Table | pl.LazyFrame, name: str | Sequence[str] = "loss") -> pl.DataFrame:
    """Where the step of a metric goes backwards within one file and rank (a resume or a restarted loop).

    Columns: file, rank, line (first line after the restart), from_step, to_step. A lazy frame (a cached run's rows
    of the names, file categorical) is read with these columns only, its files as strings only in the result.
    """
    wanted = [name] if isinstance(name, str) else list(name)
    lf = metrics if isinstance(metrics, pl.LazyFrame) else prepare(metrics).lazy()
    lf = (_ensure_cols(lf).filter(pl.col("name").is_in(wanted) & pl.col("step").is_not_null())
          .select("file", "rank", "line", "step"))
    lf = lf.sort("file", "line", nulls_last=True).with_columns(
        pl.col("step").shift(1).over("file", "rank").alias("from_step")
    )
    return lf.filter(pl.col("step") < pl.col("from_step")).select(
        pl.col("file").cast(pl.String), "rank", "line", "from_step", pl.col("step").alias("to_step")
    ).collect()


def _point(row: dict) -> Point:
    return Point(step=row.get("step"), value=row.get("value"), rank=row.get("rank"),
                 file=row.get("file"), line=row.get("line"))


# --------------------------------------------------------------------------------------------
# Onset of a sustained condition
# --------------------------------------------------------------------------------------------


def runs(s: pl.DataFrame, predicate: pl.Expr, min_points: int = 1) -> pl.DataFrame:
    """Maximal runs of consecutive logged points (per rank) where `predicate` holds.

    Columns: rank, start_step, end_step, points, start_value, end_value, file, line
    (of the first point), to_end (the run reaches the rank's last point). Sorted by
    start_step. Note that polars orders NaN above every number: guard a comparison
    with `pl.col("value").is_finite()` when NaN must not count.
    """
    s = _ensure_cols(s)
    if s.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int32, "start_step": pl.Int64, "end_step": pl.Int64,
                                    "points": pl.UInt32, "start_value": pl.Float64, "end_value": pl.Float64,
                                    "file": pl.String, "line": pl.Int64, "to_end": pl.Boolean})
    # The columns the predicate reads, and the row positions for the provenance of each run's first point.
    need = [c for c in predicate.meta.root_names() if c not in ("rank", "step", "value")]
    rows = slim(s, *dict.fromkeys(need))
    # Runs are within one rank and the predicate is row-wise: whole ranks of about `PART_ROWS` rows at a time, so the
    # temporaries hold that many rows, and thousands of tiny ranks take one pass, not one each.
    out = pl.concat([_runs_of(rows.filter(_ranks_in(batch)), predicate) for batch in rank_batches(rows, PART_ROWS)])
    out = out.filter(pl.col("points") >= min_points).sort("start_step", "rank", nulls_last=True)
    return fetch(out, s, ["file", "line"])


def _runs_of(rows: pl.DataFrame, predicate: pl.Expr) -> pl.DataFrame:
    """`runs` of one rank's rows of `slim` (`AT` in place of file and line, every run however short)."""
    flagged = rows.sort("rank", "step", nulls_last=True).with_columns(
        predicate.fill_null(False).alias("_p"),
        (pl.int_range(pl.len()).over("rank")).alias("_i"),
        pl.len().over("rank").alias("_n"),
    ).with_columns((pl.col("_p") != pl.col("_p").shift(1).over("rank")).fill_null(True).cum_sum().alias("_run"))
    return (
        flagged.filter(pl.col("_p"))
        .group_by("rank", "_run", maintain_order=True)
        .agg(
            pl.col("step").first().alias("start_step"),
            pl.col("step").last().alias("end_step"),
            pl.len().alias("points"),
            pl.col("value").first().alias("start_value"),
            pl.col("value").last().alias("end_value"),
            pl.col(AT).first(),
            (pl.col("_i").last() == pl.col("_n").last() - 1).alias("to_end"),
        )
        .drop("_run")
    )


def onset(s: pl.DataFrame, predicate: pl.Expr, min_points: int = 1) -> Onset | None:
    """The first step (over all ranks) from which `predicate` holds for >= `min_points` consecutive logged points."""
    r = runs(s, predicate, min_points)
    if r.height == 0:
        return None
    row = r.row(0, named=True)
    return Onset(step=row["start_step"], end_step=row["end_step"], points=row["points"], value=row["start_value"],
                 rank=row["rank"], file=row["file"], line=row["line"], to_end=row["to_end"])


def rank_batches(rows: pl.DataFrame, limit: int) -> list[list[int | None]]:
    """The ranks of some rows (None: the rows without a rank), lowest first (None last), in batches of whole ranks of
    about `limit` rows (a rank with more alone): what a computation that never crosses ranks handles at once."""
    counts = rows.group_by("rank").len().sort("rank", nulls_last=True)
    out: list[list[int | None]] = []
    size = 0
    for r, n in counts.iter_rows():
        if out and size + n <= limit:
            out[-1].append(r)
            size += n
        else:
            out.append([r])
            size = n
    return out


def joined(parts: Iterable[pl.DataFrame], limit: int | None = None) -> Iterator[pl.DataFrame]:
    """Consecutive frames of a series put together up to about `limit` rows (a bigger one alone), in order, each one
    contiguous in memory: per-rank pieces of a series (`series_parts`, `series_ranks`) handled or stored a few
    thousand rows at a time, not one call (or one stored batch) per rank. Two pieces of one rank (windows of a big
    rank's steps) are never put together: each stays what it was alone. Empty frames are left out, unless every
    frame is empty (the first is given then, for its schema). `limit` defaults to `PART_ROWS`."""
    limit = limit or PART_ROWS
    buf: list[pl.DataFrame] = []
    size, last, empty = 0, None, None
    for p in parts:
        if not p.height:
            empty = p if empty is None else empty
            continue
        ranks = p.get_column("rank") if "rank" in p.columns else pl.Series([None])  # no rank column: one rank
        if buf and (size + p.height > limit or ranks[0] == last):
            yield pl.concat(buf, rechunk=True) if len(buf) > 1 else buf[0]
            buf, size = [], 0
        buf.append(p)
        size += p.height
        last = ranks[-1]
    if buf:
        yield pl.concat(buf, rechunk=True) if len(buf) > 1 else buf[0]
    elif empty is not None:
        yield empty


def onset_over(parts: Iterable[pl.DataFrame], predicate: pl.Expr, min_points: int = 1) -> Onset | None:
    """`onset` of a series given in pieces of whole ranks (the pieces of `series_parts`, or one rank at a time): the
    same onset, with a few pieces in memory at a time (runs never cross ranks; each batch of pieces gives its first
    run; tiny pieces are put together so that thousands of tiny ranks take a few passes, not one each)."""
    firsts = [r.head(1) for r in (runs(p, predicate, min_points) for p in joined(parts)) if r.height]
    if not firsts:
        return None
    row = pl.concat(firsts).sort("start_step", "rank", nulls_last=True).row(0, named=True)
    return Onset(step=row["start_step"], end_step=row["end_step"], points=row["points"], value=row["start_value"],
                 rank=row["rank"], file=row["file"], line=row["line"], to_end=row["to_end"])


def first_nonfinite(s: pl.DataFrame) -> Onset | None:
    """The first NaN/Inf value and how many consecutive logged points stay non-finite."""
    return onset(s, ~pl.col("value").is_finite(), 1)


def lowest_rank(s: pl.DataFrame) -> pl.DataFrame:
    """The series of its lowest rank (all of it when no rank is known), sorted by step."""
    ranks = s.get_column("rank").drop_nulls() if "rank" in s.columns else pl.Series([], dtype=pl.Int32)
    return (s.filter(pl.col("rank") == ranks.min()) if ranks.len() else s).sort("step")


def expanding_baseline(part: pl.DataFrame) -> pl.DataFrame:
    """A one-rank series (sorted by step) with `_n` (finite points before each row), `baseline` (the median
    of all of them: too few points for a trailing window, so every earlier point is the neighbourhood),
    `_next` (the next finite value) and `_min_after` / `_n_after` (smallest value and count of the finite
    points after it)."""
    v = pl.col("value")
    prior = pl.when(v.is_finite()).then(v).otherwise(None)
    return part.with_columns(
        prior.cum_count().shift(1).fill_null(0).alias("_n"),
        prior.rolling_median(window_size=max(part.height, 1), min_samples=1).shift(1).alias("baseline"),
        prior.shift(-1).alias("_next"),
        prior.reverse().cum_min().forward_fill().reverse().shift(-1).alias("_min_after"),
        prior.reverse().cum_count().reverse().shift(-1).fill_null(0).alias("_n_after"),
    ).with_columns(pl.col("baseline").forward_fill())


# --------------------------------------------------------------------------------------------
# Rolling median / MAD spikes
# --------------------------------------------------------------------------------------------


def _window_stats(win: np.ndarray, nan: bool) -> tuple[np.ndarray, np.ndarray]:
    """Median and MAD of each row of a window matrix."""
    med_f = np.nanmedian if nan else np.median
    m = med_f(win, axis=1)
    return m, med_f(np.abs(win - m[:, None]), axis=1)


def _trailing_median(x: np.ndarray, window: int) -> np.ndarray:
    """For each point i >= `window`, the median of x[i-window:i]; NaN before.

    The same floats as numpy's median (the mean of the two middle order statistics, or the middle
    one), from polars' rolling order statistics, which pick values without arithmetic: O(n log w)
    instead of a partition of every window."""
    n = len(x)
    med = np.full(n, np.nan)
    if n > window:
        v = pl.Series(x[:-1], dtype=pl.Float64)
        lo = v.rolling_quantile(0.5, "lower", window_size=window).to_numpy()[window - 1:]
        hi = v.rolling_quantile(0.5, "higher", window_size=window).to_numpy()[window - 1:]
        med[window:] = (lo + hi) / 2  # numpy's median is mean(lo, hi): (lo + hi) / 2, also when lo == hi
    return med


def _trailing_mad(x: np.ndarray, med: np.ndarray, window: int, rows: np.ndarray, chunk: int = 50000) -> np.ndarray:
    """The MAD of the full trailing windows of the points `rows` (all >= `window`), around `med`."""
    full = sliding_window_view(x, window)  # full[j] = x[j:j+window], the window before point j+window
    out = np.empty(len(rows))
    for a in range(0, len(rows), chunk):
        idx = rows[a:a + chunk]
        out[a:a + chunk] = np.median(np.abs(full[idx - window] - med[idx][:, None]), axis=1)
    return out


def _trailing_stats(x: np.ndarray, window: int, min_points: int, chunk: int = 50000) -> tuple[np.ndarray, np.ndarray]:
    """Exact median and MAD over the `window` values before each point (numpy sliding windows, in
    chunks to bound memory); NaN where fewer than `min_points`. Only the first `window` points have
    partial windows (NaN-aware, slower); the rest are full."""
    n = len(x)
    med, mad = _trailing_head(x, window, min_points)
    if n > window:
        med[window:] = _trailing_median(x, window)[window:]
        mad[window:] = _trailing_mad(x, med, window, np.arange(window, n), chunk)
    return med, mad


def _trailing_head(x: np.ndarray, window: int, min_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Median and MAD of the partial windows of the first `window` points (NaN elsewhere)."""
    n = len(x)
    med, mad = np.full(n, np.nan), np.full(n, np.nan)
    head = min(n, window)
    if head > min_points:
        pad = np.concatenate([np.full(window, np.nan), x[:head]])
        win = sliding_window_view(pad, window)[min_points:head]  # point i sees x[max(0, i-window):i]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            med[min_points:head], mad[min_points:head] = _window_stats(win, nan=True)
    return med, mad


def robust_z(s: pl.DataFrame, window: int = 50, min_points: int = 10,
             rel_floor: float = 0.01, abs_floor: float = 1e-12, upper_q: float | None = None) -> pl.DataFrame:
    """Add the trailing median, MAD and robust z-score of each finite point, per rank.

    The baseline of point i is the median of the `window` finite points before it (the
    point itself is excluded, so a spike does not raise its own baseline); the MAD is the
    median absolute deviation of that same window, scaled by 1.4826 to match a standard
    deviation under normality, and floored at `rel_floor * |median|` so that a perfectly
    flat series does not turn noise into infinite z-scores. With `upper_q`, the scale is
    at least the window's `upper_q` quantile of each point's deviation from its local level
    (the median of the 5 points before it), in sigma units (q / z(q)): mini-batch losses are
    right-skewed, and their ordinary upper tail is not a spike. Windows with fewer than `min_points` values give no z. Non-finite rows are dropped.
    """
    z = _robust_z(s, window, min_points, rel_floor, abs_floor, upper_q)
    return fetch(z.drop("rank", "step", "value"), s, _ensure_cols(s).columns)


def _robust_z(s: pl.DataFrame, window: int, min_points: int, rel_floor: float, abs_floor: float,
              upper_q: float | None, beyond: tuple[float, str] | None = None, keep: pl.Expr | None = None) -> pl.DataFrame:
    """robust_z; with `beyond` = (k, direction), the MAD (and so z) only of the points that can be
    `k` robust deviations out in that direction: the others get a null z. With `keep`, only the rows it holds for.

    Which points can: the scale is the largest of 1.4826 * MAD and the floors, so |value - median|
    over the largest floor bounds |z| from above (division rounds monotonically); a point whose
    bound is not above k is no spike whatever its MAD. The MAD, a median per window, is the
    costly part; the bound needs only the rolling median, and few points pass it.

    Every window is within one rank, so the ranks are scored one at a time (the temporaries hold one rank's points)
    and `keep` filters each before the next."""
    f = slim(s).filter(pl.col("value").is_finite()).sort("rank", "step", nulls_last=True)
    parts = f.partition_by("rank", maintain_order=True) if f.height else [f]
    del f
    out = []
    while parts:
        z = _robust_z_rank(parts.pop(0), window, min_points, rel_floor, abs_floor, upper_q, beyond)
        out.append(z if keep is None else z.filter(keep))
    return pl.concat(out)


def _robust_z_rank(f: pl.DataFrame, window: int, min_points: int, rel_floor: float, abs_floor: float,
                   upper_q: float | None, beyond: tuple[float, str] | None) -> pl.DataFrame:
    """_robust_z of one rank's finite points, sorted by step (or of no points)."""
    parts = f.partition_by("rank", maintain_order=True) if f.height else []
    xs = [part.get_column("value").to_numpy() for part in parts]
    heads = [_trailing_head(x, window, min_points) for x in xs]
    meds = []
    for x, (m, _) in zip(xs, heads, strict=True):
        if len(x) > window:
            m[window:] = _trailing_median(x, window)[window:]
        meds.append(m)
    f = pl.concat(parts) if parts else f
    f = f.with_columns(pl.Series("median", np.concatenate(meds) if meds else np.array([]), pl.Float64).fill_nan(None))
    floors = [rel_floor * pl.col("median").abs(), pl.lit(abs_floor)]
    if upper_q is not None:
        # The upper tail of the noise around the *local* level (median of the 5 points before each
        # point), so a trend inside the window (a falling loss) does not pass for noise.
        local = pl.col("value") - pl.col("value").rolling_median(5, min_samples=1).shift(1).over("rank")
        hi = local.rolling_quantile(upper_q, "linear", window, min_samples=min_points).shift(1).over("rank")
        f = f.with_columns(hi.alias("_hi"))
        floors.append(pl.col("_hi") / NormalDist().inv_cdf(upper_q))
    if beyond is None:
        need = None
    else:
        k, direction = beyond
        dev = {"up": pl.col("value") - pl.col("median"), "down": pl.col("median") - pl.col("value"),
               "both": (pl.col("value") - pl.col("median")).abs()}[direction]
        # 0.999: a margin for safety only; the bound is exact.
        need = f.select((dev / pl.max_horizontal(*floors) > 0.999 * k).fill_null(False)).to_series().to_numpy()
    mads = []
    offset = 0
    for x, m, (_, mad) in zip(xs, meds, heads, strict=True):
        n = len(x)
        if n > window:
            rows = np.arange(window, n)
            if need is not None:
                rows = rows[need[offset + window:offset + n]]
            mad[rows] = _trailing_mad(x, m, window, rows)
        mads.append(mad)
        offset += n
    f = f.with_columns(pl.Series("mad", np.concatenate(mads) if mads else np.array([]), pl.Float64).fill_nan(None))
    scale_parts = [1.4826 * pl.col("mad"), *floors]
    scale = pl.when(pl.col("mad").is_not_null()).then(pl.max_horizontal(*scale_parts))
    out = f.with_columns(((pl.col("value") - pl.col("median")) / scale).alias("z"), scale.alias("scale"))
    return out.drop("_hi") if "_hi" in out.columns else out


def spikes(s: pl.DataFrame, k: float = 5.0, window: int = 50, min_points: int = 10,
           rel_floor: float = 0.01, direction: str = "up", upper_q: float | None = None) -> pl.DataFrame:
    """Points more than `k` robust deviations from their trailing median (`up`, `down` or `both`).

    Columns: those of the series plus median, mad, scale, z, ratio (value / median).
    """
    cond = {"up": pl.col("z") > k, "down": pl.col("z") < -k, "both": pl.col("z").abs() > k}[direction]
    z = _robust_z(s, window, min_points, rel_floor, 1e-12, upper_q, beyond=(k, direction), keep=cond.fill_null(False))
    z = fetch(z.drop("rank", "step", "value"), s, _ensure_cols(s).columns)
    return z.with_columns((pl.col("value") / pl.col("median")).alias("ratio"))


def recovered(s: pl.DataFrame, after_step: int, level: float, within: int = 20, rel_tol: float = 0.1,
              rank: int | None = None) -> bool:
    """Whether some finite value within `within` points after `after_step` returns to `level` (+ rel_tol)."""
    f = _ensure_cols(s).filter(pl.col("step") > after_step)
    if rank is not None:
        f = f.filter(pl.col("rank") == rank)
    f = f.sort("step").head(within)
    ok = f.filter(pl.col("value").is_finite() & (pl.col("value") <= level * (1 + rel_tol) + 1e-12))
    return ok.height > 0


# --------------------------------------------------------------------------------------------
# Trend
# --------------------------------------------------------------------------------------------


def trends(s: pl.DataFrame, by: str | None = "rank") -> pl.DataFrame:
    """Least-squares slope of value on step with R², per group, over finite values.

    Columns: [by], n, slope, intercept, r2, first_step, last_step, first_fit, last_fit.
    R² is 1 for a perfect line and 0 when step explains none of the variance (also 0
    when the series is constant).
    """
    keep = list(dict.fromkeys(c for c in (by, "step", "value") if c))  # a copy of these columns only
    f = _ensure_cols(s).select(keep).filter(pl.col("value").is_finite() & pl.col("step").is_not_null())
    x = pl.col("step").cast(pl.Float64)
    y = pl.col("value")
    aggs = [
        pl.len().alias("n"),
        (pl.cov(x, y) / x.var()).alias("slope"),
        x.mean().alias("_mx"),
        y.mean().alias("_my"),
        pl.when(y.var() > 0).then(pl.corr(x, y) ** 2).otherwise(0.0).alias("r2"),
        pl.col("step").min().alias("first_step"),
        pl.col("step").max().alias("last_step"),
    ]
    g = f.group_by(by, maintain_order=True).agg(aggs) if by else f.select(aggs)
    g = g.with_columns(pl.col("slope").fill_nan(0.0).fill_null(0.0), pl.col("r2").fill_nan(0.0))
    g = g.with_columns((pl.col("_my") - pl.col("slope") * pl.col("_mx")).alias("intercept")).with_columns(
        (pl.col("intercept") + pl.col("slope") * pl.col("first_step")).alias("first_fit"),
        (pl.col("intercept") + pl.col("slope") * pl.col("last_step")).alias("last_fit"),
    )
    return g.drop("_mx", "_my")


def trend(s: pl.DataFrame) -> Trend | None:
    """The least-squares trend of the whole series (all ranks pooled); None with fewer than 3 finite points."""
    g = trends(s, by=None)
    if g.height == 0 or g.item(0, "n") < 3:
        return None
    r = g.row(0, named=True)
    return Trend(slope=r["slope"], intercept=r["intercept"], r2=r["r2"], n=r["n"], first_step=r["first_step"],
                 last_step=r["last_step"], first_fit=r["first_fit"], last_fit=r["last_fit"])


def trend_over(parts: Iterable[pl.DataFrame]) -> Trend | None:
    """`trend` of a series given in pieces (one rank at a time), one piece in memory at a time: each piece's count,
    means and centred sums of squares and products, pooled (Chan et al.'s update). A series of one piece gives
    `trend`'s numbers exactly; pooled pieces give the same fit up to float rounding."""
    only, pooled = None, None
    for part in parts:
        f = _ensure_cols(part).select("step", "value").filter(pl.col("value").is_finite() & pl.col("step").is_not_null())
        if f.height == 0:
            continue
        if only is None and pooled is None:
            only = part
            continue
        if pooled is None:
            pooled = _moments(_ensure_cols(only).select("step", "value")
                              .filter(pl.col("value").is_finite() & pl.col("step").is_not_null()))
        pooled = _pool(pooled, _moments(f))
    if pooled is None:
        return trend(only) if only is not None else None
    n, mx, my, sxx, syy, sxy, lo, hi = pooled
    if n < 3:
        return None
    slope = sxy / sxx if sxx > 0 else 0.0
    r2 = (sxy / math.sqrt(sxx * syy)) ** 2 if sxx > 0 and syy > 0 else 0.0
    intercept = my - slope * mx
    return Trend(slope=slope, intercept=intercept, r2=r2, n=n, first_step=lo, last_step=hi,
                 first_fit=intercept + slope * lo, last_fit=intercept + slope * hi)


def _moments(f: pl.DataFrame) -> tuple:
    """(n, mean step, mean value, centred sums of squares of step and value, of their product, first and last step)."""
    x = f.get_column("step").cast(pl.Float64).to_numpy()
    y = f.get_column("value").to_numpy()
    mx, my = float(x.mean()), float(y.mean())
    dx, dy = x - mx, y - my
    return (len(x), mx, my, float(dx @ dx), float(dy @ dy), float(dx @ dy),
            int(f.get_column("step").min()), int(f.get_column("step").max()))


def _pool(a: tuple, b: tuple) -> tuple:
    na, mxa, mya, sxxa, syya, sxya, loa, hia = a
    nb, mxb, myb, sxxb, syyb, sxyb, lob, hib = b
    n = na + nb
    dx, dy = mxb - mxa, myb - mya
    w = na * nb / n
    return (n, mxa + dx * nb / n, mya + dy * nb / n, sxxa + sxxb + dx * dx * w, syya + syyb + dy * dy * w,
            sxya + sxyb + dx * dy * w, min(loa, lob), max(hia, hib))


def order_stats(read: Callable[[], Iterable[np.ndarray]], ks: Sequence[int], keep: int = 1 << 21) -> list[float]:
    """The `k`-th smallest (0-based) of the numbers `read()` gives in pieces (no NaN), for each k of `ks`: exact, each
    pass reading the pieces again and holding a histogram per k and at most `keep` candidates, never every number (a
    radix selection on the numbers' order-preserving 64-bit keys, 16 bits a pass; two passes for most data)."""
    # Per k: [prefix, bits, rank among the candidates, how many candidates (-1: not known yet)], the candidates
    # being the keys whose top `bits` bits are `prefix`.
    state = [[0, 0, k, -1] for k in ks]
    out: list[float | None] = [None] * len(ks)

    def candidates(x: np.ndarray, prefix: int, bits: int) -> np.ndarray:
        return x[(x >> np.uint64(64 - bits)) == np.uint64(prefix)] if bits else x

    while any(v is None for v in out):
        open_ = [i for i, v in enumerate(out) if v is None]
        narrow = [i for i in open_ if not 0 <= state[i][3] <= keep and state[i][1] < 64]
        hists = {i: np.zeros(1 << 16, np.int64) for i in narrow}
        got: dict[int, list[np.ndarray]] = {i: [] for i in open_ if i not in hists}
        for x in read():
            key = _sort_key(x)
            for i in narrow:
                prefix, bits = state[i][:2]
                top = (candidates(key, prefix, bits) >> np.uint64(48 - bits)) & np.uint64(0xFFFF)
                hists[i] += np.bincount(top.astype(np.int64), minlength=1 << 16)
            for i in got:
                got[i].append(candidates(key, *state[i][:2]))
        for i, hist in hists.items():
            prefix, bits, rank, _ = state[i]
            cum = np.cumsum(hist)
            b = int(np.searchsorted(cum, rank, side="right"))
            state[i] = [(prefix << 16) | b, bits + 16, rank - (int(cum[b - 1]) if b else 0), int(hist[b])]
        for i, pieces in got.items():
            rank = state[i][2]
            out[i] = _from_key(np.partition(np.concatenate(pieces), rank)[rank])
    return [float(v) for v in out if v is not None]


def _sort_key(x: np.ndarray) -> np.ndarray:
    """Floats as unsigned keys in the same order (negatives bit-flipped, positives with the sign bit set)."""
    b = np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)
    return np.where(b >> np.uint64(63), ~b, b | np.uint64(1 << 63))


def _from_key(k: np.uint64) -> float:
    """The float of a `_sort_key` key."""
    k = np.uint64(k)
    b = k ^ np.uint64(1 << 63) if k >> np.uint64(63) else ~k
    return float(np.array([b], np.uint64).view(np.float64)[0])


def median_over(read: Callable[[], Iterable[np.ndarray]], n: int) -> float:
    """The median (the same float as polars') of the `n` numbers `read()` gives in pieces, by `order_stats`."""
    if n % 2:
        return order_stats(read, [n // 2])[0]
    lo, hi = order_stats(read, [n // 2 - 1, n // 2])
    return float(pl.Series([lo, hi]).median())  # polars' interpolation between the two middle numbers


# --------------------------------------------------------------------------------------------
# Plateaus
# --------------------------------------------------------------------------------------------


def plateaus(s: pl.DataFrame, rel_tol: float = 0.02, min_points: int = 20, q: float = 0.05) -> pl.DataFrame:
    """Stretches where every `min_points`-point window stays within `rel_tol` of its median, per rank.

    The spread of a window is (quantile(1-q) - quantile(q)) / |median|, so one outlier
    in a window does not break a plateau. A point is on a plateau when some flat window
    covers it; consecutive covered points form one plateau. Finite values only.
    Columns: rank, start_step, end_step, points, level, rel_spread, rel_drift, to_end, file, line.
    """
    f = slim(s).filter(pl.col("value").is_finite()).sort("rank", "step", nulls_last=True)
    w = min_points
    v = pl.col("value")
    f = f.with_columns(
        v.rolling_quantile(1 - q, window_size=w, interpolation="nearest").over("rank").alias("_hi"),
        v.rolling_quantile(q, window_size=w, interpolation="nearest").over("rank").alias("_lo"),
        v.rolling_median(w).over("rank").alias("_med"),
        pl.int_range(pl.len()).over("rank").alias("_i"),
        pl.len().over("rank").alias("_n"),
    )
    eps = 1e-12
    flat_end = ((pl.col("_hi") - pl.col("_lo")) <= rel_tol * pl.col("_med").abs() + eps).fill_null(False)
    f = f.with_columns(flat_end.alias("_flat"))
    # A point is covered when a flat window ends at it or within the next w-1 points.
    f = f.with_columns(
        pl.col("_flat").cast(pl.Int8).reverse().rolling_max(w, min_samples=1).reverse().over("rank").cast(pl.Boolean)
        .alias("_cov")
    )
    f = f.with_columns((pl.col("_cov") != pl.col("_cov").shift(1).over("rank")).fill_null(True).cum_sum().alias("_run"))
    # The median of each flat window, keyed by the index of its last point, for the drift.
    g = (
        f.filter(pl.col("_cov"))
        .group_by("rank", "_run", maintain_order=True)
        .agg(
            pl.col("step").first().alias("start_step"),
            pl.col("step").last().alias("end_step"),
            pl.len().alias("points"),
            v.median().alias("level"),
            ((v.quantile(1 - q, "nearest") - v.quantile(q, "nearest")) / v.median().abs()).alias("rel_spread"),
            pl.col("_med").filter(pl.col("_flat")).first().alias("_m0"),
            pl.col("_med").filter(pl.col("_flat")).last().alias("_m1"),
            (pl.col("_i").last() == pl.col("_n").last() - 1).alias("to_end"),
            pl.col(AT).first(),
        )
        .with_columns(((pl.col("_m1") - pl.col("_m0")) / pl.col("level").abs()).alias("rel_drift"))
        .filter(pl.col("points") >= w)
        .drop("_run", "_m0", "_m1")
        .sort("start_step", "rank", nulls_last=True)
    )
    return fetch(g, s, ["file", "line"])


def plateau(s: pl.DataFrame, rel_tol: float = 0.02, min_points: int = 20, q: float = 0.05,
            to_end: bool = False) -> Plateau | None:
    """The first plateau (or the first one that lasts until the end, with `to_end`)."""
    g = plateaus(s, rel_tol, min_points, q)
    if to_end:
        g = g.filter(pl.col("to_end"))
    if g.height == 0:
        return None
    r = g.row(0, named=True)
    return Plateau(start_step=r["start_step"], end_step=r["end_step"], points=r["points"], level=r["level"],
                   rel_spread=r["rel_spread"], rel_drift=r["rel_drift"], to_end=r["to_end"], rank=r["rank"],
                   file=r["file"], line=r["line"])


# --------------------------------------------------------------------------------------------
# Doubling / halving runs (loss scale)
# --------------------------------------------------------------------------------------------


def scale_runs(s: pl.DataFrame, up: float = 1.5, down: float = 0.75) -> ScaleRuns | None:
    """Count the loss scale's doublings and halvings and the longest consecutive run of each.

    Only points where the value changes are considered (GradScaler and DeepSpeed hold
    the scale for hundreds of steps between changes); a change by a factor >= `up`
    counts as a doubling, <= `down` as a halving. Pooled over ranks after taking the
    lowest rank (the scale is global). Finite values only.
    """
    f = _ensure_cols(s).filter(pl.col("value").is_finite())
    if f.height == 0:
        return None
    first_rank = f.get_column("rank").drop_nulls().min() if f.get_column("rank").null_count() < f.height else None
    if first_rank is not None:
        f = f.filter(pl.col("rank") == first_rank)
    f = f.sort("step")
    ch = f.with_columns((pl.col("value") / pl.col("value").shift(1)).alias("factor")).filter(
        pl.col("factor").is_not_null() & (pl.col("factor") != 1.0)
    )
    ch = ch.with_columns(
        pl.when(pl.col("factor") >= up).then(1).when(pl.col("factor") <= down).then(-1).otherwise(0).alias("dir")
    ).with_columns((pl.col("dir") != pl.col("dir").shift(1)).fill_null(True).cum_sum().alias("_run"))
    rl = ch.group_by("_run", maintain_order=True).agg(
        pl.col("dir").first(), pl.len().alias("n"), pl.col("step").first().alias("start")
    )

    def longest(d: int) -> tuple[int, int | None]:
        r = rl.filter(pl.col("dir") == d).sort("n", "start", descending=[True, False])
        return (r.item(0, "n"), r.item(0, "start")) if r.height else (0, None)

    lu, lus = longest(1)
    ld, lds = longest(-1)
    vmin = f.get_column("value").min()
    imin = f.filter(pl.col("value") == vmin).row(0, named=True)
    imax = f.sort("value", descending=True).row(0, named=True)
    over = f.filter(pl.col("value") > FP16_MAX)
    return ScaleRuns(
        ups=int((ch.get_column("dir") == 1).sum()), downs=int((ch.get_column("dir") == -1).sum()),
        longest_up=lu, longest_up_start=lus, longest_down=ld, longest_down_start=lds,
        first=_point(f.row(0, named=True)), last=_point(f.row(-1, named=True)),
        min=_point(imin), max=_point(imax), steps_at_min=int((f.get_column("value") == vmin).sum()),
        above_fp16_max=_point(over.row(0, named=True)) if over.height else None,
    )


# --------------------------------------------------------------------------------------------
# Learning-rate shape
# --------------------------------------------------------------------------------------------


def lr_anomalies(
    s: pl.DataFrame,
    *,
    scheduled: bool | None = None,
    min_points: int = 3,
    jump_factor: float = 3.0,
    jump_share: float = 0.25,
    rise_tol: float = 0.05,
    decay_tol: float = 0.1,
    stair_min_levels: int = 3,
    stair_min_points: int = 3,
    stair_small_drop: float = 0.7,
    const_min_points: int = 5,
) -> list[LRAnomaly]:
    """Compare a logged LR series (one rank: the lowest) with warmup/decay shapes.

    Reports, in step order:
    * `zero_while_training`: LR exactly 0 for >= `min_points` consecutive points other
      than the start of a warmup (a decay that reaches 0 only at the last points is normal).
    * `warmup_jump`: in the rising (warmup) part, one increment larger than `jump_factor`
      times the median increment and than `jump_share` of the peak.
    * `rising_after_decay`: once LR fell below (1 - decay_tol) * peak, it rises again by
      more than `rise_tol` * peak above its lowest value since (a restarted scheduler).
    * `constant_when_scheduled`: only when `scheduled` (a decaying schedule) is True: the LR holds its peak
      from the first logged point, or from the end of a warmup, to the last, over >= `const_min_points` points.
    * `staircase`: LR is piecewise constant with >= `stair_min_levels` levels of >=
      `stair_min_points` points each and every drop is small (new/old > `stair_small_drop`):
      a per-step schedule stepped once per epoch. StepLR/MultiStepLR (drops by x0.1 or
      x0.5) do not match.
    """
    f = _ensure_cols(s).filter(pl.col("value").is_finite())
    if f.height < 2:
        return []
    ranks = f.get_column("rank").drop_nulls()
    if ranks.len():
        f = f.filter(pl.col("rank") == ranks.min())
    f = f.sort("step").with_columns(pl.int_range(pl.len()).alias("_i"))
    v = pl.col("value")
    out: list[LRAnomaly] = []
    peak = float(f.get_column("value").max())
    n = f.height
    ipeak = int(f.filter(v == peak).item(0, "_i"))

    def anomaly(kind: str, row: dict, detail: str, **numbers) -> LRAnomaly:
        return LRAnomaly(kind=kind, step=row["step"], value=row["value"], detail=detail, rank=row["rank"],
                         file=row["file"], line=row["line"], numbers=numbers)

    # Zero LR: runs of exact zeros; a leading run followed by a rise is a warmup start,
    # a trailing run shorter than min_points is the end of a decay to zero.
    zr = runs(f, v == 0.0, 1)
    for z in zr.iter_rows(named=True):
        leading = z["start_step"] == f.item(0, "step") and not z["to_end"]
        if leading and z["points"] < min_points:
            continue
        if z["points"] < min_points:
            continue
        row = f.filter(pl.col("step") == z["start_step"]).row(0, named=True)
        out.append(anomaly("zero_while_training", row,
                           f"lr = 0 for {z['points']} logged points (steps {z['start_step']}-{z['end_step']})",
                           points=z["points"], end_step=z["end_step"]))
        break

    # Warmup jump: increments over the rising prefix up to the peak.
    if ipeak >= 2 and peak > 0:
        # Increments per step where steps are logged: a paste that skips lines (`...`) or a log that prints
        # at uneven intervals has larger increments over larger gaps, which is the same warmup slope.
        gap = pl.col("step") - pl.col("step").shift(1)
        inc = f.head(ipeak + 1).with_columns((v - v.shift(1)).alias("inc"), gap.alias("_gap")).filter(pl.col("inc").is_not_null())
        inc = inc.with_columns(pl.when(pl.col("_gap") > 0).then(pl.col("inc") / pl.col("_gap")).otherwise(pl.col("inc")).alias("_rate"))
        pos = inc.filter(pl.col("inc") > 0)
        if pos.height >= 2:
            med = float(pos.get_column("inc").median())
            rate = float(pos.get_column("_rate").median())
            big = inc.filter((pl.col("_rate") > jump_factor * rate) & (pl.col("inc") > jump_share * peak))
            # A jump needs a gradual rise before it; a schedule that starts at its peak has no warmup.
            if big.height and pos.height >= 3:
                row = big.row(0, named=True)
                out.append(anomaly("warmup_jump", row,
                                   f"lr jumps by {row['inc']:.3g} in one logged point (median warmup increment "
                                   f"{med:.3g}, peak {peak:.3g})", jump=row["inc"], median_increment=med, peak=peak))

    # Rising after decay: after the first point below (1 - decay_tol) * peak (past the peak).
    post = f.filter(pl.col("_i") >= ipeak)
    dec = post.filter(v < (1 - decay_tol) * peak)
    if dec.height and peak > 0:
        i0 = int(dec.item(0, "_i"))
        tail = f.filter(pl.col("_i") >= i0).with_columns(v.cum_min().alias("_low"))
        rise = tail.filter(v > pl.col("_low") + rise_tol * peak)
        if rise.height:
            row = rise.row(0, named=True)
            out.append(anomaly("rising_after_decay", row,
                               f"lr rises to {row['value']:.3g} after decaying to {row['_low']:.3g} "
                               f"(peak {peak:.3g})", low=row["_low"], peak=peak, decay_step=int(dec.item(0, "step"))))

    levels = f.with_columns((v != v.shift(1)).fill_null(True).cum_sum().alias("_lvl")).group_by(
        "_lvl", maintain_order=True
    ).agg(pl.len().alias("n"), v.first().alias("value"), pl.col("step").first().alias("step"))

    held = f.filter(pl.col("_i") >= ipeak)
    if scheduled and peak > 0 and held.height >= const_min_points and bool((held.get_column("value") == peak).all()):
        after = f" after a warmup of {ipeak} logged points" if ipeak else ""
        out.append(anomaly("constant_when_scheduled", f.row(ipeak, named=True),
                           f"lr constant at {peak:.3g} over the last {held.height} logged points{after} although a "
                           "decaying schedule is configured", points=held.height, warmup_points=ipeak))

    # Staircase: piecewise constant, long flat levels, small drops.
    if levels.height >= stair_min_levels:
        inner = levels.slice(0, levels.height - 1)  # the last level may be cut short by the end of the run
        ratios = (levels.get_column("value") / levels.get_column("value").shift(1)).slice(1)
        long_levels = bool((inner.get_column("n") >= stair_min_points).all())
        drops = bool((ratios < 1).all())
        small = bool((ratios > stair_small_drop).all())
        if long_levels and drops and small and n >= stair_min_levels * stair_min_points:
            second = levels.row(1, named=True)
            row = f.filter(pl.col("step") == second["step"]).row(0, named=True)
            out.append(anomaly("staircase", row,
                               f"lr is a staircase of {levels.height} levels of ~{int(inner.get_column('n').median())} "
                               f"logged points, each drop x{float(ratios.median()):.4g}: a per-step schedule stepped "
                               "once per epoch", levels=levels.height,
                               points_per_level=int(inner.get_column("n").median()),
                               drop_ratio=float(ratios.median())))
    return sorted(out, key=lambda a: a.step)


# --------------------------------------------------------------------------------------------
# Across ranks
# --------------------------------------------------------------------------------------------


def rank_spread(s: pl.DataFrame, min_ranks: int = 2) -> pl.DataFrame:
    """Per step logged by >= `min_ranks` ranks: the relative spread of the ranks' values.

    Columns: step, ranks, min, max, median, rel_diff ((max - min) / max(|median|, tiny)),
    worst_rank (the rank farthest from the median), line and file of that rank's row.
    Finite values only; sorted by step.
    """
    f = slim(s).filter(pl.col("value").is_finite() & pl.col("rank").is_not_null())
    g = f.with_columns(pl.col("value").median().over("step").alias("_med"), pl.len().over("step").alias("ranks"))
    g = g.filter(pl.col("ranks") >= min_ranks).with_columns((pl.col("value") - pl.col("_med")).abs().alias("_dev"))
    agg = g.sort("step", "_dev", "rank", descending=[False, True, False]).group_by("step", maintain_order=True).agg(
        pl.col("ranks").first(),
        pl.col("value").min().alias("min"),
        pl.col("value").max().alias("max"),
        pl.col("_med").first().alias("median"),
        pl.col("rank").first().alias("worst_rank"),
        pl.col(AT).first(),
    )
    return fetch(agg, s, ["line", "file"]).with_columns(
        ((pl.col("max") - pl.col("min")) / pl.max_horizontal(pl.col("median").abs(), pl.lit(1e-12))).alias("rel_diff")
    ).sort("step")


def identical_across_ranks(s: pl.DataFrame, rel_tol: float = 0.0) -> Identical:
    """How many steps logged by >= 2 ranks carry the same value on every rank (within `rel_tol`)."""
    return identical_over([s], rel_tol)


def spread_over(windows: Iterable[pl.DataFrame], min_ranks: int = 2) -> tuple[pl.DataFrame, list[int]]:
    """`rank_spread` of a series given in windows of whole steps (`metric_series.series_steps`), computed one window
    at a time (the table has one row per step), and the ranks of the series."""
    ranks: set[int] = set()
    parts = []
    for w in windows:
        ranks.update(_ensure_cols(w).get_column("rank").drop_nulls().unique().to_list())
        parts.append(rank_spread(w, min_ranks))
    return (pl.concat(parts) if parts else rank_spread(pl.DataFrame(schema=SLIM_SCHEMA), min_ranks)), sorted(ranks)


def identical_over(windows: Iterable[pl.DataFrame], rel_tol: float = 0.0) -> Identical:
    """`identical_across_ranks` of a series given in windows of whole steps (every rank's rows of each step in one
    window, the windows in step order: `metric_series.series_steps`), one window in memory at a time."""
    ranks: set[int] = set()
    common = same = 0
    first = first_same = last_same = None
    for w in windows:
        ranks.update(_ensure_cols(w).get_column("rank").drop_nulls().unique().to_list())
        sp = rank_spread(w)
        if sp.height == 0:
            continue
        hit = sp.filter(pl.col("rel_diff") <= rel_tol)
        common += sp.height
        same += hit.height
        first = int(sp.item(0, "step")) if first is None else first
        if hit.height:
            first_same = int(hit.item(0, "step")) if first_same is None else first_same
            last_same = int(hit.item(-1, "step"))
    return Identical(ranks=sorted(ranks), common_steps=common, identical_steps=same, first_step=first,
                     first_identical=first_same, last_identical=last_same)


def per_rank(s: pl.DataFrame) -> pl.DataFrame:
    """Per rank: points, first/last step, median, p90 of finite values and the ratio of its median to the
    median of the other ranks' medians (a straggler's step time has ratio > 1)."""
    return per_rank_over([s])


def per_rank_over(parts: Iterable[pl.DataFrame]) -> pl.DataFrame:
    """`per_rank` of a series given in pieces of whole ranks (one rank at a time: `metric_series.series_ranks`),
    one piece in memory at a time."""
    stats = [_rank_stats(p) for p in parts]
    g = pl.concat(stats) if stats else _rank_stats(pl.DataFrame(schema=SLIM_SCHEMA))
    g = g.sort("rank", nulls_last=True)
    meds = g.get_column("median").to_list()
    others = [
        float(pl.Series([m for j, m in enumerate(meds) if j != i]).median()) if len(meds) > 1 else float("nan")
        for i in range(len(meds))
    ]
    return g.with_columns(pl.Series("others_median", others, pl.Float64)).with_columns(
        (pl.col("median") / pl.col("others_median")).alias("ratio")
    )


def _rank_stats(s: pl.DataFrame) -> pl.DataFrame:
    """`per_rank`'s statistics of each rank of some rows (whole ranks)."""
    f = _ensure_cols(s).select("rank", "step", "value").filter(pl.col("value").is_finite())
    return f.group_by("rank").agg(
        pl.len().alias("points"),
        pl.col("step").min().alias("first_step"),
        pl.col("step").max().alias("last_step"),
        pl.col("value").median().alias("median"),
        pl.col("value").quantile(0.9, "linear").alias("p90"),
    )


# --------------------------------------------------------------------------------------------
# Across runs
# --------------------------------------------------------------------------------------------


def first_divergence(a: pl.DataFrame, b: pl.DataFrame, rel_tol: float = 1e-6, min_points: int = 1) -> Onset | None:
    """The first step where two runs' series (lowest rank of each) differ by more than `rel_tol`
    relative, for >= `min_points` consecutive common steps. The onset quotes run `a`'s row and
    its value; NaN in only one of the runs counts as a difference."""

    def low(x: pl.DataFrame) -> pl.DataFrame:
        x = _ensure_cols(x)
        r = x.get_column("rank").drop_nulls()
        return x.filter(pl.col("rank") == r.min()) if r.len() else x

    j = low(a).join(low(b).select("step", pl.col("value").alias("other")), on="step", how="inner")
    diff = (pl.col("value") - pl.col("other")).abs() / pl.max_horizontal(
        pl.col("value").abs(), pl.col("other").abs(), pl.lit(1e-12)
    )
    nan_mismatch = pl.col("value").is_nan() != pl.col("other").is_nan()
    pred = nan_mismatch | (pl.col("value").is_finite() & pl.col("other").is_finite() & (diff > rel_tol))
    return onset(j.with_columns(pl.lit(None, pl.Int32).alias("rank")), pred, min_points)


# --------------------------------------------------------------------------------------------
# Time per step from timestamps
# --------------------------------------------------------------------------------------------


def step_seconds(s: pl.DataFrame) -> pl.DataFrame:
    """Seconds per step derived from the timestamps of consecutive logged steps (per rank).

    The result is a series (value = seconds per step over the interval ending at that
    row's step) for logs that print a timestamp but no step time. Rows without ts drop out.
    """
    f = _ensure_cols(s).filter(pl.col("ts").is_not_null()).sort("rank", "step", nulls_last=True)
    dt = (pl.col("ts") - pl.col("ts").shift(1)).dt.total_microseconds().over("rank") / 1e6
    dstep = (pl.col("step") - pl.col("step").shift(1)).over("rank")
    out = f.with_columns((dt / dstep).alias("value")).filter(pl.col("value").is_not_null() & (pl.col("value") >= 0))
    return out

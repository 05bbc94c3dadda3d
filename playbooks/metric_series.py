"""Helpers for the metric-driven playbooks: metric families by name, clean series, quotable rows, onsets.

Metric names are canonical where the parsers know them (`loss`, `grad_norm`, `lr`, `loss_scale`,
`step_time_ms`, ...); everything else keeps the snake-cased name the log printed, so families such
as "any logged LoRA norm" or "any memory series" are matched by name patterns here, in one place.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator

import polars as pl
from forensics.playbooks import timeseries as ts

from forensics.contracts.context import Context, evidence_rows, plain
from forensics.contracts.model import Evidence, Onset

# Training-loss spellings after canonicalisation (Megatron `lm loss`, fairseq/HF variants).
LOSS = ("loss", "lm_loss", "train_loss", "training_loss", "loss_train", "train/loss")
# Named losses where no total is logged (a GAN's `g_loss`/`d_real_loss`, TF-era `labeling_cost` -> labeling_loss):
# each is part of the objective being trained. Not evaluation losses, nor the loss scale of fp16 training.
LOSS_PART = r"(?:^|_)loss(?:_|$)"
NOT_TRAIN_LOSS = r"^(?:eval|val|valid|validation|test|dev)_|loss_scale"
GRAD_NORM = ("grad_norm",)
LR = ("lr",)
LOSS_SCALE = ("loss_scale",)
STEP_TIME = ("step_time_ms",)
# Series read by several playbooks: computed once per run (see `series`).
SHARED = frozenset(LOSS + GRAD_NORM + LR + LOSS_SCALE + STEP_TIME)

# Vocabulary sizes of widely used tokenizers: a loss flat at ln(V) for one of these means uniform
# prediction (BERT, LLaMA/Mistral, Phi-3, T5, StarCoder, GPT-2/NeoX, Yi, Falcon, cl100k, DeepSeek,
# LLaMA-3, Qwen2, GLM, o200k, mT5/XLM-R, BLOOM, Gemma, Gemma-3).
COMMON_VOCABS = (30522, 32000, 32064, 32100, 32128, 32768, 49152, 50257, 50272, 50304, 51200, 64000, 65024, 65536,
                 100277, 100352, 102400, 128000, 128256, 151646, 151936, 152064, 163840, 200019, 200064, 250002,
                 250112, 250880, 256000, 262144)


def names_like(ctx: Context, pattern: str, exclude: str | None = None) -> list[str]:
    """Metric names present in the run that match a regex (case-insensitive), minus `exclude`."""
    if not ctx.has("metrics"):
        return []
    present = ctx.metric_names
    rx = re.compile(pattern, re.I)
    ex = re.compile(exclude, re.I) if exclude else None
    return sorted(n for n in present if rx.search(n) and not (ex and ex.search(n)))


def present(ctx: Context, names: tuple[str, ...] | list[str]) -> list[str]:
    """Which of `names` the run logs."""
    if not ctx.has("metrics"):
        return []
    have = ctx.metric_names
    return [n for n in names if n in have]


def series(ctx: Context, names: tuple[str, ...] | list[str] | str, *, finite: bool = False,
           dedupe: bool = True) -> pl.DataFrame:
    """The clean series of the first name in `names` that the run logs (see timeseries.series).

    Computed once per run and shared by every playbook that asks (a big run's loss has millions of rows)."""
    wanted = [names] if isinstance(names, str) else list(names)
    have = present(ctx, wanted)
    if not have:
        return ts.series(pl.DataFrame(), "none")
    name = have[0]

    def compute() -> pl.DataFrame:
        return ts.series(ctx.metrics_lazy([name]), name, finite=finite, dedupe=dedupe)

    # Only the series many playbooks read are kept: the others would hold memory for nothing.
    # The kept one is written to disk piece by piece (whole ranks at a time), so it is never whole in memory until read.
    if name in SHARED:
        return ctx.memo_frame(("series", name, finite, dedupe), lambda: _built(ctx, name, finite, dedupe))
    return compute()


# Rows of a piece of a series as kept on disk, and of a frame of `series_batches`, about: a series of thousands of tiny
# ranks (a folder of one small log per rank) is read and decided in a few frames, not one per rank.
BATCH_ROWS = 1 << 16


def _built(ctx: Context, name: str, finite: bool, dedupe: bool) -> Iterator[pl.DataFrame]:
    """The pieces of one metric's series (`ts.series_pieces`: whole ranks, or a window of a big rank's steps), consecutive
    small ones put together up to about `BATCH_ROWS` rows: what is written to disk or read, a few frames however
    many ranks there are (every reader splits them by rank again where it needs to)."""
    return ts.joined(ts.series_pieces(ctx.metrics_lazy([name]), name, finite=finite, dedupe=dedupe, apart=False), BATCH_ROWS)


def series_batches(ctx: Context, names: tuple[str, ...] | list[str] | str, *, finite: bool = False,
                   dedupe: bool = True, cols: tuple[str, ...] | None = None, rows: int | None = None) -> Iterator[pl.DataFrame]:
    """`series(ctx, names, ...)` in frames of whole consecutive ranks, in its order: a frame ends at the first end of a
    rank after about `rows` rows (default `BATCH_ROWS`; one big rank alone has more); their concatenation is the series. A detector that
    decides each rank with polars expressions over ranks (`over("rank")`, `group_by("rank")`) decides thousands of tiny
    ranks in one pass instead of one call per rank; with `cols` (rank among them), only those columns."""
    wanted = [names] if isinstance(names, str) else list(names)
    have = present(ctx, wanted)
    if not have:
        return
    name = have[0]
    # A series few playbooks read is built piece by piece as it is read, nothing kept.
    pieces = ctx.memo_frames(("series", name, finite, dedupe), lambda: _built(ctx, name, finite, dedupe)) \
        if name in SHARED else map(plain, _built(ctx, name, finite, dedupe))
    rows = rows or BATCH_ROWS
    buf: list[pl.DataFrame] = []
    size, last = 0, None
    for piece in pieces:
        if not piece.height:
            continue
        ranks = piece.get_column("rank")
        # A piece may start with the rest of the rank the one before ended with: the frame is cut between ranks only.
        if buf and size >= rows and ranks[0] != last:
            yield pl.concat(buf) if len(buf) > 1 else buf[0]
            buf, size = [], 0
        buf.append(piece if cols is None else piece.select(cols))
        size += piece.height
        last = ranks[-1]
    if buf:
        yield pl.concat(buf) if len(buf) > 1 else buf[0]


def series_ranks(ctx: Context, names: tuple[str, ...] | list[str] | str, *, finite: bool = False,
                 dedupe: bool = True, cols: tuple[str, ...] | None = None) -> Iterator[pl.DataFrame]:
    """`series(ctx, names, ...)` one rank at a time, in its order (the lowest rank first, rows without a rank
    last): the concatenation of the frames is the series. A series many playbooks share is read back from its
    copy on disk a batch of whole ranks at a time (`series_batches`), so a detector that decides rank by rank holds
    one batch's rows, not all (a detector that can decide ranks together reads the batches themselves); with
    `cols` (which must include rank), only those columns of them (a rank's ranks, steps and values, not every
    row's provenance strings: fetch the rows quoted with `series_where` at the end)."""
    # A batch holds whole ranks, each rank's rows together (the series is sorted by rank).
    for batch in series_batches(ctx, names, finite=finite, dedupe=dedupe, cols=cols):
        yield from batch.partition_by("rank", maintain_order=True)


def several_ranks(ctx: Context, names: tuple[str, ...] | list[str] | str, *, finite: bool = False) -> bool:
    """Whether the raw rows of the metric `series(ctx, names, ...)` is made of come from two ranks or more (finite
    values only with `finite`): read from two columns, before any series is built. The series keeps a subset of
    those rows, so False means it has fewer than two ranks."""
    have = present(ctx, [names] if isinstance(names, str) else list(names))
    if not have:
        return False
    rows = ctx.metrics_lazy([have[0]])
    if finite:
        rows = rows.filter(pl.col("value").is_finite())
    return rows.select(pl.col("rank").drop_nulls().n_unique()).collect(engine="streaming").item() >= 2


# Rows of a series in one window of `series_steps` (every rank's rows of some steps), about.
WINDOW_ROWS = 1 << 18


def series_steps(ctx: Context, names: tuple[str, ...] | list[str] | str, cols: tuple[str, ...] = ("rank", "step", "value"),
                 *, finite: bool = False, dedupe: bool = True) -> Iterator[pl.DataFrame]:
    """Some columns (`cols`, step among them) of `series(ctx, names, ...)` in windows of whole steps, the lowest steps
    first: each window holds every rank's rows of its steps, in series order (rank, then step), so per-step questions
    across ranks (the ranks' spread or median at a step) are answered window by window and their answers put end to end.
    Built once per run from the series read rank by rank (each rank's rows written to the windows of their steps),
    so neither the series nor the regrouped copy is ever whole in memory: a window has about `WINDOW_ROWS` rows
    (more only where the steps are very unevenly spread)."""
    wanted = [names] if isinstance(names, str) else list(names)
    have = present(ctx, wanted)
    if not have:
        return
    name = have[0]

    def windows() -> Iterator[pl.DataFrame]:
        # Window width in steps from the raw rows' step range: any step (a stand-in position, one outside the range)
        # still lands in a window of steps in order, so the windows only get uneven, never wrong.
        lo, hi, n = ctx.metrics_lazy([name]).select(pl.col("step").min().alias("lo"), pl.col("step").max().alias("hi"), pl.len()) \
            .collect(engine="streaming").row(0)
        lo, hi = (1, n) if lo is None else (lo, hi)
        count = max(1, min(-(-n // WINDOW_ROWS), 256))
        width = max(1, -(-(hi - lo + 1) // count))
        window = ((pl.col("step") - lo) // width).clip(0, count - 1).alias("_window")
        for batch in series_batches(ctx, name, finite=finite, dedupe=dedupe, cols=tuple(dict.fromkeys(("rank", "step", *cols)))):
            yield batch.select(*cols, window)

    yield from ctx.memo_groups(("series_steps", name, finite, dedupe, tuple(cols)), windows, "_window")


def series_where(ctx: Context, names: tuple[str, ...] | list[str] | str, where: pl.Expr, *, finite: bool = False,
                 dedupe: bool = True) -> tuple[pl.DataFrame, int]:
    """The rows of `series(ctx, names, ...)` that `where` (a row-wise expression) keeps (in series order), and how many
    rows the series has: what a detector decides on (every non-finite point, the rows at one step), read a batch of
    whole ranks at a time (`series_batches`), so the whole series is never in memory."""
    kept: list[pl.DataFrame] = []
    total = 0
    for batch in series_batches(ctx, names, finite=finite, dedupe=dedupe):
        total += batch.height
        kept.append(batch.filter(where))
        if len(kept) > 1 and not kept[-2].height:
            kept.pop(-2)  # the schema is all an empty piece gives: one is kept for it
    if not kept:
        return series(ctx, names, finite=finite, dedupe=dedupe), total
    rows = [k for k in kept if k.height]
    return (pl.concat(rows) if rows else kept[0]), total


def series_columns(ctx: Context, names: tuple[str, ...] | list[str] | str, cols: tuple[str, ...], *,
                   where: pl.Expr | None = None, finite: bool = False, dedupe: bool = True) -> pl.DataFrame:
    """Some columns of `series(ctx, names, ...)` (of the rows `where`, a row-wise expression, keeps, in its order), read
    a batch of whole ranks at a time: a detector that decides on ranks, steps and values holds those, not every row's
    provenance (fetch the rows it quotes with `series_where`)."""
    parts = [(batch if where is None else batch.filter(where)).select(cols)
             for batch in series_batches(ctx, names, finite=finite, dedupe=dedupe)]
    return pl.concat(parts) if parts else series(ctx, names, finite=finite, dedupe=dedupe).select(cols)


def series_lowest_rank(ctx: Context, names: tuple[str, ...] | list[str] | str, *, finite: bool = False,
                       dedupe: bool = True) -> tuple[pl.DataFrame, int]:
    """The rows of the lowest rank of `series(ctx, names, ...)` (every row when no row has a rank: `ts.lowest_rank`,
    in step order) and how many rows the whole series has, read a batch of whole ranks at a time. For a series many
    playbooks share, found once per run (the rows kept on disk): half a dozen detectors ask for the loss's."""
    def scan() -> tuple[pl.DataFrame, int]:
        first, total = _lowest_rank(ctx, names, finite, dedupe)
        return (first if first is not None else series(ctx, names, finite=finite, dedupe=dedupe)), total

    have = present(ctx, [names] if isinstance(names, str) else list(names))
    if not have or have[0] not in SHARED:
        return scan()
    key = ("series_lowest_rank", have[0], finite, dedupe)
    counted: list[int] = []

    def kept() -> pl.DataFrame:
        first, total = scan()
        counted.append(total)
        return first

    first = ctx.memo_frame(key, kept)
    return first, ctx.memo((*key, "rows"), lambda: counted[0])


def _lowest_rank(ctx: Context, names: tuple[str, ...] | list[str] | str, finite: bool, dedupe: bool,
                 cols: tuple[str, ...] | None = None) -> tuple[pl.DataFrame | None, int]:
    """The lowest rank's rows of the series (only `cols` of them with `cols`; None when the series has no rows) and how
    many rows the whole series has, read a batch of whole ranks at a time."""
    first, total = None, 0
    for batch in series_batches(ctx, names, finite=finite, dedupe=dedupe, cols=cols):
        total += batch.height
        # The lowest rank's rows lead the first batch (a batch holds whole ranks, sorted).
        first = batch.filter(batch.get_column("rank").rle_id() == 0) if first is None else first
    return first, total


def series_rank(ctx: Context, names: tuple[str, ...] | list[str] | str, rank: int | None, *, finite: bool = False,
                dedupe: bool = True, cols: tuple[str, ...] | None = None) -> pl.DataFrame:
    """The rows of one rank (None: the rows without a rank) of `series(ctx, names, ...)`, read a batch of whole ranks
    at a time (only `cols` of them with `cols`, rank among them)."""
    last = None
    for batch in series_batches(ctx, names, finite=finite, dedupe=dedupe, cols=cols):
        part = batch.filter(pl.col("rank").eq_missing(rank))
        if part.height:
            return part
        last = batch
    if last is not None:
        return last.clear()
    whole = series(ctx, names, finite=finite, dedupe=dedupe)
    return whole if cols is None else whole.select(cols)


def provenance(ctx: Context, names: tuple[str, ...] | list[str] | str, rows: pl.DataFrame, *,
               finite: bool = False) -> pl.DataFrame:
    """`rows` (rank, step and what was computed on them, from a series read with a few columns: `series_ranks` with
    `cols`) with the series' own columns of those rows (file, line, ts, name, ...) in their order, read at the end
    for the rows a finding quotes (a deduplicated series has one row per rank and step)."""
    if rows.height == 0:
        return rows
    ranks = rows.get_column("rank").unique().to_list()
    known = [r for r in ranks if r is not None]
    rank_in = pl.col("rank").is_in(known) | (pl.col("rank").is_null() if None in ranks else pl.lit(False))
    got = series_where(ctx, names, rank_in & pl.col("step").is_in(rows.get_column("step").unique().to_list()), finite=finite)[0]
    own = [c for c in rows.columns if c in ("rank", "step") or c not in got.columns]
    return rows.select(own).join(got, on=["rank", "step"], how="left", nulls_equal=True, maintain_order="left")


# The columns a series' numbers are read as (`onset_numbers`, `series_ranks` with `cols`): no provenance strings.
NUMBERS = ("rank", "step", "value")


def onset_numbers(ctx: Context, names: tuple[str, ...] | list[str] | str, predicate: pl.Expr, min_points: int = 1, *,
                  finite: bool = False) -> ts.Onset | None:
    """`ts.onset_over` of `series(ctx, names, ...)` read a batch of whole ranks at a time as numbers (`predicate` reads rank, step and
    value only), with the file and line of its first row fetched at the end: the same onset, without every row's
    provenance strings in memory."""
    # onset_over takes pieces of whole ranks: the batches as they are, not split into ranks only to be joined again.
    return onset_provenance(ctx, names, ts.onset_over(series_batches(ctx, names, finite=finite, cols=NUMBERS), predicate, min_points),
                            finite=finite)


def lowest_rank_numbers(ctx: Context, names: tuple[str, ...] | list[str] | str, *,
                        finite: bool = False) -> tuple[pl.DataFrame, int]:
    """`series_lowest_rank` as numbers: the lowest rank's rank, step and value, and how many rows the whole series
    has, read a batch of whole ranks at a time (fetch the file and line of the rows a finding quotes with `provenance`)."""
    first, total = _lowest_rank(ctx, names, finite, True, NUMBERS)
    return (first if first is not None else pl.DataFrame(schema=ts.SLIM_SCHEMA)), total


def onset_provenance(ctx: Context, names: tuple[str, ...] | list[str] | str, o: ts.Onset | None, *,
                     finite: bool = False) -> ts.Onset | None:
    """An onset found on `series(ctx, names, ...)` read as numbers, with the file and line of its first row."""
    if o is None:
        return None
    at = provenance(ctx, names, pl.DataFrame({"rank": [o.rank], "step": [o.step]}, schema={"rank": pl.Int32, "step": pl.Int64}),
                    finite=finite)
    return dataclasses.replace(o, file=at.item(0, "file"), line=at.item(0, "line"))


def quote(rows: pl.DataFrame, limit: int = 8) -> list[Evidence]:
    """Metric rows as evidence (the report shows the input line each row came from)."""
    if rows.height == 0:
        return []
    cols = [c for c in ("file", "line", "ts", "rank", "step", "name", "value") if c in rows.columns]
    r = rows.select(cols).filter(pl.col("file").is_not_null() & pl.col("line").is_not_null())
    if "name" not in r.columns:
        r = r.with_columns(pl.lit("value").alias("name"))
    return evidence_rows(r.with_columns(pl.lit(None, pl.String).alias("text")), limit=limit)


def quote_ends(rows: pl.DataFrame) -> list[Evidence]:
    """The first two and the last of the rows as evidence, each input line once: where a repeated value starts and
    that it still holds at the end."""
    return quote(pl.concat([rows.head(2), rows.tail(1)]).unique(["file", "line"], maintain_order=True))


def pick(s: pl.DataFrame, steps: list[int | None], rank: int | None = None) -> pl.DataFrame:
    """Rows of a series at the given steps (one rank when given), in that order, without duplicates."""
    want = [x for x in dict.fromkeys(steps) if x is not None]
    f = s.filter(pl.col("step").is_in(want))
    if rank is not None and "rank" in f.columns:
        f = f.filter(pl.col("rank") == rank)
    order = {st: i for i, st in enumerate(want)}
    return f.with_columns(pl.col("step").replace_strict(order, default=len(want)).alias("_o")).sort("_o").drop("_o")


def onset_at(row: dict) -> Onset:
    """An Onset from a series row (step, ts, rank, file, line)."""
    return Onset(step=row.get("step"), time=row.get("ts"), rank=row.get("rank"), file=row.get("file"), line=row.get("line"))


def onset_of_step(s: pl.DataFrame, step: int, rank: int | None = None) -> Onset:
    """The onset at a step of a series (its row there), or a bare step when the series lacks it."""
    rows = pick(s, [step], rank)
    return onset_at(rows.row(0, named=True)) if rows.height else Onset(step=step, rank=rank)


def lr_at(ctx: Context, step: int | None) -> float | None:
    """The logged learning rate at (or last before) a step, lowest rank; None when no LR is logged."""
    s = series_lowest_rank(ctx, LR, finite=True)[0]  # read one rank at a time: the lowest is the one kept
    if s.height == 0:
        return None
    if step is None:
        return float(s.item(-1, "value"))
    before = s.filter(pl.col("step") <= step)
    return float((before if before.height else s).sort("step").item(-1 if before.height else 0, "value"))


def as_fraction(x: float) -> float:
    """An accuracy-like value as a fraction: one printed above 1 is a percent (`acc: 72.4`), scaled by 1/100."""
    return x / 100.0 if x > 1.0 else x


def fraction_of(col: str) -> pl.Expr:
    """`as_fraction` of a column, as a polars expression."""
    return pl.when(pl.col(col) > 1.0).then(pl.col(col) / 100.0).otherwise(pl.col(col))


def fmt(x: float | None, digits: int = 4) -> str:
    """A number for a summary: `nan`, `inf`, `2.346`, `1.2e-07`, `65,536`."""
    if x is None:
        return "?"
    if not math.isfinite(x):
        return str(x)
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
        return f"{x:.{max(digits - 2, 1)}e}"
    if float(x).is_integer() and abs(x) >= 1000:
        return f"{int(x):,}"
    return f"{x:.{digits}g}"


def nearest_vocab(level: float, tol: float) -> int | None:
    """The common vocabulary size whose ln is closest to `level`, when within `tol` nats."""
    best = min(COMMON_VOCABS, key=lambda v: abs(math.log(v) - level))
    return best if abs(math.log(best) - level) <= tol else None

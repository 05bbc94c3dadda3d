"""Budgets on rows one file repeats without end: kept bounded, with every value a detector decides on, and counted.

Where the memory of a hostile repetitive log went (measured, 200 MB of one OOM line; 780 MB of one metric line):
not the reading (a frame costs 30-80x its 8 MB chunk, then is freed) but the rows kept. An event row carries three
strings (message, text, fields): 1.67M identical OOM lines were 1.67M rows, 593 MB of Arrow, and analysis copies
them several times (plain strings, onset sort, filters: 2.9 GB peak). A metric line gives a row per metric:
45M rows of one step, 7 GB peak. A real run never prints one message a hundred thousand times in one file, nor one
metric a hundred thousand times in a row at one step, so these budgets only ever meet runaway or hostile logs;
the file is then marked `partial` with what was not kept.

- Events: past MAX_EVENTS_PER_CODE events of one code in one file (FORENSICS_MAX_EVENTS_PER_CODE), further ones
  are counted, not kept, except the last: it is kept with `repeats`, the number of events it stands for (itself
  and those dropped before it). The first occurrences (onset, quoted evidence), the last one (what followed the
  last OOM) and the count (`contracts.context.event_count`) all survive.
- Metrics: a run of consecutive rows of one (rank, metric) of a file at one step (or none) longer than
  MAX_STEP_REPEATS (FORENSICS_MAX_STEP_REPEATS) keeps its first rows up to the budget; of the rest, each batch
  keeps its last row, last finite row, smallest and largest finite values and first and last non-finite ones.
  Series keep the last (finite) row of each step, restarts are step changes, spikes and NaN checks look at
  extremes and non-finite values: none of what they decide on is dropped.

Budgets are read when a file's parse starts, so a test (or a user) can lower them through the environment.
"""

from __future__ import annotations

import os

import polars as pl

DEFAULT_MAX_EVENTS_PER_CODE = 100_000
DEFAULT_MAX_STEP_REPEATS = 100_000


def _budget(env: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(env, default)))
    except ValueError:
        return default


class EventBudget:
    """One file's events, at most `limit` per code kept in full; the rest counted, the last of them kept."""

    def __init__(self) -> None:
        self.limit = _budget("FORENSICS_MAX_EVENTS_PER_CODE", DEFAULT_MAX_EVENTS_PER_CODE)
        self.seen: dict[str, int] = {}  # events of each code so far
        self.over: dict[str, int] = {}  # events of each code past the budget
        self.last: dict[str, pl.DataFrame] = {}  # the latest event of each code past the budget

    def keep(self, ev: pl.DataFrame) -> pl.DataFrame:
        """The rows of a batch (in line order) within the budget; the others are counted."""
        counts = dict(ev.group_by("code").len().iter_rows())
        if all(self.seen.get(c, 0) + n <= self.limit for c, n in counts.items()):
            for c, n in counts.items():
                self.seen[c] = self.seen.get(c, 0) + n
            return ev
        before = pl.col("code").replace_strict(self.seen, default=0, return_dtype=pl.Int64)
        pos = (pl.int_range(pl.len(), dtype=pl.Int64).over("code") + before).alias("_pos")
        ev = ev.with_columns(pos)
        past = ev.filter(pl.col("_pos") >= self.limit).drop("_pos")
        for c, n in counts.items():
            self.seen[c] = self.seen.get(c, 0) + n
        for (code,), rows in past.group_by("code", maintain_order=True):
            self.over[code] = self.over.get(code, 0) + rows.height
            self.last[code] = rows.tail(1)
        return ev.filter(pl.col("_pos") < self.limit).drop("_pos")

    def tail(self) -> pl.DataFrame | None:
        """The last event of each code past the budget, with `repeats` (in line order); None when none was."""
        if not self.last:
            return None
        rows = [df.with_columns(pl.lit(self.over[c], pl.Int64).alias("repeats")) for c, df in self.last.items()]
        return pl.concat(rows, how="vertical_relaxed").sort("line", "code", maintain_order=True)

    def problems(self) -> list[str]:
        if not self.over:
            return []
        codes = ", ".join(f"{c} {n:,}" for c, n in sorted(self.over.items()))
        return [f"{sum(self.over.values()):,} events past the budget of {self.limit:,} per event code "
                f"(FORENSICS_MAX_EVENTS_PER_CODE) were counted, not kept, except the last of each code: {codes}"]


class StepRepeatBudget:
    """One file's metric rows: a run of one (rank, metric) at one step kept up to `limit` rows, then reduced."""

    KEY = ("_r", "name")

    def __init__(self) -> None:
        self.limit = _budget("FORENSICS_MAX_STEP_REPEATS", DEFAULT_MAX_STEP_REPEATS)
        # Per (rank, metric): the step of its last row and the length of the run that row ends.
        self.state = pl.DataFrame(schema={"_r": pl.Int32, "name": pl.String, "_ps": pl.Int64, "_pn": pl.Int64})
        self.dropped = 0

    def keep(self, m: pl.DataFrame) -> pl.DataFrame:
        """The rows of a batch (in line order) within the budget, plus those of the rest a detector decides on."""
        if m.height == 0:
            return m
        key = pl.col("rank").fill_null(-1).cast(pl.Int32).alias("_r")
        # Per key: its rows, its first step, its runs of one step (the last one goes on into the next batch).
        runs = (m.group_by(key, "name").agg(pl.len().alias("_n"), pl.col("step").first().alias("_s0"),
                                             pl.col("step").rle().alias("_rle"))
                .join(self.state, on=list(self.KEY), how="left")
                .with_columns(pl.col("_pn").fill_null(0), pl.col("_rle").list.last().alias("_last"))
                .with_columns((pl.col("_s0").eq_missing(pl.col("_ps")) & (pl.col("_pn") > 0)).alias("_on")))
        whole = (pl.col("_rle").list.len() == 1) & pl.col("_on")
        ends = runs.select(*self.KEY, pl.col("_last").struct.field("value").alias("_ps"),
                           pl.when(whole).then(pl.col("_pn") + pl.col("_n"))
                           .otherwise(pl.col("_last").struct.field("len")).cast(pl.Int64).alias("_pn"))
        # No run can pass the budget in this batch (a real run's every batch): the rows are all kept as they are.
        fits = bool(runs.select((pl.col("_pn") + pl.col("_n") <= self.limit).all()).item())
        carried = runs.filter(pl.col("_on")).select(*self.KEY, pl.col("_pn").alias("_c"))
        self.state = pl.concat([self.state.join(ends, on=list(self.KEY), how="anti"), ends], how="vertical_relaxed")
        if fits:
            return m
        return self._reduce(m, carried)

    def _reduce(self, m: pl.DataFrame, carried: pl.DataFrame) -> pl.DataFrame:
        """Rows past the budget in their run (the first run of a key counts on from `carried`) reduced to the decisive ones."""
        df = m.with_row_index("_i").with_columns(pl.col("rank").fill_null(-1).cast(pl.Int32).alias("_r"))
        df = df.join(carried, on=list(self.KEY), how="left", maintain_order="left")
        df = df.with_columns(pl.col("step").rle_id().over(self.KEY).alias("_run"))
        pos = pl.int_range(pl.len(), dtype=pl.Int64).over([*self.KEY, "_run"]) + pl.when(
            pl.col("_run") == 0).then(pl.col("_c").fill_null(0)).otherwise(0)
        df = df.with_columns(pos.alias("_pos"))
        over = df.filter(pl.col("_pos") >= self.limit)
        fin = pl.col("value").is_finite()
        i = pl.col("_i")
        picks = over.group_by([*self.KEY, "_run"]).agg(pl.concat_list(
            i.last(), i.filter(fin).last(), i.filter(~fin).first(), i.filter(~fin).last(),
            i.filter(fin).sort_by(pl.col("value").filter(fin)).first(),
            i.filter(fin).sort_by(pl.col("value").filter(fin)).last(),
        ).alias("_k")).select(pl.col("_k").explode().drop_nulls().unique())
        kept = df.filter((pl.col("_pos") < self.limit) | pl.col("_i").is_in(picks.get_column("_k").implode()))
        self.dropped += df.height - kept.height
        return kept.select(m.columns)

    def problems(self) -> list[str]:
        if not self.dropped:
            return []
        return [f"{self.dropped:,} metric rows repeating one step past the budget of {self.limit:,} in a row "
                f"(FORENSICS_MAX_STEP_REPEATS) were not kept; the last, extreme and non-finite values of each run were"]

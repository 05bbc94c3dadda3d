"""What a detector sees: the run's evidence tables as polars frames, plus helpers to quote them."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Protocol

import polars as pl
import pyarrow as pa

from forensics.contracts.model import Evidence, Onset

MAX_EVIDENCE = 8


class Run(Protocol):
    """What a Context reads: a run's evidence tables (ingest's `Run`, or one loaded from the cache)."""

    root: Path
    meta: dict
    # Parser kinds whose files are scanned for error events (each parser declares it where it registers):
    # an empty events table from them is a real "nothing found", not "nothing read".
    event_sources: tuple[str, ...]

    def table(self, name: str) -> pa.Table: ...

    def scan(self, name: str) -> pl.LazyFrame:
        """A table as a lazy frame (dictionary columns categorical): a cached run reads its Parquet
        file with only the columns and rows a query keeps."""
        ...

    def num_rows(self, name: str) -> int: ...

    def metrics_named(self, names: list[str]) -> pl.LazyFrame:
        """The metrics rows whose name is one of `names`, in table order (dictionary columns categorical):
        a cached run reads only the row groups of those names."""
        ...

    def metric_names(self) -> set[str]:
        """The metric names present (nulls excluded)."""
        ...

    def metric_lines(self) -> pl.LazyFrame:
        """(file, line, ts, rank, step) of the metrics rows in table order, a row dropped when the one before it
        says the same (one row per metrics line, several times fewer than the metrics rows)."""
        ...


@dataclass
class Context:
    """The evidence tables of one run (and, for comparisons, of a baseline run).

    The metrics table of a big run has tens of millions of rows, more than memory should hold:
    detectors read it through `metric_names`, `metric_rows`, `metrics_select`, `metrics_lazy` and
    `memo` / `memo_frame` / `memo_frames` (one series per metric, shared by every playbook, kept on disk and read
    back whole or piece by piece), which query the run's lazy frame
    (a cached run's Parquet file: only the columns and rows asked for are read; a query for some metric
    names reads the cache's copy grouped by name, so only their rows) and turn only what is kept into plain
    strings. `metric_lines` answers questions about lines (where and when each was logged) from one row
    per line. `table("metrics")` / `metrics` still give the whole table with plain strings, for small
    runs and tests.
    """

    run: Run
    baseline: Context | None = None
    _frames: dict[str, pl.DataFrame] = field(default_factory=dict)
    _memo: dict[tuple, object] = field(default_factory=dict, repr=False)

    def table(self, name: str) -> pl.DataFrame:
        """A table as a polars frame, with dictionary columns as plain strings."""
        if name not in self._frames:
            self._frames[name] = plain(self._stored(name).collect())
        return self._frames[name]

    def _stored(self, name: str) -> pl.LazyFrame:
        """A table as a lazy frame with its dictionary columns still categorical (nothing read yet)."""
        return self.run.scan(name)

    def memo(self, key: tuple, compute):
        """The value of `compute()` computed once per context under `key` (frames are immutable, so
        playbooks can share them)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def memo_frame(self, key: tuple, compute) -> pl.DataFrame:
        """The frame `compute()` gives, computed once per context and kept on disk (an Arrow IPC stream in
        a temporary folder removed with the context), so the series every playbook shares do not stay
        in memory between them; each caller reads it back with plain strings and drops it when done.
        `compute` may give the frame in pieces (an iterator of frames with one schema, at least one): they are
        written one at a time, so the whole frame is never in memory while it is made."""
        path = self.memo(key, lambda: self._spill(compute()))
        return plain(pl.read_ipc_stream(path))

    def memo_frames(self, key: tuple, compute) -> Iterator[pl.DataFrame]:
        """`memo_frame`'s frame read back piece by piece (as written, or smaller), in order, with plain strings:
        a caller that works on a piece at a time (one rank of a series) holds only that piece."""
        path = self.memo(key, lambda: self._spill(compute()))
        with pa.OSFile(str(path), "rb") as source, pa.ipc.open_stream(source) as reader:
            for batch in reader:
                df = pl.from_arrow(batch)
                assert isinstance(df, pl.DataFrame)
                yield plain(df)

    def memo_groups(self, key: tuple, compute, by: str) -> Iterator[pl.DataFrame]:
        """The rows of the frames `compute()` gives (an iterator of frames with one schema), regrouped by their
        integer column `by` (dropped): written to disk once, one Arrow IPC stream per value as the pieces arrive,
        and read back one value at a time, lowest first, each value's rows in the order given, with plain strings.
        A reader that needs rows of every piece together (every rank's rows of a window of steps, when `by`
        numbers step windows) holds one group, and the writer one piece, never the whole."""
        paths = self.memo(key, lambda: self._spill_groups(compute(), by))
        for path in paths:
            yield plain(pl.read_ipc_stream(path))

    def _spill_dir(self) -> Path:
        if "spill_dir" not in self._memo:
            folder = tempfile.mkdtemp(prefix="forensics-series-")
            weakref.finalize(self, shutil.rmtree, folder, True)
            self._memo["spill_dir"] = Path(folder)
        return self._memo["spill_dir"]

    def _spill(self, frames: pl.DataFrame | Iterator[pl.DataFrame]) -> Path:
        path = self._spill_dir() / f"{len(self._memo)}.arrows"
        writer = None
        with pa.OSFile(str(path), "wb") as sink:
            for df in [frames] if isinstance(frames, pl.DataFrame) else frames:
                table = plain(df).to_arrow()
                if writer is None:
                    writer = _stream(sink, table.schema)
                writer.write_table(table)
            if writer is None:
                raise ValueError("memo_frame: compute gave no frame")
            writer.close()
        return path

    def _spill_groups(self, frames: Iterator[pl.DataFrame], by: str) -> list[Path]:
        folder = self._spill_dir() / f"{len(self._memo)}.groups"
        folder.mkdir()
        open_: dict[int, tuple[pa.OSFile, pa.ipc.RecordBatchStreamWriter]] = {}
        try:
            for df in frames:
                for (value,), part in plain(df).partition_by(by, as_dict=True, include_key=False).items():
                    table = part.to_arrow()
                    if value not in open_:
                        sink = pa.OSFile(str(folder / f"{value}.arrows"), "wb")
                        open_[value] = (sink, _stream(sink, table.schema))
                    open_[value][1].write_table(table)
        finally:
            for sink, writer in open_.values():
                writer.close()
                sink.close()
        return [folder / f"{value}.arrows" for value in sorted(open_)]

    @property
    def metric_names(self) -> set[str]:
        """The metric names present (nulls excluded)."""
        return self.memo(("metric_names",), self.run.metric_names)

    def metric_rows(self, names: str | list[str] | tuple[str, ...]) -> pl.DataFrame:
        """The metrics rows of some names, in table order, with plain-string columns: the same rows as
        `metrics.filter(name in names)` without turning the whole table into strings."""
        wanted = [names] if isinstance(names, str) else list(names)
        return plain(self.run.metrics_named(wanted).collect())

    def metrics_lazy(self, names: list[str] | tuple[str, ...] | None = None) -> pl.LazyFrame:
        """The metrics table as a lazy frame with categorical dictionary columns (for aggregations
        over the whole table; `plain` what is kept); with `names`, only the rows of those metric names
        (read without scanning the others')."""
        return self._stored("metrics") if names is None else self.run.metrics_named(list(names))

    def metric_lines(self) -> pl.LazyFrame:
        """Where and when each metrics line was logged: (file, line, ts, rank, step), one row per line in table
        order (file categorical), for questions about lines (the nearest time or step before a line, the rows at
        a time, the last step) that do not need the values."""
        return self.run.metric_lines()

    def metrics_select(self, *cols: str, where: pl.Expr | None = None, strings: bool = True,
                       names: list[str] | tuple[str, ...] | None = None) -> pl.DataFrame:
        """Some columns of the metrics rows that satisfy `where`, in table order, with plain strings
        (what `metrics.filter(where).select(cols)` gives, for the rows and columns asked for only).
        `names` keeps the rows of those metric names only, read without scanning the others'.
        With `strings=False` the dictionary columns stay categorical (cast what you keep with `plain`)."""
        lf = self.metrics_lazy(names)
        if where is not None:
            lf = lf.filter(where)
        df = lf.select(cols or pl.all()).collect()
        return plain(df) if strings else df

    def has(self, name: str) -> bool:
        """Whether the table has any rows."""
        return self.run.num_rows(name) > 0

    def available(self, name: str) -> bool:
        """Whether the run could show this evidence: rows exist, or (events) a log was read and matched nothing.

        A healthy log has no events, yet it was checked; a run with only traces was not.
        """
        if self.has(name):
            return True
        if name != "events":
            return False
        files = self.table("files")
        if files.height == 0:
            return False
        read = files.filter(pl.col("parser").is_in(list(self.run.event_sources)) & pl.col("status").is_in(["parsed", "partial"]))
        return read.height > 0

    @property
    def meta(self) -> dict:
        """Run-level facts gathered by the parsers."""
        return self.run.meta

    @cached_property
    def events(self) -> pl.DataFrame:
        """The events table sorted by file and line (one copy: `table("events")` is not kept beside it)."""
        if "events" in self._frames:
            return self._frames["events"].sort(["file", "line"], maintain_order=True)
        return plain(self._stored("events").collect()).sort(["file", "line"], maintain_order=True)

    def events_where(self, where: pl.Expr) -> pl.DataFrame:
        """`events.filter(where)`, read without holding the whole table: the stored table is scanned with `where`
        and only the rows kept are read and sorted. `where` compares the dictionary columns (file, code, severity) by
        equality or membership only.
        A big run's events are mostly progress chatter (checkpoint saves, warnings): a detector that looks at some
        of them (the errors, one file's lines) asks for those."""
        if "events" in self.__dict__:  # already read whole
            return self.events.filter(where)
        # Filtered before the dictionary columns become strings, so the Parquet reader decodes the other columns of
        # the rows kept only (equality and membership read the same on categories as on strings).
        rows = self._stored("events").filter(where).collect(engine="streaming")
        return plain(rows).sort(["file", "line"], maintain_order=True)

    def events_of(self, *codes: str, severity: tuple[str, ...] | None = None) -> pl.DataFrame:
        """Events whose code is one of `codes` (optionally of given severities), earliest first."""
        where = pl.col("code").is_in(list(codes))
        if severity:
            where = where & pl.col("severity").is_in(list(severity))
        return sort_by_onset(self.events_where(where))

    @cached_property
    def metrics(self) -> pl.DataFrame:
        """The metrics table."""
        return self.table("metrics")

    def metric(self, name: str) -> pl.DataFrame:
        """Rows of one canonical metric, in file and line order."""
        return self.metric_rows(name).sort(["file", "line"])


def _stream(sink: pa.OSFile, schema: pa.Schema) -> pa.ipc.RecordBatchStreamWriter:
    """An Arrow IPC stream writer for a spilled frame (lz4: a few times smaller, cheap to read back)."""
    return pa.ipc.new_stream(sink, schema, options=pa.ipc.IpcWriteOptions(compression="lz4"))


def event_count(ev: pl.DataFrame) -> int:
    """How many events some rows stand for: a row a parser kept for many repeats (its `repeats`) counts them all."""
    if "repeats" not in ev.columns or ev.get_column("repeats").null_count() == ev.height:
        return ev.height
    return int(ev.get_column("repeats").fill_null(1).sum())


def plain(df: pl.DataFrame) -> pl.DataFrame:
    """Categorical columns as plain strings."""
    return df.with_columns(pl.col(pl.Categorical).cast(pl.String))


def sort_by_onset(df: pl.DataFrame) -> pl.DataFrame:
    """Earliest first. A row without a time of its own (a traceback line) is placed by the nearest
    timed row before it in the same file (after it, for leading rows), so file order is kept."""
    if df.height == 0:
        return df
    key = pl.col("ts").forward_fill().backward_fill().over("file", order_by="line")
    return df.with_columns(key.alias("_order")).sort(["_order", "file", "line"], nulls_last=True).drop("_order")


def evidence_rows(df: pl.DataFrame, limit: int = MAX_EVIDENCE, text_col: str = "text") -> list[Evidence]:
    """The first `limit` rows of a table as quotable evidence (file, line, text, rank, step, ts)."""
    out = []
    cols = df.columns
    for row in df.head(limit).iter_rows(named=True):
        text = row.get(text_col)
        synthetic = False
        if text is None and "name" in cols:
            text, synthetic = f"{row.get('name')} = {row.get('value')}", True
        out.append(
            Evidence(
                file=row["file"],
                line=int(row["line"]),
                text=_first_lines(str(text or "")),
                rank=row.get("rank"),
                step=row.get("step"),
                ts=row.get("ts"),
                synthetic=synthetic,
            )
        )
    return out


def _first_lines(text: str, max_lines: int = 40, max_chars: int = 4000) -> str:
    lines = text.splitlines()
    if len(lines) > max_lines:
        lines = lines[: max_lines // 2] + [f"... ({len(lines) - max_lines} more lines)"] + lines[-(max_lines // 2) :]
    out = "\n".join(lines)
    return out if len(out) <= max_chars else out[: max_chars - 3] + "..."


def onset_of(df: pl.DataFrame) -> Onset:
    """The onset given by the first row of an onset-sorted frame."""
    if df.height == 0:
        return Onset()
    row = df.row(0, named=True)
    return Onset(step=row.get("step"), time=row.get("ts"), rank=row.get("rank"), file=row.get("file"), line=row.get("line"))

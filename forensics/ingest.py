"""Ingest a run folder: discover files, run each file's parser, gather the evidence tables.

Big runs are parsed by a pool of worker processes (one file per task, largest first) that write
each file's tables to a spool folder as Arrow IPC; the parent only keeps file rows, so its memory
does not grow with the run. A table is assembled (in file order, the same as a serial parse) the
first time it is asked for.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow as pa

from forensics import metric_lines, run_budget
from forensics.contracts import tables as T
from forensics.discover import discover
from forensics.parsers import spool
from forensics.parsers.base import ParseResult, kinds_where
from forensics.pool import Pool, cpu_count, in_worker
from forensics.progress import Meter
from forensics.sniff import sniff_source
from forensics.steps import carry_across_files


@dataclass
class Run:
    """Everything parsed from one run folder."""

    root: Path
    tables: dict[str, pa.Table] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    # Per-file parts not yet assembled: in-memory tables or Arrow IPC files in a spool folder.
    parts: dict[str, list[pa.Table | Path]] = field(default_factory=dict, repr=False)
    # Polars frames of assembled tables, made once (a categorical column is built from its dictionary).
    frames: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def event_sources(self) -> tuple[str, ...]:
        """Parser kinds whose files are scanned for error events (as the parsers declare)."""
        return kinds_where("event_source")

    def table(self, name: str) -> pa.Table:
        """One evidence table (empty with its schema when nothing produced it); assembles its parts, no parsing."""
        if name not in self.tables and name in self.parts:
            self.tables[name] = T.concat(name, [_load(p) for p in self.parts.pop(name)])
        return self.tables.get(name) or T.empty(name)

    def scan(self, name: str) -> pl.LazyFrame:
        """A table as a lazy frame over its Arrow buffers (dictionary columns categorical)."""
        if name not in self.frames:
            df = pl.from_arrow(self.table(name))
            assert isinstance(df, pl.DataFrame)
            self.frames[name] = df
        return self.frames[name].lazy()

    def metrics_named(self, names: list[str]) -> pl.LazyFrame:
        """The metrics rows whose name is one of `names`, in table order (a cached run reads only theirs)."""
        return self.scan("metrics").filter(pl.col("name").is_in(names))

    def metric_lines(self) -> pl.LazyFrame:
        """One row per metrics line: (file, line, ts, rank, step) in table order (forensics/metric_lines.py)."""
        return metric_lines.of(self.scan("metrics"))

    def metric_names(self) -> set[str]:
        """The metric names present (nulls excluded)."""
        return set(self.scan("metrics").select(pl.col("name").unique().drop_nulls().cast(pl.String)).collect()
                   .get_column("name").to_list())

    def batches(self, name: str) -> Iterator[pa.Table]:
        """The table of `name` in pieces of at most PIECE_ROWS rows, in file order, each cast to its schema,
        without assembling it: a consumer that streams (the Parquet writer, a row count) keeps one piece in
        memory at a time, however big one file's part is. Events are assembled by ingest itself (they are
        small, and take their steps then)."""
        if name in self.tables or name not in self.parts:
            yield self.table(name)
            return
        for part in self.parts[name]:
            for piece in _pieces(part):
                yield T.conform(name, piece)

    def num_rows(self, name: str) -> int:
        """Rows of a table, without assembling it (or casting its parts: a count needs neither)."""
        if name in self.tables or name not in self.parts:
            return self.table(name).num_rows
        return sum(_load(part).num_rows for part in self.parts[name])


def _load(part: pa.Table | Path) -> pa.Table:
    # Memory-mapped: pages are read when the table is assembled, not before.
    return part if isinstance(part, pa.Table) else spool.read(part)


# Rows of a part handed to a streaming consumer at once (Run.batches): a 10 GB run's file has tens of millions.
PIECE_ROWS = 1 << 20


def _pieces(part: pa.Table | Path) -> Iterator[pa.Table]:
    """A part in pieces of at most PIECE_ROWS rows, in order. A spilled part is read batch by batch into memory
    that is freed with each piece, not mapped: the pages of a mapped file stay resident (and count in RSS) as
    long as the mapping lives, so reading a whole spilled table through its map grows with the run."""
    if isinstance(part, pa.Table):
        for start in range(0, part.num_rows, PIECE_ROWS):
            yield part.slice(start, PIECE_ROWS)
        return
    yield from spool.pieces(part, PIECE_ROWS)


def _spill(table: pa.Table, path: Path) -> Path:
    """The table's file in the spool: the one a parser already wrote it to, else a new one."""
    own = spool.file_of(table)
    if own is not None and own.parent == path.parent:
        return own
    return spool.write(table, path)


def _file_row(rel: str, kind: str, size: int, compression: str | None, parser: str | None,
              status: str, error: str | None, rows: int, rank: int | None) -> dict:
    return {
        "file": rel, "kind": kind, "bytes": size, "compression": compression, "parser": parser,
        "status": status, "error": error, "rows": rows, "rank": rank,
    }


def parse_one(src) -> tuple[dict, ParseResult | None]:
    """Sniff and parse one file; any exception becomes a `failed` row, never a crash."""
    try:
        verdict = sniff_source(src)
    except Exception as exc:  # noqa: BLE001 - a bad file must not abort the run
        return _file_row(src.rel, "unknown", src.size, src.compression, None, "failed", f"cannot read: {exc}", 0, None), None
    if verdict.parser is None:
        return _file_row(src.rel, verdict.kind, src.size, src.compression, None, "unrecognized", verdict.reason, 0, None), None
    try:
        result = verdict.parser.parse(src, verdict.sniffed)
    except Exception as exc:  # noqa: BLE001
        where = traceback.extract_tb(exc.__traceback__)[-1]
        msg = f"{type(exc).__name__}: {exc} (in {Path(where.filename).name}:{where.lineno})"
        return _file_row(src.rel, verdict.kind, src.size, src.compression, verdict.parser.kind, "failed", msg, 0, None), None
    if src.truncated and result.status == "parsed":
        result.status = "partial"
    if src.problems and not result.error:
        result.error = "; ".join(src.problems)
    row = _file_row(src.rel, verdict.kind, src.size, src.compression, verdict.parser.kind,
                    result.status, result.error, result.rows(), result.rank)
    return row, result


# Runs smaller than this are parsed in-process: starting workers costs about a second.
PARALLEL_MIN_BYTES = 64 * 1024 * 1024
# Parsed tables kept in memory up to this size; beyond it they go to the spool folder.
SPILL_BYTES = 128 * 1024 * 1024


def _worker_count(sources: list) -> int:
    """Worker processes to use: FORENSICS_WORKERS if set, else one per CPU for runs worth it (none inside a worker)."""
    if in_worker():
        return 1  # a pool worker (a scan's run) parses its files itself
    env = os.environ.get("FORENSICS_WORKERS")
    if env is not None:
        try:
            return max(1, min(int(env), len(sources)))
        except ValueError:
            return 1
    if len(sources) < 2 or sum(s.size for s in sources) < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(cpu_count(), len(sources)))


def _init_worker() -> None:
    """Once per ingest worker: every parser module imported before the first file."""
    from forensics.parsers.base import registry

    registry()


def _parse_task(task: tuple[int, object, str]) -> tuple[int, dict, dict, dict[str, str]]:
    """Worker side: parse one file and write its tables to the spool folder (the parent maps them)."""
    index, src, folder = task
    with spool.using(Path(folder)):
        row, result = parse_one(src)
    paths: dict[str, str] = {}
    meta: dict = {}
    if result is not None:
        meta = result.meta
        for name, table in result.tables.items():
            if table is not None and table.num_rows:
                paths[name] = str(_spill(table, Path(folder) / f"{index:06d}-{name}.arrows"))
    return index, row, meta, paths


class _Spool:
    """A temporary folder for spilled tables, removed when the Run that uses it is collected."""

    def __init__(self, run: Run) -> None:
        self.path: Path | None = None
        self._run = run

    def get(self) -> Path:
        if self.path is None:
            self.path = Path(tempfile.mkdtemp(prefix="forensics-spool-"))
            weakref.finalize(self._run, shutil.rmtree, self.path, True)
        return self.path


def ingest(root: Path, progress=None, found: tuple[list, list] | None = None, meter: Meter | None = None) -> Run:
    """Parse every file under `root` into the evidence tables (input is only ever read).

    `progress` is called with each file's row, in file order; `meter` (a progress bar) is given the
    total bytes, then each file's bytes as it is parsed. `found` replaces the folder walk with given
    (sources, skipped): `forensics scan` reads archive members so."""
    root = Path(root)
    sources, skipped = found if found is not None else discover(root)
    sources, unread = run_budget.apply(sources)
    skipped = [*skipped, *unread]
    if meter is not None:
        meter.total = sum(s.size for s in sources)
    rows: list[dict] = [
        _file_row(s.rel, "unknown", s.size, None, None, s.status, s.error, 0, None) for s in skipped
    ]
    if progress is not None:
        for row in rows:
            progress(row)
    run = Run(root=root)
    run.parts = {name: [] for name in T.EVIDENCE_TABLES}
    run_spool = _Spool(run)
    done: dict[int, tuple[dict, dict, dict[str, pa.Table | Path]]] = {}
    reported = 0
    _parse_joined(sources, done)
    workers = _worker_count(sources)
    if workers > 1:
        reported = _parse_parallel(sources, workers, run_spool, done, progress, meter)
    in_memory = 0
    for index, src in enumerate(sources):
        if index < reported:
            continue
        if index not in done:  # serial run, or a file a broken worker pool left
            with spool.using(run_spool.get):
                row, result = parse_one(src)
            tables: dict[str, pa.Table | Path] = {}
            if result is not None:
                for name, table in result.tables.items():
                    if table is None or not table.num_rows:
                        continue
                    if spool.file_of(table) is not None:
                        tables[name] = spool.file_of(table)  # the parser already spilled it
                        continue
                    in_memory += table.nbytes
                    # Past the budget, parts go to disk so that memory stays bounded whatever the run's size.
                    tables[name] = _spill(table, run_spool.get() / f"{index:06d}-{name}.arrows") if in_memory > SPILL_BYTES else table
            done[index] = (row, result.meta if result is not None else {}, tables)
            if meter is not None:
                meter.update(src.size)
        if progress is not None:
            progress(done[index][0])
    for index in range(len(sources)):
        row, meta, tables = done[index]
        rows.append(row)
        for name, part in tables.items():
            run.parts.setdefault(name, []).append(part)
        for key, value in meta.items():
            run.meta.setdefault(key, value)
    rows.sort(key=lambda r: r["file"])
    run.tables["files"] = pa.Table.from_pylist(rows, schema=T.FILES) if rows else T.empty("files")
    # Steps cross files only by the clock, which needs every file's rows: the last step of parsing.
    events = T.concat("events", [_load(p) for p in run.parts.pop("events", [])])
    run.tables["events"] = carry_across_files(events, run.batches("metrics"))
    return run


# A folder holding this many small text logs has them parsed joined, a batch at a time (textlog.parse_many): the
# extractors' fixed cost (a few hundred polars operations) is then paid per batch, not per file.
JOIN_MIN_FILES = 256
JOIN_MAX_BYTES = 32 * 1024  # a log this small or smaller may be joined
JOIN_BATCH_BYTES = 4 * 1024 * 1024


def _joinable(src) -> tuple[bytes, int] | None:
    """A small plain text log's bytes and year when it can be parsed joined (clean UTF-8, no NUL, no BOM), else None."""
    from forensics.parsers import textlog
    from forensics.sources import wide_encoding

    try:
        with open(src.path, "rb") as fh:
            data = fh.read(JOIN_MAX_BYTES + 1)
    except OSError:
        return None
    if not data or len(data) > JOIN_MAX_BYTES or b"\x00" in data or wide_encoding(data[:516]):
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    verdict = sniff_source(src, data)
    if verdict.parser is None or verdict.parser.parse is not textlog.parse:
        return None
    return data, textlog._year_of(src, verdict.sniffed.text)


def _parse_joined(sources: list, done: dict) -> None:
    """Parse the small clean text logs of a folder that has many of them joined, batch by batch, into `done`.

    A batch is a run of consecutive files of one year, so its tables, in file order, go in as one part at the
    batch's first file and the tables keep the order of a file-by-file parse. Any other file is left for the
    usual path."""
    from forensics.parsers import textlog

    small = [i for i, s in enumerate(sources) if s.compression is None and 0 < s.size <= JOIN_MAX_BYTES]
    if len(small) < JOIN_MIN_FILES:
        return
    batch: list[tuple[int, bytes]] = []
    state = {"year": None, "size": 0}

    def flush() -> None:
        if batch:
            tables, rows = textlog.parse_many([(sources[j].rel, d) for j, d in batch], state["year"])
            parts = {name: t for name, t in tables.items() if t.num_rows}
            for n, ((j, _), count) in enumerate(zip(batch, rows, strict=True)):
                src = sources[j]
                row = _file_row(src.rel, "text_log", src.size, None, "text_log", "parsed", None, count,
                                textlog.rank_from_path(src.rel))
                done[j] = (row, {}, parts if n == 0 else {})
        batch.clear()
        state["size"] = 0

    for i in small:
        found = _joinable(sources[i])
        if found is None or (batch and (i != batch[-1][0] + 1 or found[1] != state["year"])):
            flush()
        if found is None:
            continue
        batch.append((i, found[0]))
        state["year"] = found[1]
        state["size"] += len(found[0])
        if state["size"] >= JOIN_BATCH_BYTES:
            flush()
    flush()


def _parse_parallel(sources: list, workers: int, run_spool: _Spool, done: dict, progress, meter: Meter | None) -> int:
    """Parse files in worker processes, largest first; returns how many leading files were reported.

    Progress is reported in file order, as a serial parse reports it. A file whose task failed
    (its worker killed, e.g. by the OOM killer) is left out of `done` for the caller to parse.
    """
    folder = str(run_spool.get())
    order = sorted(range(len(sources)), key=lambda i: -sources[i].size)
    tasks = [(i, (i, sources[i], folder)) for i in order if i not in done]
    reported = 0
    # One polars thread per worker: the workers already use every core.
    pool = Pool(workers, _init_worker, {"POLARS_MAX_THREADS": "1"})
    for _, status, value in pool.run(_parse_task, tasks):
        if status != "ok":
            continue  # the worker died (killed, out of memory) or the task raised: the caller parses the file itself
        index, row, meta, paths = value
        done[index] = (row, meta, {name: Path(p) for name, p in paths.items()})
        if meter is not None:
            meter.update(sources[index].size)
        while progress is not None and reported in done:
            progress(done[reported][0])
            reported += 1
    return reported if progress is not None else 0

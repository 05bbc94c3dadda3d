"""Evidence tables too big to keep in memory while a run is ingested: Arrow IPC streams on disk.

A table written here is read back memory-mapped (zero-copy), so holding it costs no memory
until it is used. `ingest` names the run's spool folder for the parsers it calls (`using`);
a table written there carries its file's path (`file_of`), so ingest adopts the file instead
of writing the table again. Outside an ingest, a spilled file is unlinked as soon as it is
mapped (the mapping keeps the data alive; the disk space is freed when the table is).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path

import pyarrow as pa

# The current run's spool folder, or a function that creates it on first use.
_DIR: ContextVar[Path | Callable[[], Path] | None] = ContextVar("forensics_spool_dir", default=None)
_KEY = b"forensics.spool_file"
# A table's parts are kept in memory up to this size, then streamed to a file.
SINK_BYTES = 32 * 1024 * 1024


@contextlib.contextmanager
def using(folder: Path | Callable[[], Path]) -> Iterator[None]:
    """Spill into `folder` (a run's spool, cleaned up with the run; a function is called on first use)."""
    token = _DIR.set(folder)
    try:
        yield
    finally:
        _DIR.reset(token)


def write(table: pa.Table, path: Path) -> Path:
    """Write a table as an Arrow IPC stream (the stream format allows a new dictionary per batch)."""
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return path


def read(path: Path) -> pa.Table:
    """A table written by `write` or a TableSink, memory-mapped."""
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_stream(source).read_all()


def pieces(path: Path, rows: int) -> Iterator[pa.Table]:
    """A table written by `write` or a TableSink, read (not mapped) in pieces of at most about `rows` rows, in
    order: only one piece is in memory at a time."""
    with pa.OSFile(str(path), "rb") as source, pa.ipc.open_stream(source) as reader:
        held: list[pa.RecordBatch] = []
        count = 0
        for batch in reader:
            for start in range(0, batch.num_rows, rows):
                part = batch.slice(start, rows)
                if count and count + part.num_rows > rows:
                    yield pa.Table.from_batches(held)
                    held, count = [], 0
                held.append(part)
                count += part.num_rows
        if held:
            yield pa.Table.from_batches(held)


def file_of(table: pa.Table) -> Path | None:
    """The spool file a table was read from, when it lives in the current run's spool."""
    meta = table.schema.metadata or {}
    path = meta.get(_KEY)
    return Path(path.decode()) if path else None


class TableSink:
    """The parts of one table, in order; past `budget` bytes they go to an IPC stream on disk."""

    def __init__(self, schema: pa.Schema, budget: int | None = None) -> None:
        self.schema = schema
        self.budget = SINK_BYTES if budget is None else budget
        self._parts: list[pa.Table] = []
        self._bytes = 0
        self._path: Path | None = None
        self._keep = False
        self._file = None
        self._writer = None
        self.rows = 0

    def add(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self.rows == 0:
            self.schema = table.schema  # the parts' own schema (the given one only shapes an empty result)
        self.rows += table.num_rows
        if self._writer is None:
            self._parts.append(table)
            self._bytes += table.nbytes
            if self._bytes > self.budget:
                self._open()
                for part in self._parts:
                    self._writer.write_table(part)
                self._parts = []
        else:
            self._writer.write_table(table)

    def _open(self) -> None:
        folder = _DIR.get()
        if callable(folder):
            folder = folder()
        self._keep = folder is not None
        fd, name = tempfile.mkstemp(prefix="part-", suffix=".arrows", dir=str(folder) if folder else None)
        os.close(fd)
        self._path = Path(name)
        self._file = pa.OSFile(name, "wb")
        self._writer = pa.ipc.new_stream(self._file, self.schema)

    def table(self) -> pa.Table:
        """Everything added, as one table (memory-mapped when it went to disk)."""
        if self._writer is None:
            return pa.concat_tables(self._parts) if self._parts else self.schema.empty_table()
        self._writer.close()
        self._file.close()
        self._writer = None
        out = read(self._path)
        if self._keep:
            return out.replace_schema_metadata({**(out.schema.metadata or {}), _KEY: str(self._path).encode()})
        with contextlib.suppress(OSError):
            os.unlink(self._path)  # the mapping keeps the data; Windows refuses while mapped, which is harmless
        return out

"""The cached metrics table grouped by name: one metric's rows are read without scanning the others."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from forensics.contracts import tables as T

# The row's place in the table in table order: rows of several names are put back in that order.
ROW = "row"
# Rows sorted by name at a time (the writer's memory), and rows per Parquet row group (the read unit):
# a metric of a few rows shares a group with its neighbours, a long one has groups of its own.
FLUSH_ROWS = 1 << 20
GROUP_ROWS = 1 << 16
# Footer key of the index: name -> the row groups holding its rows (exact, unlike min/max statistics).
INDEX_KEY = b"forensics.groups_by_name"


class Writer:
    """Writes the metrics table's parts (in table order) grouped by name, with each row's table position."""

    def __init__(self, path: Path) -> None:
        self.schema = T.METRICS.append(pa.field(ROW, pa.int64()))
        # A metric's rows are in table order, so lines, steps, times and positions mostly rise by small steps:
        # delta encoding stores them in a few bits (dictionaries suit only the names, files and sources).
        deltas = {c: "DELTA_BINARY_PACKED" for c in ("line", "ts", "step", ROW)}
        self._writer = pq.ParquetWriter(path, self.schema, compression="zstd", use_dictionary=["file", "name", "source"],
                                        column_encoding=deltas)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._rows = 0
        self._groups = 0
        self._index: dict[str, list[int]] = {}

    def write(self, part: pa.Table) -> None:
        n = part.num_rows
        if not n:
            return
        rows = pa.array(np.arange(self._rows, self._rows + n, dtype=np.int64))
        self._pending.append(T.conform("metrics", part).append_column(ROW, rows))
        self._rows += n
        self._pending_rows += n
        if self._pending_rows >= FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        t = pa.concat_tables(self._pending).unify_dictionaries().combine_chunks()
        self._pending, self._pending_rows = [], 0
        names = t.column("name").cast(pa.string())
        order = pc.sort_indices(pa.table({"n": names, "r": t.column(ROW)}),
                                sort_keys=[("n", "ascending"), ("r", "ascending")])
        t, names = t.take(order), names.take(order)
        for start in range(0, t.num_rows, GROUP_ROWS):
            for name in pc.unique(names.slice(start, GROUP_ROWS)).drop_null().to_pylist():
                self._index.setdefault(name, []).append(self._groups)
            self._writer.write_table(t.slice(start, GROUP_ROWS), row_group_size=GROUP_ROWS)
            self._groups += 1

    def close(self) -> None:
        self._flush()
        self._writer.add_key_value_metadata({INDEX_KEY: orjson.dumps(self._index)})
        self._writer.close()


class Reader:
    """Reads the rows of some metric names from a file `Writer` wrote, in table order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        meta = pq.ParquetFile(path).metadata.metadata or {}
        self.groups: dict[str, list[int]] = orjson.loads(meta[INDEX_KEY])

    @property
    def names(self) -> set[str]:
        return set(self.groups)

    def rows(self, names: list[str]) -> pl.LazyFrame:
        """The metrics rows whose name is one of `names` (table columns only, dictionary columns categorical).

        A lazy scan: polars skips the row groups whose name statistics exclude the names, and reads only the
        columns a query keeps."""
        present = [n for n in dict.fromkeys(names) if n in self.groups]
        if not present:
            return pl.from_arrow(T.empty("metrics")).lazy()
        lf = pl.scan_parquet(self.path).filter(pl.col("name").is_in(present))
        # One name's rows are in table order already; several names interleave by their table position.
        return (lf.sort(ROW) if len(present) > 1 else lf).drop(ROW)

"""The metrics table's lines: where and when each metrics line was logged, without its values."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from forensics.contracts import tables as T

# What a line says about itself; a line of eight metrics has eight rows in the metrics table with the same five.
COLS = ("file", "line", "ts", "rank", "step")
SCHEMA = pa.schema([T.METRICS.field(c) for c in COLS])


def of(metrics: pl.LazyFrame) -> pl.LazyFrame:
    """The (file, line, ts, rank, step) of metrics rows in table order, a row dropped when the one before it says
    the same: a line's metrics collapse into one row, so questions about lines (the nearest time or step before
    a line, the rows at a time, the last step) read several times fewer rows and get the same answers."""
    changed = pl.any_horizontal([pl.col(c).ne_missing(pl.col(c).shift(1)) for c in COLS]) | (pl.int_range(pl.len()) == 0)
    return metrics.select(COLS).filter(changed)


class Writer:
    """Writes the lines of the metrics table's parts (in table order) as Parquet."""

    def __init__(self, path: Path) -> None:
        self._writer = pq.ParquetWriter(path, SCHEMA, compression="zstd")
        # The previous part's last row: a line whose rows a part boundary splits is still written once.
        self._last: pl.DataFrame | None = None

    def write(self, part: pa.Table) -> None:
        if not part.num_rows:
            return
        rows = pl.from_arrow(T.conform("metrics", part).select(COLS))
        assert isinstance(rows, pl.DataFrame)
        before = self._last
        self._last = rows.tail(1)
        if before is not None:
            rows = pl.concat([before, rows])
        df = of(rows.lazy()).collect()
        if before is not None:
            df = df.slice(1)
        self._writer.write_table(pa.Table.from_arrays([df.get_column(c).to_arrow().cast(SCHEMA.field(c).type) for c in COLS],
                                                      schema=SCHEMA))

    def close(self) -> None:
        self._writer.close()

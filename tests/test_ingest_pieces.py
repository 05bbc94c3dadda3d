"""Ingest hands a big part to its streaming consumers (the cache writer, the step carrier) in bounded pieces, with
the same result as whole parts (forensics/ingest.py `Run.batches`, parsers/spool.py `pieces`)."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from forensics.parsers import spool

from forensics import cache, ingest
from forensics.cache import METRIC_LINES, METRICS_BY_NAME
from tests.helpers import ingest_files
from tests.test_steps_across_files import RUN_DAY, _megatron, _watchdog


def test_a_spilled_part_is_read_in_pieces_of_at_most_the_rows_asked(tmp_path):
    path = tmp_path / "t.arrows"
    table = pa.table({"x": list(range(10))})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        for start in (0, 4, 7):  # batches of 4, 3 and 3 rows
            writer.write_table(table.slice(start, {0: 4, 4: 3, 7: 3}[start]))
    pieces = list(spool.pieces(path, 3))
    assert max(p.num_rows for p in pieces) == 3 and len(pieces) == 4
    assert pa.concat_tables(pieces).column("x").to_pylist() == list(range(10))


def _run_files() -> dict[str, str]:
    files = {}
    for rank in (0, 1):
        # Each Megatron line holds several metrics, so a piece boundary falls inside a line's rows.
        files[f"logs/rank{rank}.out"] = "".join(_megatron(it, s) for it, s in ((100 + rank, 10), (110, 20), (120 + rank, 30)))
        files[f"logs/rank{rank}.err"] = "some warning\n" + _watchdog(rank, 25 + 10 * rank)
    return files


def _saved(tmp_path, name, monkeypatch, piece_rows: int) -> dict[str, pl.DataFrame]:
    monkeypatch.setattr(ingest, "PIECE_ROWS", piece_rows)
    run = ingest_files(tmp_path / name, _run_files(), mtime=RUN_DAY)
    out = tmp_path / f"{name}-cache"
    cache.save(run, out)
    return {f: pl.from_arrow(pq.read_table(out / f)) for f in ("metrics.parquet", METRIC_LINES, METRICS_BY_NAME, "events.parquet")}


def test_pieces_write_the_same_cache_and_carry_the_same_steps_as_whole_parts(tmp_path, monkeypatch):
    whole = _saved(tmp_path, "whole", monkeypatch, 1 << 20)
    small = _saved(tmp_path, "small", monkeypatch, 4)
    for name, df in whole.items():
        assert small[name].equals(df), name
    # One row per metrics line, none doubled where a piece boundary split a line's rows.
    lines = whole[METRIC_LINES]
    assert lines.height == 6 and lines.unique(["file", "line"]).height == 6
    # The watchdog events took their rank's step from the other file, through pieces of 4 metric rows.
    ev = small["events.parquet"].filter(pl.col("code") == "nccl_watchdog_timeout").sort("rank")
    assert ev.get_column("step").to_list() == [110, 121]

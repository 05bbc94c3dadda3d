"""The evidence-table contract: conform() casts to the schema and yields tables Parquet can store."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from forensics.contracts import tables as T


def test_conform_fills_missing_columns_and_drops_extra_ones():
    t = pa.table({"line": [3, 4], "name": ["loss", "lr"], "value": [1.5, 2e-4], "bogus": [1, 2]})
    out = T.conform("metrics", t)
    assert out.schema == T.METRICS
    assert out.column("file").null_count == 2 and "bogus" not in out.column_names
    assert out.column("name").to_pylist() == ["loss", "lr"]


def test_null_inside_a_dictionary_is_re_encoded_so_parquet_can_write_it(tmp_path):
    # A dictionary whose values contain a null (as some Arrow builders produce) is not writable as is.
    names = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["f", None]))
    t = T.conform("counters", pa.table({"name": names, "line": [1, 2, 3]}))
    pq.write_table(t, tmp_path / "c.parquet")
    assert pq.read_table(tmp_path / "c.parquet").column("name").to_pylist() == ["f", None, "f"]

"""PyTorch `prof.export_memory_timeline` JSON (raw event tuples or [times, sizes]) into `counters`.

Raw (`*.raw.json.gz`): a list of `[ts_ns, action, numbytes, category]` with action 1
PREEXISTING, 2 CREATE, 3 INCREMENT_VERSION (written as -old then +new), 4 DESTROY
(negative bytes), ts -1 for allocations that existed before profiling. Plot form
(`.json`): `[times_us, sizes]` with sizes[i] = [0, bytes per category...]. Both become the
bytes held per category over time (name `memory_timeline_bytes`, series = category) plus
their sum (series `total`). Category order as in torch/profiler/_memory_profiler.py.
"""

from __future__ import annotations

import re

import msgspec
import numpy as np
import polars as pl
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.prefixes import rank_from_path

from forensics.contracts import tables as T

SOURCE = "memory_timeline"
NAME = "memory_timeline_bytes"
CATEGORIES = ["PARAMETER", "OPTIMIZER_STATE", "INPUT", "TEMPORARY", "ACTIVATION", "GRADIENT", "AUTOGRAD_DETAIL", "unknown"]
_RAW_HEAD = re.compile(rb"^\s*\[\s*\[\s*-?\d+\s*,\s*[1-4]\s*,\s*-?\d+\s*,\s*[0-7]\s*\]")
_PLOT_HEAD = re.compile(rb"^\s*\[\s*\[\s*-?\d+\s*[,\]]")
_TUPLE_END = re.compile(rb"\]\s*(?=,|\]|$)")


def _decode_rows(buf: bytes) -> tuple[list, bool]:
    """The raw tuples; a truncated file gives its complete tuples and False."""
    try:
        return msgspec.json.decode(buf, type=list[tuple[int, int, int, int]]), True
    except msgspec.DecodeError:
        pass
    ends = [m.start() + 1 for m in _TUPLE_END.finditer(buf, max(0, len(buf) - 4096))]
    for end in reversed(ends):
        try:
            return msgspec.json.decode(buf[:end] + b"]", type=list[tuple[int, int, int, int]]), False
        except msgspec.DecodeError:
            continue
    raise ValueError("no complete memory-timeline entry")


def from_raw(rows: list) -> pl.DataFrame:
    """Running bytes per category after each event (one sample per timestamp and category)."""
    a = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    ts = a[:, 0].astype(np.float64)
    known = ts[ts >= 0]
    # Pre-existing allocations (-1) are placed at the first real timestamp.
    ts[ts < 0] = known.min() if known.size else 0.0
    cat = np.clip(a[:, 3], 0, len(CATEGORIES) - 1)
    df = pl.DataFrame({"line": np.arange(len(a), dtype=np.int64), "ts_ns": ts, "cat": cat, "delta": a[:, 2]})
    df = df.with_columns(pl.col("delta").cum_sum().over("cat").alias("held"), pl.col("delta").cum_sum().alias("total"))
    per_cat = (df.group_by("ts_ns", "cat", maintain_order=True).agg(pl.col("line").last(), pl.col("held").last())
               .with_columns(pl.col("cat").map_elements(lambda i: CATEGORIES[i], return_dtype=pl.String).alias("series"))
               .select("line", "ts_ns", "series", pl.col("held").cast(pl.Float64).alias("value")))
    total = (df.group_by("ts_ns", maintain_order=True).agg(pl.col("line").last(), pl.col("total").last())
             .select("line", "ts_ns", pl.lit("total").alias("series"), pl.col("total").cast(pl.Float64).alias("value")))
    out = pl.concat([per_cat, total]).sort("line", "series")
    return out.with_columns((pl.col("ts_ns") / 1000.0).alias("ts_us")).drop("ts_ns")


def from_plot(doc: list) -> pl.DataFrame:
    """`[times_us, sizes]` where sizes[i][k + 1] is the bytes of category k."""
    times, sizes = doc
    cols = {"line": [], "ts_us": [], "series": [], "value": []}
    for i, (t, row) in enumerate(zip(times, sizes, strict=False)):
        vals = row[1:] if len(row) == len(CATEGORIES) + 1 else row
        for k, v in enumerate(vals[: len(CATEGORIES)]):
            cols["line"].append(i)
            cols["ts_us"].append(float(t))
            cols["series"].append(CATEGORIES[k])
            cols["value"].append(float(v))
        cols["line"].append(i)
        cols["ts_us"].append(float(t))
        cols["series"].append("total")
        cols["value"].append(float(sum(vals)))
    return pl.DataFrame(cols, schema={"line": pl.Int64, "ts_us": pl.Float64, "series": pl.String, "value": pl.Float64})


def parse(src, sn: Sniffed) -> ParseResult:
    """Read the timeline into counters (UTC time: raw timestamps are epoch ns, plot ones epoch µs)."""
    buf = src.read_all()
    complete = True
    if _RAW_HEAD.match(buf):
        rows, complete = _decode_rows(buf)
        df = from_raw(rows)
    else:
        doc = msgspec.json.decode(buf)
        if not (isinstance(doc, list) and len(doc) == 2 and isinstance(doc[0], list) and isinstance(doc[1], list)):
            raise ValueError("not a memory timeline: expected [times, sizes]")
        df = from_plot(doc)
    rank = rank_from_path(src.rel)
    ts = pl.when(pl.col("ts_us") > 1e15).then(pl.col("ts_us").round(0).cast(pl.Int64)).cast(pl.Datetime("us", "UTC"))
    df = df.with_columns(pl.lit(src.rel).alias("file"), pl.lit(SOURCE).alias("source"), pl.lit(NAME).alias("name"),
                         pl.lit(rank, dtype=pl.Int32).alias("rank"), ts.alias("ts"))
    result = ParseResult(tables={"counters": T.conform("counters", df.to_arrow())}, rank=rank)
    if not complete or src.truncated:
        result.status = "partial"
        result.error = "; ".join(list(src.problems) + ([] if complete else ["truncated: kept the complete entries"]))
    return result


def sniff(sn: Sniffed) -> int:
    """A JSON list of 4-integer tuples (raw) or of two lists starting with integer times (plot)."""
    if _RAW_HEAD.match(sn.head):
        return 90
    if _PLOT_HEAD.match(sn.head) and b'"' not in sn.head[:4096]:
        return 60
    return 0


PARSER = Parser(kind="memory_timeline", sniff=sniff, parse=parse,
                description="PyTorch profiler export_memory_timeline JSON (raw or plot form)")

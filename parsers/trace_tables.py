"""Decoded Chrome-trace columns into the `spans` and `counters` tables (shared by the Kineto and VizTracer readers).

Work stays columnar: per-name facts (kind of a category, ProfilerStep number, VizTracer
function/file/line) are computed once per *dictionary value* and spread to the rows
through the dictionary indices; args are parsed only for the rows that need a field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from itertools import compress
from operator import attrgetter

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from forensics.contracts import tables as T

DICT_STR = T.DICT_STR
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")

# Event phases that are not spans: metadata, counters, flow arrows (flows only restate
# the runtime->kernel correlation that `args.correlation` already gives).
NOT_SPAN_PH = {"M", "C", "s", "f", "t"}
INSTANT_PH = {"i", "I"}

# Categories of every writer and era, normalised (traces.md 3.1; TensorBoard plugin's mapping).
KIND_OF_CAT = {
    "cpu_op": "cpu_op", "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
    "kernel": "kernel",
    "gpu_memcpy": "gpu_memcpy", "memcpy": "gpu_memcpy",
    "gpu_memset": "gpu_memset", "memset": "gpu_memset",
    "cuda_runtime": "cuda_runtime", "runtime": "cuda_runtime",
    "cuda_driver": "cuda_driver",
    "cuda_sync": "cuda_sync",
    "python_function": "python_function", "python": "python_function",
    "trace": "trace",
    "overhead": "overhead",
    "cpu_instant_event": "instant",
    "fee": "function",
    "instant": "instant",
}
GPU_KINDS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_profiler_range")
LAUNCH_KINDS = ("cuda_runtime", "cuda_driver")


# ----------------------------------------------------------------------------- dictionary helpers

def as_dict_chunks(col: pa.ChunkedArray) -> tuple[list[pa.Array], list]:
    """Chunks sharing one dictionary (the table must be dictionary-unified) and its Python values."""
    chunks = col.chunks
    if not chunks:
        return [], []
    return chunks, chunks[0].dictionary.to_pylist()


def map_dict(col: pa.ChunkedArray, fn: Callable[[list], list], typ: pa.DataType) -> pa.ChunkedArray:
    """Apply `fn` to the dictionary values once and spread the result to the rows by index."""
    chunks, values = as_dict_chunks(col)
    if not chunks:
        return pa.chunked_array([], type=typ)
    mapped = pa.array(fn(values), type=typ if not pa.types.is_dictionary(typ) else pa.string())
    out = []
    for c in chunks:
        if pa.types.is_dictionary(typ):
            out.append(pa.DictionaryArray.from_arrays(c.indices, mapped))
        else:
            out.append(mapped.take(c.indices))
    return pa.chunked_array(out, type=typ)


def _indices(chunk: pa.DictionaryArray) -> np.ndarray:
    """Dictionary indices as numpy, nulls as -1."""
    return pc.fill_null(chunk.indices, -1).to_numpy(zero_copy_only=False)


def kinds(cat: pa.ChunkedArray, ph: pa.ChunkedArray) -> pa.ChunkedArray:
    """Normalised category as a dictionary column; events without `cat` get one from their phase.

    Computed on the dictionaries (a few values) and spread by index with numpy: no string per row."""
    cat_chunks, cat_vals = as_dict_chunks(cat)
    ph_chunks, ph_vals = as_dict_chunks(ph)
    if not cat_chunks:
        return pa.chunked_array([], type=DICT_STR)
    names: list[str] = []
    slot: dict[str, int] = {}

    def code(v: str | None) -> int:
        if v is None:
            return -1
        return slot.setdefault(v, len(slot))

    by_cat = np.array([code(None if v is None else KIND_OF_CAT.get(v.lower(), v.lower())) for v in cat_vals] + [-1], dtype=np.int32)
    by_ph = np.array([code("instant" if v in INSTANT_PH else ("object" if v in ("N", "O", "D") else None)) for v in ph_vals] + [-1],
                     dtype=np.int32)
    names = list(slot)
    dictionary = pa.array(names, pa.string())
    out = []
    for c, p in zip(cat_chunks, ph_chunks, strict=True):
        idx = by_cat[_indices(c)]
        idx = np.where(idx >= 0, idx, by_ph[_indices(p)])
        out.append(pa.DictionaryArray.from_arrays(pa.array(idx, mask=idx < 0, type=pa.int32()), dictionary))
    return pa.chunked_array(out, type=DICT_STR)


def step_numbers(name: pa.ChunkedArray) -> pa.ChunkedArray:
    """`ProfilerStep#N` -> N per row, null elsewhere."""
    def f(vs: list) -> list:
        out = []
        for v in vs:
            m = STEP_NAME.match(v) if v else None
            out.append(int(m.group(1)) if m else None)
        return out
    return map_dict(name, f, pa.int64())


def in_values(col: pa.ChunkedArray, wanted: Iterable[str]) -> pa.ChunkedArray:
    """Boolean mask: the row's (dictionary) value is one of `wanted` (null -> False)."""
    ws = set(wanted)
    chunks, values = as_dict_chunks(col)
    lookup = np.array([v in ws for v in values] + [False], dtype=bool)
    return pa.chunked_array([pa.array(lookup[_indices(c)]) for c in chunks], type=pa.bool_())


def const_dict(value: str, n: int) -> pa.Array:
    """A dictionary column holding one value n times (file, source)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value], pa.string()))


# ----------------------------------------------------------------------------- ids and names

_DIGITS = re.compile(r"(\d+)\s*$")


def numeric_ids(ints: pa.ChunkedArray, text: pa.ChunkedArray) -> pa.ChunkedArray:
    """Integer ids, taking the trailing number of string ids ('25738', 'stream 7')."""
    if text.null_count == len(text):
        return ints
    from_text = pc.cast(pc.struct_field(pc.extract_regex(text, r"(?P<n>\d+)\s*$"), [0]), pa.int64())
    return pc.coalesce(ints, from_text)


def metadata_rows(ev: pa.Table, pid: pa.ChunkedArray, tid: pa.ChunkedArray, raws: list) -> pa.Table:
    """The `M` events of a window (few), with numeric pid/tid and their raw args."""
    mask = in_values(ev["ph"], ["M"])
    args = list(compress(raws, flat_bools(mask).tobytes()))
    return pa.table({"pid": pid.filter(mask), "tid": tid.filter(mask), "name": ev["name"].filter(mask).cast(pa.string()),
                     "args": pa.array([raw_json(a) for a in args], pa.large_binary())})


def raw_json(args) -> bytes | None:
    """One event's args as JSON bytes: a raw slice as it was, a typed args struct re-encoded
    (its known fields only), None when the event had none."""
    if args is None:
        return None
    if isinstance(args, msgspec.Raw):
        return bytes(args) if len(args) else None
    return msgspec.json.encode(args)


def thread_names(meta_rows: list[pa.Table]) -> pl.DataFrame:
    """(pid, tid) -> thread name from the `thread_name` metadata events."""
    empty = pl.DataFrame(schema={"pid": pl.Int64, "tid": pl.Int64, "thread": pl.String})
    rows = [r for r in meta_rows if r.num_rows]
    if not rows:
        return empty
    t = pa.concat_tables(rows)
    p, i, names, raws = t["pid"].to_pylist(), t["tid"].to_pylist(), t["name"].to_pylist(), t["args"].to_pylist()
    out = {"pid": [], "tid": [], "thread": []}
    for pid, tid, name, raw in zip(p, i, names, raws, strict=True):
        if name != "thread_name" or not raw:
            continue
        try:
            v = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            continue
        if isinstance(v, dict) and v.get("name") is not None:
            out["pid"].append(pid)
            out["tid"].append(tid)
            out["thread"].append(str(v["name"]).strip())
    if not out["pid"]:
        return empty
    return pl.DataFrame(out, schema=empty.schema).drop_nulls().unique(subset=["pid", "tid"], keep="last")


def thread_column(pid: pa.ChunkedArray, tid: pa.ChunkedArray, tid_text: pa.ChunkedArray, threads: pl.DataFrame) -> pa.Array:
    """Thread name from metadata events, else the writer's string tid ('stream 7', 'PyTorch Profiler').

    Names are looked up once per distinct (pid, tid, text) lane and spread back by index."""
    df = pl.DataFrame({"pid": pl.from_arrow(pid), "tid": pl.from_arrow(tid), "txt": pl.from_arrow(tid_text)})
    lanes = df.unique(maintain_order=True).with_row_index("_lane")
    named = lanes.join(threads, on=["pid", "tid"], how="left", maintain_order="left").sort("_lane")
    lane_names = named.select(pl.coalesce("thread", "txt")).to_series().to_list()
    uniq = sorted({v for v in lane_names if v is not None})
    slot = {v: i for i, v in enumerate(uniq)}
    lane_code = np.array([slot.get(v, -1) if v is not None else -1 for v in lane_names], dtype=np.int32)
    row_lane = df.join(lanes, on=["pid", "tid", "txt"], how="left", maintain_order="left", nulls_equal=True)["_lane"].to_numpy()
    code = lane_code[row_lane.astype(np.int64)]
    return pa.DictionaryArray.from_arrays(pa.array(code, mask=code < 0, type=pa.int32()), pa.array(uniq, pa.string()))


# ----------------------------------------------------------------------------- args

def typed_fields(args: list, mask: np.ndarray | None, fields: dict[str, pa.DataType]) -> dict[str, pa.Array]:
    """Fields of the typed args structs of the rows in `mask` (all rows when None), one Arrow
    array per field holding just those rows, in order (an event without args gives nulls)."""
    chosen = args if mask is None else list(compress(args, mask.tobytes()))
    if None in chosen:
        chosen = [_NO_ARGS if a is None else a for a in chosen]
    return {f: _coerce(list(map(attrgetter(f), chosen)), t) for f, t in fields.items()}


class _NoArgs:
    """Stands for a missing args object: every field reads None."""

    def __getattr__(self, name: str) -> None:
        return None


_NO_ARGS = _NoArgs()


def flat_bools(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A boolean Arrow mask as one numpy array (null -> False)."""
    arr = mask.combine_chunks() if isinstance(mask, pa.ChunkedArray) else mask
    return pc.fill_null(arr, False).to_numpy(zero_copy_only=False)


def scatter(values: pa.Array, mask: np.ndarray, n: int) -> pa.Array:
    """Values of the rows in `mask` spread into a column of length n (null elsewhere)."""
    if len(values) == n:
        return values
    return pc.replace_with_mask(pa.nulls(n, values.type), pa.array(mask), values)


def _coerce(vals: list, t: pa.DataType) -> pa.Array:
    try:
        return pa.array(vals, type=t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        clean = []
        for v in vals:
            try:
                x = float(v) if pa.types.is_floating(t) else int(v)
                if pa.types.is_integer(t) and not -(2**63) <= x < 2**63:
                    x = None
            except (TypeError, ValueError, OverflowError):
                x = None
            clean.append(x)
        return pa.array(clean, type=t)


# ----------------------------------------------------------------------------- steps

def _np(col, dtype, fill) -> np.ndarray:
    """An Arrow column as a numpy array with nulls replaced by `fill`."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return pc.fill_null(arr, fill).to_numpy(zero_copy_only=False).astype(dtype, copy=False)


def step_intervals(ts: np.ndarray, end: np.ndarray, stepno: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, step) of the ProfilerStep#N marks in `rows`, one interval per step, by start."""
    if not rows.any():
        return np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)
    steps = stepno[rows]
    uniq, inv = np.unique(steps, return_inverse=True)
    s0 = np.full(uniq.size, np.inf)
    s1 = np.full(uniq.size, -np.inf)
    np.minimum.at(s0, inv, ts[rows])
    np.maximum.at(s1, inv, end[rows])
    order = np.argsort(s0, kind="stable")
    return s0[order], s1[order], uniq[order]


def contain(t: np.ndarray, s0: np.ndarray, s1: np.ndarray, step: np.ndarray) -> np.ndarray:
    """The step whose interval contains each time (-1 when none); intervals are few and sorted."""
    if s0.size == 0:
        return np.full(t.size, -1, dtype=np.int64)
    i = np.searchsorted(s0, t, side="right") - 1
    ok = (i >= 0) & (t <= s1[np.clip(i, 0, None)])
    return np.where(ok, step[np.clip(i, 0, None)], -1)


def assign_steps(ts: pa.ChunkedArray, dur: pa.ChunkedArray, kind: pa.ChunkedArray, step_no: pa.ChunkedArray,
                 correlation: pa.Array, ph: pa.ChunkedArray) -> tuple[pa.Array, tuple]:
    """The ProfilerStep each row falls in: host rows by time containment in the host-side
    `ProfilerStep#N`, device rows through the launching runtime call (correlation), else the
    GPU-side annotation, else time. Also returns the host step intervals (s0, s1, step).

    Steps are few, so containment is a binary search per row (numpy), not a join."""
    n = len(ts)
    t = _np(ts, np.float64, np.nan)
    end = t + _np(dur, np.float64, 0.0)
    stepno = _np(step_no, np.int64, -1)
    complete = _np(in_values(ph, ["X"]), bool, False) & ~np.isnan(t)
    gpu = _np(in_values(kind, GPU_KINDS), bool, False)
    marks = (stepno >= 0) & complete
    host_iv = step_intervals(t, end, stepno, marks & ~gpu)
    if marks.sum() == 0:
        return pa.nulls(n, pa.int64()), host_iv
    step = contain(t, *host_iv)
    if gpu.any():
        gpu_iv = step_intervals(t, end, stepno, marks & gpu)
        s_gpu = contain(t, *gpu_iv)
        corr = _np(correlation, np.int64, -1)
        launch = _np(in_values(kind, LAUNCH_KINDS), bool, False) & (corr >= 0) & (step >= 0)
        s_corr = np.full(n, -1, dtype=np.int64)
        if launch.any():
            lc, first = np.unique(corr[launch], return_index=True)
            ls = step[launch][first]
            want = gpu & (corr >= 0)
            pos = np.clip(np.searchsorted(lc, corr[want]), 0, lc.size - 1)
            hit = lc[pos] == corr[want]
            s_corr[np.flatnonzero(want)[hit]] = ls[pos[hit]]
        dev = np.where(s_corr >= 0, s_corr, np.where(s_gpu >= 0, s_gpu, step))
        step = np.where(gpu, dev, step)
    return pa.array(step, mask=step < 0, type=pa.int64()), host_iv


# ----------------------------------------------------------------------------- assembly

def finish_spans(parts: list[pa.Table], threads: pl.DataFrame, rel: str, source: str, rank: int | None,
                 base_ns: int | None, epoch_if_large: bool,
                 extra: Callable[[pa.Table], dict] | None = None) -> tuple[pa.Table, tuple]:
    """Per-window span rows into the `spans` table (one dictionary per column, threads, steps, UTC
    time), and the host ProfilerStep intervals (s0, s1, step) for placing counters."""
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return T.empty("spans"), step_intervals(np.empty(0), np.empty(0), np.empty(0, dtype=np.int64), np.empty(0, dtype=bool))
    sp = pa.concat_tables(parts).unify_dictionaries()
    n = sp.num_rows
    cols = {
        "file": const_dict(rel, n), "line": sp["line"], "source": const_dict(source, n),
        "rank": pa.nulls(n, pa.int32()) if rank is None else pa.array(np.full(n, rank, dtype=np.int32)),
        "thread": thread_column(sp["pid"], sp["tid"], sp["tid_text"], threads),
        "ts": absolute_ts(sp["ts_us"], base_ns, epoch_if_large),
    }
    cols["step"], intervals = assign_steps(sp["ts_us"], sp["dur_us"], sp["kind"], sp["stepno"],
                                           sp["correlation"] if "correlation" in sp.column_names else pa.nulls(n, pa.int64()), sp["ph"])
    for name in sp.column_names:
        if name not in cols and name not in ("tid_text", "stepno"):
            cols[name] = sp[name]
    cols.update(extra(sp) if extra else {})
    return T.conform("spans", pa.table(cols)), intervals


# ----------------------------------------------------------------------------- time

def absolute_ts(ts_us: pa.ChunkedArray, base_ns: int | None, epoch_if_large: bool) -> pa.ChunkedArray:
    """UTC timestamps: base + ts; without a base, ts itself when it is already epoch microseconds."""
    if base_ns is not None:
        us = pc.add(ts_us, base_ns / 1000.0)
    elif epoch_if_large:
        us = pc.if_else(pc.greater(ts_us, 1e15), ts_us, pa.scalar(None, pa.float64()))
    else:
        return pa.chunked_array([pa.nulls(len(ts_us), T.TS)])
    return pc.cast(pc.round(us), pa.int64()).cast(T.TS)


# ----------------------------------------------------------------------------- counters

# The per-window shape of counter rows (provenance, time and step are added at the end).
COUNTER_PART = pa.schema([("line", pa.int64()), ("pid", pa.int64()), ("tid", pa.int64()), ("name", pa.string()),
                          ("series", pa.string()), ("device", pa.int64()), ("ts_us", pa.float64()), ("value", pa.float64())])


def counter_part(**cols) -> pa.Table:
    """A counter-rows table with the COUNTER_PART columns (missing ones null)."""
    n = len(next(iter(cols.values())))
    return pa.table([cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in COUNTER_PART], schema=COUNTER_PART)


def counter_rows(ev: pa.Table, pid: pa.ChunkedArray, tid: pa.ChunkedArray, raws: list) -> pa.Table | None:
    """`C` events: one row per numeric key of args (series = the key)."""
    mask = in_values(ev["ph"], ["C"])
    if not pc.any(mask).as_py():
        return None
    rows = ev.filter(mask)
    chosen = list(compress(raws, flat_bools(mask).tobytes()))
    p = pid.filter(mask).to_pylist()
    t = tid.filter(mask).to_pylist()
    out: dict[str, list] = {k: [] for k in ("line", "pid", "tid", "name", "series", "ts_us", "value")}
    for i, (line, name, ts, raw) in enumerate(zip(rows["idx"].to_pylist(), rows["name"].to_pylist(),
                                                  rows["ts"].to_pylist(), chosen, strict=True)):
        try:
            text = raw_json(raw)
            args = msgspec.json.decode(text) if text else {}
        except msgspec.DecodeError:
            continue
        if not isinstance(args, dict):
            continue
        for key, value in args.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            out["line"].append(line)
            out["pid"].append(p[i])
            out["tid"].append(t[i])
            out["name"].append(name)
            out["series"].append(str(key))
            out["ts_us"].append(ts)
            out["value"].append(float(value))
    if not out["line"]:
        return None
    return counter_part(**{k: pa.array(v, type=COUNTER_PART.field(k).type) for k, v in out.items()})


def concat_parts(parts: list[pa.Table | None]) -> pa.Table | None:
    """Stack per-window counter rows (None and empty parts skipped)."""
    parts = [p for p in parts if p is not None and p.num_rows]
    return pa.concat_tables(parts) if parts else None


def finish_counters(part: pa.Table | None, file: str, source: str, rank: int | None, base_ns: int | None,
                    epoch_if_large: bool, intervals: tuple | None) -> pa.Table:
    """Counter rows with provenance, absolute time and step (host ProfilerStep containing the sample)."""
    if part is None or part.num_rows == 0:
        return T.empty("counters")
    n = part.num_rows
    cols = {name: part[name] for name in part.column_names}
    cols["file"] = const_dict(file, n)
    cols["source"] = const_dict(source, n)
    cols["rank"] = pa.nulls(n, pa.int32()) if rank is None else pa.array(np.full(n, rank, dtype=np.int32))
    cols["ts"] = absolute_ts(part["ts_us"], base_ns, epoch_if_large)
    if intervals is not None and intervals[0].size:
        step = contain(_np(part["ts_us"], np.float64, np.nan), *intervals)
        cols["step"] = pa.array(step, mask=step < 0, type=pa.int64())
    return T.conform("counters", pa.table(cols))

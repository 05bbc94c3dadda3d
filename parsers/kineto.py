"""PyTorch profiler (Kineto) Chrome-trace exports of every era into `spans` and `counters`.

Handles the 2021 names (`Operator`/`Runtime`/`Kernel`, string tids such as `"stream 7"`),
the `cpu_op`/`cuda_runtime`/`kernel`/`gpu_memcpy` names, integer, ns-precision absolute and
`baseTimeNanoseconds`-relative timestamps, `[memory]` instant events (-> counters),
`deviceProperties`/`distributedInfo` (-> run metadata and the file's rank), and
`ProfilerStep#N` spans (-> every span's `step`). Legacy `export_chrome_trace` bare arrays too.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
from forensics.parsers import chrome_trace
from forensics.parsers import trace_tables as tt
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.prefixes import rank_from_path

SOURCE = "kineto"

# Kinds whose args are parsed for the linking fields (correlation, External id, stream, device):
# device activity and the runtime/driver calls that launch it. Ops keep their External id in
# `args` only (parsing it for every op would cost a second pass over most of the trace).
ARG_KINDS = tt.GPU_KINDS + tt.LAUNCH_KINDS + ("cuda_sync",)


class Args(msgspec.Struct, gc=False):
    """The args fields Kineto readers use, typed and decoded with the event (other keys are skipped
    by the decoder and stay in the file: `chrome_trace.args_of`). Link fields tie ops, runtime calls
    and device activity; memory fields are those of `[memory]` allocator events (2021 files have
    only Device Type/Id and Bytes); `name` is a metadata event's thread or process name."""

    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_2021: int | None = msgspec.field(default=None, name="external id")
    correlation: int | None = None
    stream: int | None = None
    device: int | None = None
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    bytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: int | None = msgspec.field(default=None, name="Total Reserved")
    name: Any = None


class Event(chrome_trace.EventBase, gc=False):
    """A Kineto event with its args typed (see `Args`)."""

    args: Args | None = None


# Typing the few args fields in the decode pass costs about nothing; a second decode of raw args
# slices (and copying them into a column) was a third of a big trace's load time.
SCHEMA = chrome_trace.Schema(Event, raw_args=False)

LINK_FIELDS = {"external_id": pa.int64(), "external_id_2021": pa.int64(), "correlation": pa.int64(),
               "stream": pa.int64(), "device": pa.int64()}
MEM_FIELDS = {"device_id": pa.int64(), "bytes": pa.float64(), "total_allocated": pa.float64(),
              "total_reserved": pa.float64()}
MEM_SERIES = {"total_allocated": "memory_allocated_bytes", "total_reserved": "memory_reserved_bytes",
              "bytes": "memory_delta_bytes"}

PROFILER_KEYS = ("schemaVersion", "displayTimeUnit", "record_shapes", "profile_memory", "with_stack", "with_flops",
                 "with_modules", "cupti_version", "cuda_runtime_version", "cuda_driver_version", "roctracer_version",
                 "hip_runtime_version", "hip_driver_version", "trace_id", "traceName")
DEVICE_KEYS = ("id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms")


class _Window:
    """Reduces one decoded window to its span rows, counter rows and metadata rows, so the
    window's raw columns and Python objects are freed before the next window is decoded."""

    def __init__(self) -> None:
        self.flows = 0

    def __call__(self, ev: pa.Table, raws: list) -> dict:
        pid = tt.numeric_ids(ev["pid"], ev["pid_text"])
        tid = tt.numeric_ids(ev["tid"], ev["tid_text"])
        instant = tt.in_values(ev["ph"], tt.INSTANT_PH)
        is_mem = pc.and_(instant, tt.in_values(ev["name"], ["[memory]"]))
        is_span = pc.and_(pc.invert(tt.in_values(ev["ph"], tt.NOT_SPAN_PH)), pc.invert(is_mem))
        self.flows += pc.sum(tt.in_values(ev["ph"], ["s", "f", "t"]).cast(pa.int64())).as_py() or 0
        mem = tt.flat_bools(is_mem)
        out = {
            "meta": tt.metadata_rows(ev, pid, tid, raws),
            "counters": tt.concat_parts([_memory_rows(ev.filter(is_mem), pid.filter(is_mem), tid.filter(is_mem), raws, mem),
                                         tt.counter_rows(ev, pid, tid, raws)]),
        }
        kind_all = tt.kinds(ev["cat"], ev["ph"])
        spans = tt.flat_bools(is_span)
        # Link fields of device activity and the calls that launch it, decoded from the raw
        # slices of just those rows, then placed among the span rows.
        linked = spans & tt.flat_bools(tt.in_values(kind_all, ARG_KINDS))
        n = int(spans.sum())
        link = {f: tt.scatter(v, linked[spans], n) for f, v in tt.typed_fields(raws, linked, LINK_FIELDS).items()}
        sp = ev.filter(is_span)
        pid, tid = pid.filter(is_span), tid.filter(is_span)
        kind = kind_all.filter(is_span)
        gpu = tt.in_values(kind, tt.GPU_KINDS)
        none = pa.scalar(None, pa.int64())
        out["spans"] = pa.table({
            "line": sp["idx"], "pid": pid, "tid": tid, "tid_text": sp["tid_text"], "ph": sp["ph"], "name": sp["name"],
            "cat": sp["cat"], "kind": kind, "ts_us": sp["ts"], "dur_us": sp["dur"],
            "stream": pc.coalesce(link["stream"], pc.if_else(gpu, tid, none)),
            "device": pc.coalesce(link["device"], pc.if_else(gpu, pid, none)),
            "correlation": link["correlation"],
            "external_id": pc.coalesce(link["external_id"], link["external_id_2021"]),
            "stepno": tt.step_numbers(sp["name"]),
            "args": sp["args"],
        })
        return out


def build(tr: chrome_trace.Trace, rel: str, flows: int = 0, source: str = SOURCE) -> tuple[dict[str, pa.Table], dict, int | None]:
    """Spans and counters tables, run metadata and rank from a Kineto trace read with `_Window`."""
    base_ns = tr.meta_value("baseTimeNanoseconds")
    base_ns = int(base_ns) if isinstance(base_ns, (int, float)) and not isinstance(base_ns, bool) else None
    dist = tr.meta_value("distributedInfo", {})
    dist = dist if isinstance(dist, dict) else {}
    rank = dist.get("rank") if isinstance(dist.get("rank"), int) else rank_from_path(rel)

    threads = tt.thread_names([p["meta"] for p in tr.parts])
    counters = tt.concat_parts([p["counters"] for p in tr.parts])
    parts = [p["spans"] for p in tr.parts]
    tr.parts.clear()
    spans, steps = tt.finish_spans(parts, threads, rel, source, rank, base_ns, True)
    del parts
    cnt = tt.finish_counters(counters, rel, source, rank, base_ns, True, steps)
    meta = _meta(tr, rel, rank, dist, base_ns, spans, flows)
    return {"spans": spans, "counters": cnt}, meta, rank


def _memory_rows(rows: pa.Table, pid, tid, raws: list, mask) -> pa.Table | None:
    """`[memory]` events -> allocated / reserved totals and the per-event delta, per device."""
    if rows.num_rows == 0:
        return None
    f = tt.typed_fields(raws, mask, MEM_FIELDS)
    parts = []
    for field, name in MEM_SERIES.items():
        value = f[field]
        keep = pc.is_valid(value)
        if not pc.any(keep).as_py():
            continue
        # Device Id is -1 for CPU memory; keep it so host and device series stay apart.
        parts.append(tt.counter_part(
            line=rows["idx"].filter(keep), pid=pid.filter(keep), tid=tid.filter(keep),
            name=pa.array([name] * int(pc.sum(keep.cast(pa.int64())).as_py()), pa.string()),
            device=f["device_id"].filter(keep), ts_us=rows["ts"].filter(keep), value=value.filter(keep)))
    return tt.concat_parts(parts)


def _meta(tr: chrome_trace.Trace, rel: str, rank: int | None, dist: dict, base_ns: int | None,
          spans: pa.Table, n_flows: int) -> dict:
    devices = tr.meta_value("deviceProperties", [])
    devices = [{k: d.get(k) for k in DEVICE_KEYS if k in d} for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []
    profiler = {k: tr.meta_value(k) for k in PROFILER_KEYS if k in tr.meta}
    info = {
        "source": SOURCE, "rank": rank, "world_size": dist.get("world_size"), "backend": dist.get("backend"),
        "nccl_version": dist.get("nccl_version"), "pg_count": dist.get("pg_count"),
        "base_time_ns": base_ns, "devices": devices, "profiler": profiler,
        "spans": spans.num_rows, "flow_events": n_flows, "complete": tr.complete,
    }
    meta: dict[str, Any] = {f"trace:{rel}": info}
    if isinstance(dist.get("world_size"), int):
        meta["world_size"] = dist["world_size"]
    if dist.get("backend"):
        meta["distributed_backend"] = dist["backend"]
    if devices:
        meta["device_properties"] = devices
        names = sorted({d.get("name") for d in devices if d.get("name")})
        if names:
            meta["gpu_name"] = names[0]
    return meta


def _result(tr: chrome_trace.Trace, rel: str, flows: int, truncated: bool, problems: list[str]) -> ParseResult:
    tables, meta, rank = build(tr, rel, flows)
    result = ParseResult(tables=tables, meta=meta, rank=rank)
    notes = list(problems) + tr.problems
    if not tr.complete or truncated:
        result.status = "partial"
    if notes:
        result.error = "; ".join(notes)
    return result


def parse_bytes(buf: bytes, rel: str) -> ParseResult:
    """Parse a Kineto trace held in memory (tests, tools)."""
    window = _Window()
    return _result(chrome_trace.read(buf, transform=window, schema=SCHEMA), rel, window.flows, False, [])


def parse(src, sn: Sniffed) -> ParseResult:
    """Stream the (decompressed) file, decode it window by window up to the event budget, build the tables."""
    window = _Window()
    with src.document() as fh:
        tr = chrome_trace.read_stream(fh, transform=window, schema=SCHEMA, max_events=chrome_trace.event_budget())
    return _result(tr, src.rel, window.flows, src.truncated, list(src.problems))


KINETO_MARKERS = (b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"', b'"cpu_op"', b'"Operator"',
                  b'"cuda_runtime"', b'"user_annotation"', b'"kernel"', b'"PyTorch Profiler', b'"python_function"',
                  b'"ac2g"', b'"Runtime"', b'"baseTimeNanoseconds"', b'"CPU functions"')


def sniff(sn: Sniffed) -> int:
    """A Chrome-trace document with PyTorch-profiler markers scores 80; any other Chrome trace 55."""
    head = sn.head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"{"):
        if b'"traceEvents"' not in head and b'"schemaVersion"' not in head:
            return 0
    elif head.startswith(b"["):
        if b'"ph"' not in head[:4096]:
            return 0
    else:
        return 0
    return 80 if any(m in head for m in KINETO_MARKERS) else 55


PARSER = Parser(kind="kineto_trace", sniff=sniff, parse=parse,
                description="PyTorch profiler / Kineto Chrome-trace JSON (.json, .json.gz)")

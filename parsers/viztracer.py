"""VizTracer JSON (0.9.x to 1.x) into `spans` and `counters`.

Function entries (`cat` FEE/fee) are named `qualname (file:line)` for Python and
`module.func` for C functions; the name is split into `func`, `src_file`, `src_line` once
per distinct name. Threads and processes keep their metadata names; `C` counter events
(log_var numbers, VizCounter, gc) and numeric `name = value` instants become counters;
instant/logging events stay spans of phase `i`. Times are VizTracer's monotonic clock in
microseconds; `viztracer_metadata.baseTimeNanoseconds` (newer versions) makes them UTC.
"""

from __future__ import annotations

import re

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from forensics import tables as T
from parsers import chrome_trace
from parsers import trace_tables as tt
from parsers.base import Parser, ParseResult, Sniffed
from parsers.prefixes import rank_from_path

SOURCE = "viztracer"
# ReportBuilder's own pattern for `qualname (file:line)`.
FUNC_NAME = re.compile(r"^(.*) \((.*):(\d+)\)$")
# add_variable(..., event="instant") writes `name = repr(value)`.
VAR_INSTANT = re.compile(r"^([A-Za-z_][\w.\[\]]*) = (-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)$")


def split_function_names(values: list) -> tuple[list, list, list]:
    """(func, file, line) per distinct event name."""
    funcs, files, lines = [], [], []
    for v in values:
        m = FUNC_NAME.match(v) if v else None
        if m:
            funcs.append(m.group(1))
            files.append(m.group(2))
            lines.append(int(m.group(3)))
        else:
            funcs.append(v)
            files.append(None)
            lines.append(None)
    return funcs, files, lines


def _var_instants(ev: pa.Table, pid, tid) -> pl.DataFrame:
    """Numeric `name = value` instants as counter rows."""
    mask = tt.in_values(ev["ph"], tt.INSTANT_PH)
    rows = ev.filter(mask).select(["idx", "name", "ts"])
    if rows.num_rows == 0:
        return pl.DataFrame()
    df = pl.DataFrame({"line": pl.from_arrow(rows["idx"]), "name": pl.from_arrow(rows["name"].cast(pa.string())),
                       "ts_us": pl.from_arrow(rows["ts"]), "pid": pl.from_arrow(pid.filter(mask)),
                       "tid": pl.from_arrow(tid.filter(mask))})
    m = df["name"].str.extract_groups(VAR_INSTANT.pattern)
    df = df.with_columns(m.struct.field("1").alias("name"), m.struct.field("2").cast(pl.Float64, strict=False).alias("value"))
    return df.filter(pl.col("value").is_not_null())


def build(tr: chrome_trace.Trace, rel: str) -> tuple[dict[str, pa.Table], dict, int | None]:
    """Spans and counters tables plus metadata from a decoded VizTracer trace."""
    ev = tr.events.unify_dictionaries()
    vm = tr.meta_value("viztracer_metadata", {})
    vm = vm if isinstance(vm, dict) else {}
    base_ns = vm.get("baseTimeNanoseconds")
    base_ns = int(base_ns) if isinstance(base_ns, int) and not isinstance(base_ns, bool) else None
    rank = rank_from_path(rel)

    pid = tt.numeric_ids(ev["pid"], ev["pid_text"])
    tid = tt.numeric_ids(ev["tid"], ev["tid_text"])
    threads = tt.thread_names(tr, pid, tid, ev)
    counters = tt.concat_frames([tt.counter_rows(ev, pid, tid), _var_instants(ev, pid, tid)])

    is_span = pc.invert(tt.in_values(ev["ph"], tt.NOT_SPAN_PH))
    sp = ev.filter(is_span)
    sp_pid, sp_tid = pid.filter(is_span), tid.filter(is_span)
    del ev
    n = sp.num_rows
    kind = tt.kinds(sp["cat"], sp["ph"])
    names = sp["name"]
    func = tt.map_dict(names, lambda vs: split_function_names(vs)[0], T.DICT_STR)
    src_file = tt.map_dict(names, lambda vs: split_function_names(vs)[1], T.DICT_STR)
    src_line = tt.map_dict(names, lambda vs: split_function_names(vs)[2], pa.int64())
    thr = pl.DataFrame({"pid": pl.from_arrow(sp_pid), "tid": pl.from_arrow(sp_tid)}).with_row_index("_r")
    thr = thr.join(threads, on=["pid", "tid"], how="left").sort("_r")
    thread = thr["thread"].to_arrow().dictionary_encode().cast(T.DICT_STR)
    step = tt.assign_steps(sp["ts"], sp["dur"], kind, tt.step_numbers(names), pa.nulls(n, pa.int64()), sp["ph"])
    spans = T.conform("spans", pa.table({
        "file": tt.const_dict(rel, n), "line": sp["idx"], "source": tt.const_dict(SOURCE, n),
        "rank": pa.nulls(n, pa.int32()) if rank is None else pa.array([rank] * n, pa.int32()),
        "pid": sp_pid, "tid": sp_tid, "thread": thread, "ph": sp["ph"], "name": names, "cat": sp["cat"],
        "kind": kind, "ts_us": sp["ts"], "dur_us": sp["dur"], "ts": tt.absolute_ts(sp["ts"], base_ns, False),
        "step": step, "func": func, "src_file": src_file, "src_line": src_line, "args": sp["args"],
    }))
    steps = tt.host_step_intervals(spans)
    cnt = tt.finish_counters(counters, rel, SOURCE, rank, base_ns, False, steps)
    procs = {}
    info = {"source": SOURCE, "version": vm.get("version"), "overflow": vm.get("overflow"), "base_time_ns": base_ns,
            "spans": n, "threads": threads.height, "complete": tr.complete}
    procs[f"trace:{rel}"] = info
    return {"spans": spans, "counters": cnt}, procs, rank


def parse_bytes(buf: bytes, rel: str, truncated: bool = False, problems: list[str] | None = None) -> ParseResult:
    """Parse a VizTracer JSON held in memory."""
    tr = chrome_trace.read(buf)
    tables, meta, rank = build(tr, rel)
    result = ParseResult(tables=tables, meta=meta, rank=rank)
    notes = list(problems or []) + tr.problems
    vm = tr.meta_value("viztracer_metadata", {})
    if isinstance(vm, dict) and vm.get("overflow"):
        # The circular buffer wrapped: the earliest events were dropped by VizTracer itself.
        notes.append("VizTracer buffer overflowed: the earliest events are missing")
    if not tr.complete or truncated:
        result.status = "partial"
    if notes:
        result.error = "; ".join(notes)
    return result


def parse(src, sn: Sniffed) -> ParseResult:
    """Read the whole (decompressed) file and build the tables."""
    return parse_bytes(src.read_all(), src.rel, src.truncated, list(src.problems))


def sniff(sn: Sniffed) -> int:
    """A Chrome-trace object whose events are VizTracer function entries (or that has viztracer_metadata)."""
    head = sn.head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"{") or b'"traceEvents"' not in head:
        return 0
    if b'"viztracer_metadata"' in head or re.search(rb'"cat"\s*:\s*"(?:FEE|fee)"', head):
        return 85
    return 0


PARSER = Parser(kind="viztracer_trace", sniff=sniff, parse=parse, description="VizTracer JSON (.json, .json.gz)")

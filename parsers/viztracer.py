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

import pyarrow as pa
import pyarrow.compute as pc
from forensics.parsers import chrome_trace
from forensics.parsers import trace_tables as tt
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.prefixes import rank_from_path

from forensics.contracts import tables as T

SOURCE = "viztracer"
# ReportBuilder's own pattern for `qualname (file:line)` is `^(.*) \((.*):(\d+)\)$`; `_func_name` matches the same
# without a regex (its backtracking is quadratic or worse on a long name full of ` (` and `:` that never closes).
# A line number beyond int64 is not a line: the name is kept whole, its line left empty.
_MAX_LINE_DIGITS = 18


def _func_name(v: str) -> tuple[str, str, int | None] | None:
    """(func, file, line) as ReportBuilder's pattern would match them, in linear time, or None."""
    body = v[:-1] if v.endswith(")\n") else v
    if not body.endswith(")") or "\n" in body:
        return None
    head, colon, digits = body[:-1].rpartition(":")
    if not colon or not digits or not all(c.isdecimal() for c in digits):
        return None
    cut = head.rfind(" (")
    if cut < 0:
        return None
    return head[:cut], head[cut + 2:], int(digits) if len(digits) <= _MAX_LINE_DIGITS else None
# add_variable(..., event="instant") writes `name = repr(value)`.
VAR_INSTANT = re.compile(r"^(?P<n>[A-Za-z_][\w.\[\]]*) = (?P<v>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)$")


def split_function_names(values: list) -> tuple[list, list, list]:
    """(func, file, line) per distinct event name."""
    funcs, files, lines = [], [], []
    for v in values:
        m = _func_name(v) if v else None
        if m:
            funcs.append(m[0])
            files.append(m[1])
            lines.append(m[2])
        else:
            funcs.append(v)
            files.append(None)
            lines.append(None)
    return funcs, files, lines


def _var_instants(ev: pa.Table, pid, tid) -> pa.Table | None:
    """Numeric `name = value` instants as counter rows."""
    mask = tt.in_values(ev["ph"], tt.INSTANT_PH)
    if not pc.any(mask).as_py():
        return None
    rows = ev.filter(mask)
    parts = pc.extract_regex(rows["name"].cast(pa.string()), VAR_INSTANT.pattern)
    name = pc.struct_field(parts, [0])
    value = pc.cast(pc.struct_field(parts, [1]), pa.float64())
    keep = pc.is_valid(value)
    if not pc.any(keep).as_py():
        return None
    return tt.counter_part(line=rows["idx"].filter(keep), pid=pid.filter(mask).filter(keep), tid=tid.filter(mask).filter(keep),
                           name=name.filter(keep), ts_us=rows["ts"].filter(keep), value=value.filter(keep))


def _window(ev: pa.Table, raws: list) -> dict:
    """One decoded window reduced to span rows, counter rows and metadata rows."""
    pid = tt.numeric_ids(ev["pid"], ev["pid_text"])
    tid = tt.numeric_ids(ev["tid"], ev["tid_text"])
    is_span = pc.invert(tt.in_values(ev["ph"], tt.NOT_SPAN_PH))
    sp = ev.filter(is_span)
    return {
        "meta": tt.metadata_rows(ev, pid, tid, raws),
        "counters": tt.concat_parts([tt.counter_rows(ev, pid, tid, raws), _var_instants(ev, pid, tid)]),
        "spans": pa.table({
            "line": sp["idx"], "pid": pid.filter(is_span), "tid": tid.filter(is_span), "tid_text": sp["tid_text"],
            "ph": sp["ph"], "name": sp["name"], "cat": sp["cat"], "kind": tt.kinds(sp["cat"], sp["ph"]),
            "ts_us": sp["ts"], "dur_us": sp["dur"], "stepno": tt.step_numbers(sp["name"]), "args": sp["args"],
        }),
    }


def _function_columns(sp: pa.Table) -> dict:
    """func / src_file / src_line, computed once per distinct name."""
    names = sp["name"]
    return {"func": tt.map_dict(names, lambda vs: split_function_names(vs)[0], T.DICT_STR),
            "src_file": tt.map_dict(names, lambda vs: split_function_names(vs)[1], T.DICT_STR),
            "src_line": tt.map_dict(names, lambda vs: split_function_names(vs)[2], pa.int64())}


def build(tr: chrome_trace.Trace, rel: str) -> tuple[dict[str, pa.Table], dict, int | None]:
    """Spans and counters tables plus metadata from a VizTracer trace read with `_window`."""
    vm = tr.meta_value("viztracer_metadata", {})
    vm = vm if isinstance(vm, dict) else {}
    base_ns = vm.get("baseTimeNanoseconds")
    base_ns = int(base_ns) if isinstance(base_ns, int) and not isinstance(base_ns, bool) else None
    rank = rank_from_path(rel)
    threads = tt.thread_names([p["meta"] for p in tr.parts])
    counters = tt.concat_parts([p["counters"] for p in tr.parts])
    parts = [p["spans"] for p in tr.parts]
    tr.parts.clear()
    spans, steps = tt.finish_spans(parts, threads, rel, SOURCE, rank, base_ns, False, extra=_function_columns)
    cnt = tt.finish_counters(counters, rel, SOURCE, rank, base_ns, False, steps)
    info = {"source": SOURCE, "version": vm.get("version"), "overflow": vm.get("overflow"), "base_time_ns": base_ns,
            "spans": spans.num_rows, "threads": threads.height, "complete": tr.complete}
    return {"spans": spans, "counters": cnt}, {f"trace:{rel}": info}, rank


def _result(tr: chrome_trace.Trace, rel: str, truncated: bool, problems: list[str]) -> ParseResult:
    tables, meta, rank = build(tr, rel)
    result = ParseResult(tables=tables, meta=meta, rank=rank)
    notes = list(problems) + tr.problems
    vm = tr.meta_value("viztracer_metadata", {})
    if isinstance(vm, dict) and vm.get("overflow"):
        # The circular buffer wrapped: the earliest events were dropped by VizTracer itself.
        notes.append("VizTracer buffer overflowed: the earliest events are missing")
    if not tr.complete or truncated:
        result.status = "partial"
    if notes:
        result.error = "; ".join(notes)
    return result


def parse_bytes(buf: bytes, rel: str) -> ParseResult:
    """Parse a VizTracer JSON held in memory (tests, tools)."""
    return _result(chrome_trace.read(buf, transform=_window), rel, False, [])


def parse(src, sn: Sniffed) -> ParseResult:
    """Stream the (decompressed) file, decode it window by window up to the event budget, build the tables."""
    with src.document() as fh:
        tr = chrome_trace.read_stream(fh, transform=_window, max_events=chrome_trace.event_budget())
    return _result(tr, src.rel, src.truncated, list(src.problems))


def sniff(sn: Sniffed) -> int:
    """A Chrome-trace object whose events are VizTracer function entries (or that has viztracer_metadata)."""
    head = sn.head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"{") or b'"traceEvents"' not in head:
        return 0
    if b'"viztracer_metadata"' in head or re.search(rb'"cat"\s*:\s*"(?:FEE|fee)"', head):
        return 85
    return 0


PARSER = Parser(kind="viztracer_trace", sniff=sniff, parse=parse, description="VizTracer JSON (.json, .json.gz)")

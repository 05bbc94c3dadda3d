"""Chrome trace-event JSON (Kineto, VizTracer, any tool) decoded straight into Arrow columns.

Speed and memory (traces reach gigabytes): the `traceEvents` array is cut into windows of
a few MB at event boundaries and each window is decoded by msgspec, in place, into typed structs
that declare only the fields we keep (`args` stays a zero-copy `msgspec.Raw`, or a reader's
`Schema` types just the args fields it uses), then turned into Arrow columns before the next
window is decoded. A file is streamed (`read_stream`): a few windows of it are held at a time, never the
whole document, so peak memory is the columns plus a few windows; past the event budget
(FORENSICS_MAX_TRACE_EVENTS) the rest is not read and the trace is incomplete. A window that does not decode is the end of
the array (trailing data), a split inside a nested value (retried further on), a tolerated
quirk of old writers (control characters, bare `N/A`: decoded leniently), or damage
(truncation, corruption): then every complete event before the damage is kept and the
result says so.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, BinaryIO, Literal, get_args

import msgspec
import numpy as np
import pyarrow as pa

DICT_STR = pa.dictionary(pa.int32(), pa.string())
WINDOW_BYTES = 4 * 1024 * 1024
# A stream is read in blocks of this size; the keys around traceEvents are held up to META_BYTES.
STREAM_BYTES = 8 * 1024 * 1024
META_BYTES = 64 * 1024 * 1024
# Events of one trace read at most (FORENSICS_MAX_TRACE_EVENTS overrides it, read per file): past it the rest of the
# trace is not read and the file is `partial`. The largest trace of our corpus has 216K events; VizTracer's default
# ring buffer holds 1M entries.
DEFAULT_MAX_TRACE_EVENTS = 1 << 20


def event_budget() -> int:
    """Events of one trace kept, at most."""
    try:
        return max(1, int(float(os.environ.get("FORENSICS_MAX_TRACE_EVENTS", DEFAULT_MAX_TRACE_EVENTS))))
    except ValueError:
        return DEFAULT_MAX_TRACE_EVENTS
_EMPTY = msgspec.Raw(b"")


# Every phase of the Chrome trace-event format: decoding to a Literal reuses one string object
# per phase instead of allocating one per event (an unknown phase falls back to the loose twin).
Phase = Literal["B", "E", "X", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "N", "O", "D", "M", "V", "v", "R",
                "c", "(", ")", ""]


class EventBase(msgspec.Struct, gc=False):
    """The fields of a trace event we keep; unknown keys are skipped by the decoder. Readers add
    `args` (a raw slice here, typed fields in a reader's own subclass)."""

    ph: Phase = ""
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None


class Event(EventBase, gc=False):
    """A trace event with its args kept as a raw JSON slice."""

    args: msgspec.Raw = _EMPTY


def loose_twin(struct: type) -> type:
    """The same struct with every field accepting any JSON type (the fallback for writers that
    break the usual types; columns are coerced later). Raw slices stay raw and nested structs
    get their own loose twin, so a reader declares its fields once."""
    fields = []
    for f in msgspec.structs.fields(struct):
        nested = [t for t in get_args(f.type) if isinstance(t, type) and issubclass(t, msgspec.Struct)]
        if f.type is msgspec.Raw:
            typ: Any = msgspec.Raw
        elif nested:
            typ = loose_twin(nested[0]) | None
        else:
            typ = Any
        default = msgspec.field(default=f.default, name=f.encode_name) if f.default is not msgspec.NODEFAULT \
            else msgspec.field(default_factory=f.default_factory, name=f.encode_name)
        fields.append((f.name, typ, default))
    return msgspec.defstruct(f"{struct.__name__}Loose", fields, gc=False, module=struct.__module__)


class Schema:
    """How a reader's events decode: a typed struct, its any-type twin for odd writers, and whether
    `args` stays a raw slice (else the struct types the args fields the reader needs, decoded in
    the same pass, and the table's `args` column is null)."""

    def __init__(self, event: type, raw_args: bool) -> None:
        self.strict = msgspec.json.Decoder(list[event])
        self.loose = msgspec.json.Decoder(list[loose_twin(event)])
        self.raw_args = raw_args

    def decode(self, window) -> list:
        """Typed decode; on a type surprise, the loose struct. Raises DecodeError on invalid JSON."""
        try:
            return self.strict.decode(window)
        except msgspec.ValidationError:
            return self.loose.decode(window)


GENERIC = Schema(Event, raw_args=True)
_META = msgspec.json.Decoder(dict[str, msgspec.Raw])

# Where one event ends and the next begins (also matches inside strings or nested values;
# a wrong split never decodes, so it is detected and skipped).
_SPLIT = re.compile(rb"\}\s*,\s*\{")
# Candidate ends of the last complete event when the data is damaged.
_EVENT_END = re.compile(rb"\}(?=\s*(?:,|\]|$))")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BYTE_POS = re.compile(r"byte (\d+)")
_DROPPED = "dropped"
_BAD_TS = "the ts"
# Old Kineto wrote bare N/A values (the TensorBoard plugin quoted them before json.loads).
_BARE_NA = re.compile(rb"(:\s*)N/A(\s*[,}\]])")

COLUMNS = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
# A reader's per-window reduction: (raw columns, the window's args slices) -> its part.
Transform = Callable[[pa.Table, list], Any]


@dataclass
class Trace:
    """The decoded events (one part per window) plus the document's other top-level keys.

    Without a transform each part is an Arrow table of the raw columns (`events` joins them);
    with one, each part is whatever the transform made of its window, so a reader can reduce
    every window to its own output before the next window is decoded (bounded memory).
    """

    parts: list
    meta: dict[str, msgspec.Raw]
    complete: bool = True  # False when events were lost to truncation or corruption
    problems: list[str] = field(default_factory=list)
    bare_array: bool = False  # legacy export: the document is the event list itself

    @property
    def events(self) -> pa.Table:
        """All windows' raw columns as one table (when read without a transform)."""
        return pa.concat_tables(self.parts) if self.parts else _columns([], 0)[0]

    def meta_value(self, key: str, default: Any = None) -> Any:
        """One top-level key decoded to Python (JSON null and undecodable values give `default`)."""
        raw = self.meta.get(key)
        if raw is None:
            return default
        try:
            value = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return default
        return default if value is None else value


def _raw_column(raws: list) -> pa.Array:
    """Raw JSON slices as one Arrow string array (one join, no per-item Python objects)."""
    n = len(raws)
    lens = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    data = b"".join(raws)
    valid = lens > 0
    mask = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [mask, pa.py_buffer(offsets), pa.py_buffer(data)])
    return arr.view(pa.large_string())


def _ids(values: list) -> tuple[pa.Array, pa.Array | None]:
    """pid/tid as int64, with the original text kept where a writer used strings ('stream 7', 'Spans')."""
    try:
        return pa.array(values, type=pa.int64()), None
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        pass
    ints = [v if type(v) is int and -(2**63) <= v < 2**63 else None for v in values]
    text = [v if type(v) is str else (None if v is None or type(v) is int else str(v)) for v in values]
    return pa.array(ints, type=pa.int64()), pa.array(text, type=pa.string())


def _text(values: list) -> pa.Array:
    try:
        return pa.array(values, type=DICT_STR)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], type=DICT_STR)


def _floats(values: list) -> pa.Array:
    try:
        return pa.array(values, type=pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        out = []
        for v in values:
            try:
                out.append(None if v is None or isinstance(v, bool) else float(v))
            except (TypeError, ValueError, OverflowError):  # a 400-digit `ts` is no time: left empty
                out.append(None)
        return pa.array(out, type=pa.float64())


def _columns(events: list, first_index: int, keep_args: bool = True) -> tuple[pa.Table, list]:
    """One window of decoded events as a table (event index = position in traceEvents), and the
    window's `args` as a list (raw slices, or the schema's typed args structs)."""
    n = len(events)
    cols: dict[str, pa.Array] = {"idx": pa.array(np.arange(first_index, first_index + n, dtype=np.int64))}
    for name in ("ph", "cat", "name"):
        cols[name] = _text(list(map(attrgetter(name), events)))
    for name in ("pid", "tid"):
        ints, text = _ids(list(map(attrgetter(name), events)))
        cols[name] = ints
        cols[f"{name}_text"] = text if text is not None else pa.nulls(n, pa.string())
    cols["ts"] = _floats(list(map(attrgetter("ts"), events)))
    cols["dur"] = _floats(list(map(attrgetter("dur"), events)))
    raws = list(map(attrgetter("args"), events))
    # Copying every event's args into a column is the single largest cost of a big trace:
    # readers that leave args in the file (`keep_args=False`) get a null column and fetch
    # the few they need with `args_of`.
    cols["args"] = _raw_column(raws) if keep_args else pa.nulls(n, pa.large_string())
    return pa.table(cols), raws


def _lenient(window: bytes, schema: Schema) -> tuple[list, int] | None:
    """Decode a window the forgiving way (control characters, bare N/A, odd types).

    Returns the events and the window offset just after the list's ']' (data may follow it),
    or None when even this fails.
    """
    try:
        return schema.loose.decode(window), len(window)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    fixed = _BARE_NA.sub(rb'\1"N/A"\2', window)
    try:
        items, end = json.JSONDecoder(strict=False).raw_decode(fixed.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(items, list):
        return None
    # Offsets changed where N/A got quotes: map the end back by counting the replacements before it.
    end_bytes = len(fixed.decode("utf-8", errors="replace")[:end].encode("utf-8"))
    end_bytes -= 2 * len(_BARE_NA.findall(fixed[:end_bytes].replace(b'"N/A"', b"N/A")))
    # Re-encoded as strict JSON, the items decode with the schema's loose struct like any window.
    clean = [item for item in items if isinstance(item, dict)]
    try:
        return schema.loose.decode(msgspec.json.encode(clean)), end_bytes
    except (msgspec.ValidationError, msgspec.DecodeError, TypeError, OverflowError):
        return None


class _Document:
    """The document's bytes: all of them (in memory), or a sliding piece of a stream (`fh`), where
    buf[0] is byte `base` of the document. Growing or sliding makes a new buffer (an old one may still be
    referenced by zero-copy `args` slices, so it is never resized in place)."""

    def __init__(self, buf: bytes | bytearray, fh: BinaryIO | None = None) -> None:
        self.buf = buf
        self.fh = fh
        self.base = 0
        self.eof = fh is None

    def load(self, end: int, keep_from: int = 0) -> None:
        """Hold at least the bytes up to `end` (fewer at the end of the stream); a stream drops those before
        `keep_from`."""
        if self.eof or (len(self.buf) >= end and keep_from < STREAM_BYTES):
            return
        keep_from = max(0, min(keep_from, len(self.buf)))
        # At least as much as is kept: one event of a GB grows the buffer by doubling, not block by block.
        want = max(STREAM_BYTES, end - len(self.buf), len(self.buf) - keep_from)
        block = self.fh.read(want) if len(self.buf) < end else b""
        if len(self.buf) < end and not block:
            self.eof = True
        new = bytearray(memoryview(self.buf)[keep_from:])
        new += block
        self.buf = new
        self.base += keep_from

    def more(self) -> bool:
        """Read one more block onto the end; False at the end of the stream."""
        n = len(self.buf)
        self.load(n + 1)
        return len(self.buf) > n

    def rest(self, start: int, limit: int) -> bytes:
        """The bytes from `start` on, at most `limit` of them (the document's tail after the event list)."""
        while len(self.buf) - start < limit and self.more():
            pass
        return bytes(self.buf[start:start + limit])


class _Reader:
    """Walks the traceEvents array window by window (keeping at most `max_events` events)."""

    def __init__(self, doc: _Document, start: int, window: int, transform: Transform | None = None,
                 keep_args: bool = True, schema: Schema = GENERIC, max_events: int | None = None) -> None:
        self.doc = doc
        self.schema = schema
        self.keep_args = keep_args and schema.raw_args
        self.transform = transform
        self.start = start  # first byte after '['
        self.window = window
        self.max_events = max_events
        self.parts: list = []
        self.count = 0
        self.complete = True
        self.problems: list[str] = []
        self.end: int | None = None  # index of the closing ']' once found
        self.dropped = 0  # events that could not be decoded on their own
        self.bad_ts = 0  # events whose ts could not be read as a number
        self.over = False  # the event budget was reached with events left

    @property
    def buf(self) -> bytes | bytearray:
        return self.doc.buf

    def _emit(self, events: list) -> None:
        if self.max_events is not None and self.count + len(events) > self.max_events:
            if not self.over:
                self.over = True
                self.complete = False
                self.problems.append(f"event budget reached ({self.max_events:,} events, FORENSICS_MAX_TRACE_EVENTS): "
                                     "the rest of the trace was not read")
            events = events[:self.max_events - self.count]
        if events:
            cols, raws = _columns(events, self.count, self.keep_args)
            if cols["ts"].null_count:
                # A time that is no number (a 400-digit `ts`, a list): the event is kept without it, and counted.
                unread = sum(1 for e in events if e.ts is not None) - (len(events) - cols["ts"].null_count)
                if unread:
                    self.bad_ts += unread
                    self.problems[:] = [p for p in self.problems if not p.startswith(_BAD_TS)]
                    self.problems.append(f"{_BAD_TS} of {self.bad_ts} event(s) is not a number in range: left empty")
            self.parts.append(self.transform(cols, raws) if self.transform else cols)
            self.count += len(events)

    def _split_at(self, pos: int) -> re.Match | None:
        """The first event boundary at or after `pos`, reading more of a stream until one is found."""
        m = _SPLIT.search(self.buf, pos)
        while m is None:
            seen = len(self.buf)
            if not self.doc.more():
                return None
            # A boundary missed so far starts at the last '}' seen (only whitespace and a comma may follow it).
            last = self.buf.rfind(b"}", pos, seen)
            m = _SPLIT.search(self.buf, last if last >= 0 else seen)
        return m

    def _decode_span(self, lo: int, hi: int, closed: bool) -> list:
        """Decode buf[lo:hi] as the items of a list (closed: the list ends at hi)."""
        buf = self.buf
        if not isinstance(buf, bytearray) or not closed or lo < 1 or hi >= len(buf):
            return self.schema.decode(b"[" + buf[lo:hi] + (b"]" if closed else b""))
        # A mutable buffer is decoded in place: the bytes just outside the window are set to '[' and ']' for
        # the decode and restored after (no 4 MB copy per window).
        before, after = buf[lo - 1], buf[hi]
        buf[lo - 1], buf[hi] = 0x5B, 0x5D
        try:
            return self.schema.decode(memoryview(buf)[lo - 1:hi + 1])
        finally:
            buf[lo - 1], buf[hi] = before, after

    def _salvage(self, lo: int, hi: int, reason: str) -> int | None:
        """Keep the complete events of buf[lo:hi] before the damage; return where decoding may resume."""
        buf = self.buf
        tail_from = max(lo, hi - 4 * self.window)
        ends = [m.start() + 1 for m in _EVENT_END.finditer(buf, tail_from, hi)]
        tries = 0
        for end in reversed(ends):
            tries += 1
            if tries > 64:
                break
            try:
                events = self.schema.decode(b"[" + buf[lo:end] + b"]")
            except msgspec.DecodeError:
                continue
            self._emit(events)
            self.complete = False
            self.problems.append(f"{reason}; kept the {self.count} complete events before byte {self.doc.base + end}")
            return end
        self.complete = False
        self.problems.append(f"{reason}; no complete event could be recovered after event {self.count}")
        return None

    def _try(self, lo: int, hi: int, closed: bool) -> list | None:
        try:
            return self._decode_span(lo, hi, closed)
        except (msgspec.DecodeError, RecursionError):
            return None

    def _by_event(self, lo: int, hi: int) -> None:
        """Decode buf[lo:hi] (whole events) event by event: one that cannot be decoded (nested deeper than the
        decoder goes) is dropped and counted, not the window around it. A split inside a nested value is
        mended by joining a few following pieces."""
        buf = self.buf
        cuts = [(m.start() + 1, m.end() - 1) for m in _SPLIT.finditer(buf, lo, hi)]
        starts = [lo] + [b for _, b in cuts]
        ends = [a for a, _ in cuts] + [hi]
        good: list = []
        i = 0
        while i < len(starts):
            for j in range(i, min(i + 8, len(starts))):
                try:
                    good.extend(self.schema.decode(b"[" + buf[starts[i]:ends[j]] + b"]"))
                except (msgspec.DecodeError, RecursionError):
                    continue
                i = j + 1
                break
            else:
                self.dropped += 1
                i += 1
        self._emit(good)
        if self.dropped:
            self.complete = False
            self.problems[:] = [p for p in self.problems if not p.startswith(_DROPPED)]
            self.problems.append(f"{_DROPPED} {self.dropped} event(s) that could not be decoded (nested too deep)")

    def _extend(self, lo: int, split: re.Match | None) -> int | None:
        """Decode from lo to one of the next few boundaries; the resume offset, or None."""
        nxt = split
        for _ in range(8):
            if nxt is None:
                return None
            nxt = self._split_at(nxt.end())
            if nxt is None:
                return None
            events = self._try(lo, nxt.start() + 1, True)
            if events is not None:
                self._emit(events)
                return nxt.end() - 1
        return None

    def _slide(self, lo: int) -> int:
        """Hold the bytes from just before `lo` to two windows past it (a stream drops those before); the new `lo`."""
        base = self.doc.base
        self.doc.load(lo + 2 * self.window, keep_from=lo - 1)
        return lo - (self.doc.base - base)

    def run(self) -> None:
        lo = self._slide(self.start)
        m = re.compile(rb"\s*\]").match(self.buf, lo)
        if m:  # an empty array
            self.end = m.end() - 1
            return
        while lo < len(self.buf) and not self.over:
            lo = self._slide(lo)
            buf, n = self.buf, len(self.buf)
            split = self._split_at(lo + self.window) if lo + self.window < n else None
            buf, n = self.buf, len(self.buf)  # a stream may have read on to find the boundary
            hi = split.start() + 1 if split else n
            try:
                events = self._decode_span(lo, hi, split is not None)
            except RecursionError:
                # One event nested past the decoder's depth: the others of the window are read one by one.
                if split is None:
                    close = buf.rfind(b"]", lo, n)
                    self._by_event(lo, close if close > lo else n)
                    self.end = close if close > lo else None
                    return
                self._by_event(lo, hi)
                lo = split.end() - 1
                continue
            except msgspec.DecodeError as exc:
                msg = str(exc)
                pos = _BYTE_POS.search(msg)
                if "trailing characters" in msg and pos:
                    # The array closed inside this window: decode exactly up to its ']'.
                    close = buf.rindex(b"]", lo - 1, lo + int(pos.group(1)))
                    events = self._try(lo, close, True)
                    if events is not None:
                        self._emit(events)
                        self.end = close
                        return
                # A split inside a nested value or a string never decodes: extend to later boundaries.
                resumed = self._extend(lo, split)
                if resumed is not None:
                    lo = resumed
                    continue
                buf = self.buf
                loose = _lenient(b"[" + buf[lo:hi] + (b"]" if split else b""), self.schema)
                if loose is not None:
                    self._emit(loose[0])
                    self.problems.append("non-standard JSON (control characters, bare N/A) read leniently")
                    if split is None:
                        self.end = min(lo - 2 + loose[1], n - 1)
                        return
                    lo = split.end() - 1
                    continue
                where = min(lo - 1 + int(pos.group(1)), n) if pos else hi
                if split is None and ("truncated" in msg or where >= n - 1):
                    self._salvage(lo, n, "truncated: the trace ends inside an event")
                    return
                base = self.doc.base
                resume = self._salvage(lo, max(where, lo), f"malformed JSON near byte {base + where} ({msg})")
                after = self._split_at(max(where, resume or lo))
                if after is None:
                    return
                self.problems.append(f"skipped bytes {base + (resume or lo)}..{base + after.start()}")
                lo = after.end() - 1
                continue
            self._emit(events)
            if split is None:
                # The final window decoded on its own, so the data closed the list itself.
                self.end = buf.rindex(b"]", lo - 1)
                return
            lo = split.end() - 1


def _decode_meta(text: bytes) -> dict[str, msgspec.Raw] | None:
    try:
        meta = _META.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    meta.pop("traceEvents", None)
    return meta


def _meta_around(head: bytes, tail: bytes | None) -> tuple[dict[str, msgspec.Raw], list[str]]:
    """The document's keys other than traceEvents (`head`: the bytes before the array's '[', `tail`: those after
    its ']', None when the array did not close)."""
    if tail is not None:
        meta = _decode_meta(head + b"[]" + tail)
        if meta is not None:
            return meta, []
    # Truncated after (or inside) the array: keys written before it are still known.
    meta = _decode_meta(head + b"[]}")
    if meta is not None:
        return meta, ([] if tail is None else ["keys after traceEvents could not be read"])
    return {}, ["the top-level object could not be read"]


def read(buf: bytes | bytearray, window: int = WINDOW_BYTES, transform: Transform | None = None,
         keep_args: bool = True, schema: Schema = GENERIC, max_events: int | None = None) -> Trace:
    """Decode a Chrome-trace document (object with traceEvents, or a bare event array) held in memory.

    `transform(table, raws)` is applied to each window as soon as it is decoded (`raws`: the
    window's args slices). The returned metadata holds copies, so `buf` can be freed as soon as
    this returns. A bytearray is decoded without copying windows; it is left as it was given.
    Without `keep_args` the tables' `args` column is null (the transform still gets `raws`).
    A reader's own `schema` may type the args fields it needs (decoded in the same pass).
    Past `max_events` events the rest is not read and the trace is incomplete.
    """
    return _read(_Document(buf), window, transform, keep_args, schema, max_events)


def read_stream(fh: BinaryIO, window: int = WINDOW_BYTES, transform: Transform | None = None,
                keep_args: bool = True, schema: Schema = GENERIC, max_events: int | None = None) -> Trace:
    """`read` on a stream (a file being decompressed), in bounded memory: a few windows of the document are
    held at a time, never the whole of it. The result is the same as `read` of the whole content."""
    return _read(_Document(bytearray(), fh), window, transform, keep_args, schema, max_events)


def _read(doc: _Document, window: int, transform: Transform | None, keep_args: bool, schema: Schema,
          max_events: int | None) -> Trace:
    doc.load(64 * 1024)
    i = 0
    if doc.buf.startswith(b"\xef\xbb\xbf"):
        i = 3
    while True:
        buf, n = doc.buf, len(doc.buf)
        while i < n and buf[i] in b" \t\r\n":
            i += 1
        if i < n or not doc.more():
            break
    if i >= n:
        raise ValueError("empty document")
    if buf[i] == ord("["):
        reader = _Reader(doc, i + 1, window, transform, keep_args, schema, max_events)
        reader.run()
        trace = Trace(reader.parts, {}, reader.complete, reader.problems, bare_array=True)
        if reader.end is not None and doc.rest(reader.end + 1, META_BYTES).strip():
            trace.problems.append("data after the event list ignored")
        return trace
    if buf[i] != ord("{"):
        raise ValueError("not a JSON object or array")
    # The keys before the array are held until it is read (a real header is a few KB; META_BYTES at most).
    m = _EVENTS_KEY.search(doc.buf, i)
    while m is None and len(doc.buf) < META_BYTES and doc.more():
        m = _EVENTS_KEY.search(doc.buf, i)
    if m is None:
        meta = _decode_meta(doc.buf[i:])
        if meta is None:
            raise ValueError("no traceEvents array found")
        return Trace([], _own(meta), True, ["no traceEvents key: an empty trace"])
    head = bytes(doc.buf[:m.end() - 1])
    reader = _Reader(doc, m.end(), window, transform, keep_args, schema, max_events)
    reader.run()
    meta, problems = _meta_around(head, None if reader.end is None else doc.rest(reader.end + 1, META_BYTES))
    if reader.end is not None and problems and reader.complete:
        reader.complete = False
    return Trace(reader.parts, _own(meta), reader.complete, reader.problems + problems)


def _own(meta: dict[str, msgspec.Raw]) -> dict[str, msgspec.Raw]:
    """Copies of the metadata values, so they no longer pin the whole document in memory."""
    return {k: msgspec.Raw(bytes(v)) for k, v in meta.items()}


def args_of(buf: bytes | bytearray, lines: Iterable[int], window: int = WINDOW_BYTES) -> dict[int, bytes]:
    """The raw JSON args of the events at the given `traceEvents` positions (a span's `line`).

    For readers that leave args in the file: a playbook that needs an op's `Input Dims` or a
    kernel's grid asks for those rows only, and pays one more decode of the trace."""
    wanted = np.unique(np.fromiter(lines, dtype=np.int64))
    found: dict[int, bytes] = {}
    first = [0]

    def pick(cols: pa.Table, raws: list) -> None:
        lo = first[0]
        first[0] += len(raws)
        for i in wanted[np.searchsorted(wanted, lo):np.searchsorted(wanted, lo + len(raws))]:
            if len(raws[i - lo]):
                found[int(i)] = bytes(raws[i - lo])

    read(buf, window, pick, keep_args=False)
    return found

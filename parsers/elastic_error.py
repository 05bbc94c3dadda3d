"""torchelastic error files (`TORCHELASTIC_ERROR_FILE`, written by `@record`) into `events`.

Shape (formats.md §2.5, torch/distributed/elastic/multiprocessing/errors/error_handler.py):
`{"message": {"message": "RuntimeError: ...", "extraInfo": {"py_callstack": "Traceback ...",
"timestamp": "1716280983"}, "errorCode": 1}}` — `timestamp` is a string of epoch seconds and
`errorCode` is added by the launcher when it copies a child's file. Older or hand-written files
may hold `message` as a plain string. The message and call stack also run through the signature
table, so an OOM or NCCL error recorded only in the error file still becomes its own event.
"""

from __future__ import annotations

import datetime as dt
import re

import orjson
import polars as pl
from forensics.parsers import signatures
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.prefixes import rank_from_path

from forensics.contracts.tables import conform

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.+))?')
MAX_TEXT_CHARS = 32_000


def sniff(sn: Sniffed) -> int:
    """A JSON object whose `message` carries torchelastic's `extraInfo`/`py_callstack` scores 90."""
    head = sn.head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"{") or b'"message"' not in head[:4096]:
        return 0
    if b'"py_callstack"' in head or b'"extraInfo"' in head:
        return 90
    # The parent's copy always has errorCode; a bare {"message": "..."} named error.json is ours too.
    if sn.name.endswith("error.json") and re.match(rb'\{\s*"message"\s*:', head):
        return 60
    return 0


def _epoch(value) -> dt.datetime | None:
    try:
        return dt.datetime.fromtimestamp(int(str(value).strip()), dt.timezone.utc)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _callstack_facts(stack: str) -> dict:
    """The final exception line and the innermost frame of a formatted Python traceback."""
    lines = [ln for ln in stack.splitlines() if ln.strip()]
    facts: dict = {}
    frames = [m for m in (_FRAME.match(ln) for ln in lines) if m]
    if frames:
        facts.update(file=frames[-1].group("file"), line=frames[-1].group("line"), function=frames[-1].group("function"))
    tail = [ln for ln in lines if not ln.startswith(" ")]
    if tail and not tail[-1].startswith("Traceback"):
        facts["exception"] = tail[-1].strip()
    return facts


def parse(src, sn: Sniffed) -> ParseResult:
    """Parse one error file into a `torchrun_error_file` event (plus any signature matches in it)."""
    result = ParseResult(rank=rank_from_path(src.rel))
    try:
        doc = orjson.loads(src.read_all())
    except orjson.JSONDecodeError as exc:
        result.status, result.error = "failed", f"not valid JSON: {exc}"
        return result
    body = doc.get("message") if isinstance(doc, dict) else None
    if isinstance(body, dict):
        message = str(body.get("message", ""))
        extra = body.get("extraInfo") or {}
        stack = str(extra.get("py_callstack") or "")
        stamp = extra.get("timestamp")
        code = body.get("errorCode")
    elif isinstance(body, str):
        message, stack, stamp, code = body, "", doc.get("timestamp"), doc.get("errorCode")
    else:
        result.status, result.error = "unrecognized", "JSON without a torchelastic `message` object"
        return result
    facts = _callstack_facts(stack)
    fields = {**facts, "timestamp": str(stamp) if stamp is not None else None, "error_code": code}
    fields = {k: str(v) for k, v in fields.items() if v is not None}
    ts = _epoch(stamp)
    text = (message + "\n" + stack).strip()
    event = {
        "line": 1,
        "end_line": 1,
        "ts": ts,
        "rank": result.rank,
        "step": None,
        "code": "torchrun_error_file",
        "severity": "error",
        "message": message.splitlines()[0] if message else facts.get("exception", ""),
        "text": text[:MAX_TEXT_CHARS],
        "fields": orjson.dumps(fields).decode(),
    }
    events = pl.DataFrame([event], schema=signatures.SCHEMA)
    # The recorded text as pseudo log lines (all at line 1 of the JSON) through the signature table.
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines:
        cand = pl.DataFrame(
            {"line": [1] * len(lines), "seg": list(range(len(lines))), "text": lines, "msg": lines},
            schema={"line": pl.Int64, "seg": pl.Int32, "text": pl.String, "msg": pl.String},
        ).with_columns(pl.lit(result.rank, pl.Int32).alias("rank"), pl.lit(ts, pl.Datetime("us", "UTC")).alias("ts"))
        # The message and the call stack's last line repeat one text: keep one event per code and text.
        matched = signatures.extract(cand).unique(subset=["code", "message"], keep="first", maintain_order=True)
        if matched.height:
            events = pl.concat([events, matched.with_columns(pl.col("ts").fill_null(ts))])
    result.tables["events"] = conform("events", events.with_columns(pl.lit(src.rel).alias("file")).to_arrow())
    return result


PARSER = Parser(kind="torchelastic_error", event_source=True, sniff=sniff, parse=parse,
                description="torchelastic error.json (TORCHELASTIC_ERROR_FILE)")

"""Python tracebacks, chained ones included, assembled per stream prefix."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
from forensics.parsers.blocks.common import (
    EXC_TYPE,
    FRAME,
    MAX_MESSAGE_LINES,
    TB,
    TB_START,
    WINDOW,
    View,
    block_text,
    event,
    opener_rows,
    prefix_pattern,
    rank_of,
    run_end,
    view,
)
from forensics.parsers.blocks.notebook import IPY_START, QUOTE
from forensics.parsers.prefixes import ANY_LOG_PREFIX

NEEDLE = TB
# A line that begins a new log record (ends an exception message that has no blank line after it).
_RECORD = rf"{ANY_LOG_PREFIX}|^\[(?:rank|default)\d+\]:|^wandb: |\d+%\|"
# threading's excepthook prints this line right above a background thread's traceback (`Exception in thread
# Thread-5:`, `Exception in thread IntMsgThr:`, `Thread-3 (run):` on 3.10+); the main thread goes on after it.
_THREAD_HEADER = re.compile(r"(?:^|\s)Exception in thread (?P<thread>\S[^:]{0,80}?)(?: \(most likely raised during interpreter shutdown\))?:")
_CHAIN = {
    "During handling of the above exception, another exception occurred:": "context",
    "The above exception was the direct cause of the following exception:": "cause",
}


def _tb_classes(body: pl.Series) -> dict[str, np.ndarray]:
    """Per-line classes of a traceback view (vectorised)."""
    stripped = body.str.strip_chars()

    def arr(s: pl.Series) -> np.ndarray:
        return s.fill_null(False).to_numpy()

    frame = body.str.contains(r'^\s*(?:> )?File "|^\s+\[Previous line repeated').fill_null(False)
    # A paste may elide frames with a line of dots (`......`, `...`, `…`): it stays inside the frames run.
    code = (body.str.starts_with("    ") | body.str.contains(r"^\s+[~^]+\s*$|^\s*(?:\.{3,}|…+)\s*$")).fill_null(False)
    blank = (stripped.str.len_bytes() == 0).fill_null(False)
    # loguru / better_exceptions tracebacks put blank lines after the opener, between the frames
    # (each followed by `│ └ value` annotation lines) and before the exception line: inside a
    # frames run, a blank line followed by a frame, or by an exception line, belongs to the run.
    before_frame = blank & frame.shift(-1, fill_value=False)
    before_exc = blank & (frame | code).shift(1, fill_value=False) & body.shift(-1).str.contains(EXC_TYPE.pattern).fill_null(False)
    return {
        "T": arr(body.str.starts_with(TB)),
        "F": arr(frame),
        "C": arr(code | before_frame | before_exc),
        "B": arr(blank),
        "CH": arr(stripped.is_in(list(_CHAIN))),
        "R": arr(body.str.contains(_RECORD)),
    }


def _one_traceback(v: View, cls: dict[str, np.ndarray], p: int) -> tuple[int, list[dict], int]:
    """Walk one (possibly chained) traceback from view position p; returns end position, parts, last T."""
    n = len(v.rows)
    limit = min(n, p + WINDOW)
    body = v.body
    frames_or_code = cls["F"] | cls["C"]
    stop = cls["B"] | cls["T"] | cls["R"] | cls["CH"]
    parts: list[dict] = []
    cur, end, chain_kind = p, p, None
    while True:
        j = run_end(frames_or_code, cur + 1, limit)
        frame_pos = (np.flatnonzero(cls["F"][cur + 1 : j]) + cur + 1).tolist()
        exc_pos, k = None, j
        if j < limit and not stop[j]:
            exc_pos = j
            k = run_end(~stop, j + 1, min(limit, j + 1 + MAX_MESSAGE_LINES))
        end = max(cur, k - 1)
        parts.append({"frames": frame_pos, "exc": exc_pos, "end": end, "kind": chain_kind})
        # A chained exception: blank line(s), the chain sentence, blank line(s), a new traceback.
        q = end + 1
        while q < limit and q <= end + 2 and cls["B"][q]:
            q += 1
        if not (q < limit and cls["CH"][q]):
            break
        chain_kind = _CHAIN[body[q].strip()]
        q += 1
        while q < limit and q <= end + 5 and cls["B"][q]:
            q += 1
        if not (q < limit and cls["T"][q]):
            break
        cur = q
    return end, parts, cur


def read(frame: pl.DataFrame, cand: pl.DataFrame, found: list[dict]) -> list[dict]:
    """Python tracebacks (`Traceback (most recent call last):` openers), per stream prefix."""
    text = frame.get_column("text")
    starts: dict[str, list[tuple[int, dict]]] = {}
    for row, m in opener_rows(frame, cand, TB, TB_START):
        prefix = row["text"][: m.start()]
        if prefix.rstrip().endswith("traceback :") or IPY_START.match(QUOTE.sub("", row["text"])):
            continue  # a torchrun report's child call stack (part of that block) / an IPython traceback
        pos = row["_pos"]
        nxt = str(text[pos + 1]) if pos + 1 < len(text) else ""
        pattern = prefix_pattern(prefix)
        if pattern is not None and not re.match(pattern, nxt):
            prefix = ""  # a time-stamped record prefix on the opener only (logger.exception)
        elif prefix and pattern is None and not nxt.startswith(prefix):
            cut = nxt.find(prefix.strip())
            if 0 < cut <= 3 and prefix.strip():
                # A mangled opener prefix (`rank1]: ` pasted without its `[`): follow the frames' prefix.
                prefix = nxt[: cut + len(prefix.strip())] + (" " if prefix.endswith(" ") else "")
            elif rank_of(prefix) is None:
                # A record prefix on the opener only (logger.exception): the frames that follow are bare.
                prefix = ""
        starts.setdefault(prefix, []).append((pos, row))
    events: list[dict] = []
    for prefix, items in starts.items():
        v = view(text, [pos for pos, _ in items], prefix, force={pos: TB + ":" for pos, _ in items})
        cls = _tb_classes(v.body)
        consumed_until = -1
        for pos, row in items:
            p = v.find(pos)
            if p >= len(v.rows) or v.rows[p] != pos or p <= consumed_until:
                continue  # inside a block already reported (a chained traceback)
            end, parts, _ = _one_traceback(v, cls, p)
            consumed_until = end
            events.append(_traceback_event(frame, v, parts, p, end, prefix, row))
    return events


def _traceback_event(frame: pl.DataFrame, v: View, parts: list[dict], p: int, end: int, prefix: str, row: dict) -> dict:
    body = v.body
    last = parts[-1]
    exc_line = body[last["exc"]].strip() if last["exc"] is not None else None
    fields: dict = {}
    if last["frames"]:
        fm = FRAME.match(body[last["frames"][-1]])
        if fm:
            fields.update(file=fm.group("file"), line=fm.group("line"), function=fm.group("function"))
    if exc_line:
        # A paste may bold the exception line in Markdown (`**RuntimeError: ...`).
        tm = EXC_TYPE.match(exc_line.lstrip("*"))
        fields["exc_type"] = tm.group("type") if tm else None
        # DataLoader workers re-raise with the worker's own traceback inside the message.
        msg_lines = [body[k] for k in range(last["exc"] + 1, last["end"] + 1)]
        if any(line.lstrip().startswith("Original " + TB) for line in msg_lines):
            inner = [ln.strip() for ln in msg_lines if ln.strip() and not ln.startswith(" ")]
            fields["inner_exception"] = inner[-1] if inner else None
    if len(parts) > 1:
        first = parts[0]
        fields["chain"] = ",".join(pt["kind"] for pt in parts[1:])
        fields["first_exception"] = body[first["exc"]].strip() if first["exc"] is not None else None
    fields["frames"] = len(last["frames"])
    above = int(row["_pos"]) - 1
    header = _THREAD_HEADER.search(str(frame.get_column("text")[above])) if above >= 0 else None
    if header:
        fields["thread"] = header.group("thread")
    if exc_line:
        message = exc_line
    else:
        # Cut short (the log or the paste ends inside it): the last exception seen in its chain, if any.
        earlier = [body[pt["exc"]].strip() for pt in parts[:-1] if pt["exc"] is not None]
        message = earlier[-1] if earlier else f"{TB}: (no exception line)"
        fields["truncated"] = "true"
    return event(
        line=int(row["line"]),
        end_line=int(frame.get_column("line")[int(v.rows[end])]),
        code="python_traceback",
        severity="error",
        message=message,
        text=block_text(frame.get_column("text"), v.rows[p : end + 1]),
        fields=fields,
        rank=row["rank"] if row["rank"] is not None else rank_of(prefix),
        ts=row["ts"],
    )

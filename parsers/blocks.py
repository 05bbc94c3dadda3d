"""Multi-line blocks as single events: Python tracebacks, C++ frame dumps, torchrun reports, nvidia-smi tables.

Block openers are found among the prefilter's candidate lines (vectorised). The lines that
continue a block carry the same prefix as its opener (`[rank3]: `, `[default0]:`, `stderr: `,
a pdsh host name, or nothing), so blocks of ranks that interleave in one stream are assembled
per prefix. Each opener's block is classified with vectorised string tests over a bounded
window; Python iterates over the (sparse) openers only, never over all lines.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import numpy as np
import orjson
import polars as pl
from forensics.parsers.prefixes import ANY_LOG_PREFIX, RAY_REPEATED, split_prefixes
from forensics.parsers.signatures import SCHEMA

NEEDLES = ["Traceback (most recent call last)", "Exception raised from", "Root Cause", "NVIDIA-SMI "]

# How far (in lines) a block may reach from its opener; a longer block is cut there.
WINDOW = 3000
# Lines of exception message kept after the exception line (CUDA, NCCL and launcher messages span lines).
MAX_MESSAGE_LINES = 60
MAX_TEXT_CHARS = 32_000

_TB = "Traceback (most recent call last)"
# The opener; a progress-bar redraw may be glued after it (`...call last):     | 4/84 [00:52<17:32, ...]`).
# PaddlePaddle's `C++ Traceback (most recent call last):` heads a C++ frame list, not a Python traceback.
_TB_START = re.compile(r"(?<!Original )(?<!C\+\+ )Traceback \(most recent call last\)")
_CPP_START = re.compile(r"Exception raised from (?P<function>\S+) at (?P<file>.+?):(?P<line>\d+) \(most recent call first\):")
_REPORT_START = re.compile(r"^(?P<prefix>.*?)Root Cause(?: \(first observed failure\))?:\s*$")
_SMI_START = re.compile(r"^(?P<prefix>.*?)\|\s*NVIDIA-SMI (?P<smi>\d[\w.]*)")
_RANK_IN_PREFIX = re.compile(r"\[(?:rank|default|Rank |RANK:|RANK )(\d+)\]|\brank=(\d+)\b")
# `> ` marks the frame that raised in loguru / better_exceptions tracebacks.
_FRAME = re.compile(r'^\s*(?:> )?File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.+))?')
_EXC_TYPE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Failure|Timeout)|[A-Za-z_][\w.]*\.[A-Z]\w*)(?::|$)")
_TIME_TOKEN = re.compile(r"\d{4}-\d{2}-\d{2}[T _]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?|\d{2}:\d{2}:\d{2}(?:[.,]\d+)?")
# A line that begins a new log record (ends an exception message that has no blank line after it).
_RECORD = rf"{ANY_LOG_PREFIX}|^\[(?:rank|default)\d+\]:|^wandb: |\d+%\|"
_CHAIN = {
    "During handling of the above exception, another exception occurred:": "context",
    "The above exception was the direct cause of the following exception:": "cause",
}


@dataclass
class _View:
    """The lines of one prefix inside the windows of its openers: frame rows and prefix-stripped bodies."""

    rows: np.ndarray  # positions in the frame
    body: pl.Series

    def find(self, frame_pos: int) -> int:
        return int(np.searchsorted(self.rows, frame_pos))


def _rx_escape(text: str) -> str:
    return "".join("\\" + c if c in r"\.+*?()|[]{}^$#&-~" else c for c in text)


def prefix_pattern(prefix: str) -> str | None:
    """A regex for a prefix that carries a time stamp (which changes from line to line), else None."""
    if not _TIME_TOKEN.search(prefix):
        return None
    out, last = [], 0
    for m in _TIME_TOKEN.finditer(prefix):
        out.append(_rx_escape(prefix[last : m.start()]))
        out.append(re.sub(r"\d", r"\\d", _rx_escape(m.group())))
        last = m.end()
    out.append(_rx_escape(prefix[last:]))
    return "^" + "".join(out)


def _view(text: pl.Series, starts: list[int], prefix: str, force: dict[int, str] | None = None) -> _View:
    """Lines of `prefix` within WINDOW lines after any of `starts` (frame positions).

    `force` maps frame positions to bodies that belong to the view whatever their prefix (openers).
    """
    n = len(text)
    delta = np.zeros(n + 1, dtype=np.int64)
    s = np.asarray(starts, dtype=np.int64)
    np.add.at(delta, s, 1)
    np.add.at(delta, np.minimum(s + WINDOW, n), -1)
    rows = np.flatnonzero(np.cumsum(delta)[:n] > 0)
    sub = text.gather(rows)
    pattern = prefix_pattern(prefix)
    if pattern is not None:
        keep = sub.str.contains(pattern)
        body = sub.str.replace(pattern, "")
    elif prefix:
        keep = sub.str.starts_with(prefix)
        body = sub.str.slice(len(prefix))
    else:
        # Unprefixed lines: leave out lines that belong to a rank-prefixed stream.
        keep = ~sub.str.contains(r"^\[(?:rank|default)\d+\]:")
        body = sub
    keep = keep.fill_null(False).to_numpy()
    if body.str.contains("across cluster]", literal=True).any():
        # Ray's log deduplication appends ` [repeated Nx across cluster]` to a line (frames included).
        body = body.str.replace(RAY_REPEATED, "")
    if force:
        at = np.searchsorted(rows, np.asarray(sorted(force), dtype=np.int64))
        keep[at] = True
        body = body.scatter(at.tolist(), [force[k] for k in sorted(force)])
    return _View(rows=rows[keep], body=body.filter(keep))


def _run_end(mask: np.ndarray, start: int, limit: int) -> int:
    """First position >= start where `mask` is False (at most `limit`)."""
    seg = mask[start:limit]
    if seg.size == 0 or seg.all():
        return min(limit, len(mask))
    return start + int(np.argmin(seg))


def _rank_of(prefix: str) -> int | None:
    m = _RANK_IN_PREFIX.search(prefix)
    return int(m.group(1) or m.group(2)) if m else None


def _text(frame_text: pl.Series, rows: np.ndarray) -> str:
    text = "\n".join(frame_text.gather(rows).to_list())
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 20] + "\n[... block cut ...]"


def _event(line: int, end_line: int, code: str, severity: str, message: str, text: str, fields: dict,
           rank: int | None = None, ts: dt.datetime | None = None) -> dict:
    clean = {k: str(v) for k, v in fields.items() if v is not None and v != ""}
    return {
        "line": line,
        "end_line": end_line,
        "ts": ts,
        "rank": rank,
        "step": None,
        "code": code,
        "severity": severity,
        "message": message,
        "text": text,
        "fields": orjson.dumps(clean).decode(),
    }


# ---------------------------------------------------------------------------------------------
# Python tracebacks
# ---------------------------------------------------------------------------------------------


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
    before_exc = blank & (frame | code).shift(1, fill_value=False) & body.shift(-1).str.contains(_EXC_TYPE.pattern).fill_null(False)
    return {
        "T": arr(body.str.starts_with(_TB)),
        "F": arr(frame),
        "C": arr(code | before_frame | before_exc),
        "B": arr(blank),
        "CH": arr(stripped.is_in(list(_CHAIN))),
        "R": arr(body.str.contains(_RECORD)),
    }


def _one_traceback(v: _View, cls: dict[str, np.ndarray], p: int) -> tuple[int, list[dict], int]:
    """Walk one (possibly chained) traceback from view position p; returns end position, parts, last T."""
    n = len(v.rows)
    limit = min(n, p + WINDOW)
    body = v.body
    frames_or_code = cls["F"] | cls["C"]
    stop = cls["B"] | cls["T"] | cls["R"] | cls["CH"]
    parts: list[dict] = []
    cur, end, chain_kind = p, p, None
    while True:
        j = _run_end(frames_or_code, cur + 1, limit)
        frame_pos = (np.flatnonzero(cls["F"][cur + 1 : j]) + cur + 1).tolist()
        exc_pos, k = None, j
        if j < limit and not stop[j]:
            exc_pos = j
            k = _run_end(~stop, j + 1, min(limit, j + 1 + MAX_MESSAGE_LINES))
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


def _openers(frame: pl.DataFrame, cand: pl.DataFrame, needle: str) -> pl.DataFrame:
    """Candidate lines containing `needle`, each with `_pos`, its row in the frame.

    Rows are not lines: tqdm's `\r` redraws split one line into several rows, so the position
    is looked up, never computed from the line number.
    """
    opener = cand.filter(pl.col("text").str.contains(needle, literal=True))
    rows = frame.select("line", "seg").with_row_index("_pos").with_columns(pl.col("_pos").cast(pl.Int64))
    return opener.join(rows, on=["line", "seg"], how="inner", maintain_order="left")



def _tracebacks(frame: pl.DataFrame, cand: pl.DataFrame) -> list[dict]:
    opener = _openers(frame, cand, _TB)
    if opener.height == 0:
        return []
    text = frame.get_column("text")
    starts: dict[str, list[tuple[int, dict]]] = {}
    for row in opener.iter_rows(named=True):
        m = _TB_START.search(row["text"])
        if not m:
            continue
        prefix = row["text"][: m.start()]
        if prefix.rstrip().endswith("traceback :") or _IPY_START.match(_QUOTE.sub("", row["text"])):
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
            elif _rank_of(prefix) is None:
                # A record prefix on the opener only (logger.exception): the frames that follow are bare.
                prefix = ""
        starts.setdefault(prefix, []).append((pos, row))
    events: list[dict] = []
    for prefix, items in starts.items():
        v = _view(text, [pos for pos, _ in items], prefix, force={pos: _TB + ":" for pos, _ in items})
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


def _traceback_event(frame: pl.DataFrame, v: _View, parts: list[dict], p: int, end: int, prefix: str, row: dict) -> dict:
    body = v.body
    last = parts[-1]
    exc_line = body[last["exc"]].strip() if last["exc"] is not None else None
    fields: dict = {}
    if last["frames"]:
        fm = _FRAME.match(body[last["frames"][-1]])
        if fm:
            fields.update(file=fm.group("file"), line=fm.group("line"), function=fm.group("function"))
    if exc_line:
        # A paste may bold the exception line in Markdown (`**RuntimeError: ...`).
        tm = _EXC_TYPE.match(exc_line.lstrip("*"))
        fields["exc_type"] = tm.group("type") if tm else None
        # DataLoader workers re-raise with the worker's own traceback inside the message.
        msg_lines = [body[k] for k in range(last["exc"] + 1, last["end"] + 1)]
        if any(line.lstrip().startswith("Original " + _TB) for line in msg_lines):
            inner = [ln.strip() for ln in msg_lines if ln.strip() and not ln.startswith(" ")]
            fields["inner_exception"] = inner[-1] if inner else None
    if len(parts) > 1:
        first = parts[0]
        fields["chain"] = ",".join(pt["kind"] for pt in parts[1:])
        fields["first_exception"] = body[first["exc"]].strip() if first["exc"] is not None else None
    fields["frames"] = len(last["frames"])
    if exc_line:
        message = exc_line
    else:
        # Cut short (the log or the paste ends inside it): the last exception seen in its chain, if any.
        earlier = [body[pt["exc"]].strip() for pt in parts[:-1] if pt["exc"] is not None]
        message = earlier[-1] if earlier else f"{_TB}: (no exception line)"
        fields["truncated"] = "true"
    return _event(
        line=int(row["line"]),
        end_line=int(frame.get_column("line")[int(v.rows[end])]),
        code="python_traceback",
        severity="error",
        message=message,
        text=_text(frame.get_column("text"), v.rows[p : end + 1]),
        fields=fields,
        rank=row["rank"] if row["rank"] is not None else _rank_of(prefix),
        ts=row["ts"],
    )


# ---------------------------------------------------------------------------------------------
# Traceback tails: a paste that begins inside a traceback (frames, then the exception, no opener)
# ---------------------------------------------------------------------------------------------

# An exception line as Python prints it last in a traceback (a dotted class name ending in Error/Exception).
_TAIL_EXC = r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt)(?::|$)"
_TAIL_FRAME = re.compile(r'^\s+File "[^"]+", line \d+')
_TAIL_CODE = re.compile(r"^\s{4}|^\s+[~^]+\s*$")


def _tail_tracebacks(frame: pl.DataFrame, cand: pl.DataFrame, spans: list[tuple[int, int]]) -> list[dict]:
    """Tracebacks whose opener the log lacks (a paste that starts at a frame): frames, then the exception."""
    exc = cand.filter(pl.col("msg").str.contains(_TAIL_EXC))
    if exc.height == 0:
        return []
    exc = _openers(frame, exc, "")
    text = frame.get_column("text")
    lines = frame.get_column("line")
    events = []
    for row in exc.iter_rows(named=True):
        ln = int(row["line"])
        if any(a <= ln <= b for a, b in spans):
            continue  # the exception line of a block already reported
        pos, msg = row["_pos"], row["msg"]
        full = row["text"]
        prefix = full[: len(full) - len(msg)] if full.endswith(msg) else ""
        # Walk back over the frame and source lines of the same stream.
        q, frames = pos - 1, []
        while q >= 0 and pos - q <= WINDOW:
            t = str(text[q])
            if prefix and not t.startswith(prefix):
                break
            body = t[len(prefix) :]
            if _TAIL_FRAME.match(body):
                frames.append(body)
            elif not _TAIL_CODE.match(body):
                break
            q -= 1
        if not frames or _TB_START.search(str(text[q]) if q >= 0 else ""):
            continue  # not after frames, or the opener is there (a block the traceback pass reads)
        fields: dict = {"frames": len(frames), "head_truncated": "true"}
        fm = _FRAME.match(frames[0])  # the walk went backwards: the first found is the last frame
        if fm:
            fields.update(file=fm.group("file"), line=fm.group("line"), function=fm.group("function"))
        tm = _EXC_TYPE.match(msg.strip())
        fields["exc_type"] = tm.group("type") if tm else None
        events.append(
            _event(
                line=int(lines[q + 1]),
                end_line=ln,
                code="python_traceback",
                severity="error",
                message=msg.strip(),
                text=_text(text, np.arange(q + 1, pos + 1)),
                fields=fields,
                rank=row["rank"] if row["rank"] is not None else _rank_of(prefix),
                ts=row["ts"],
            )
        )
    return events


# ---------------------------------------------------------------------------------------------
# IPython / Jupyter and rich tracebacks (pasted from notebooks, Lightning/typer consoles)
# ---------------------------------------------------------------------------------------------

_IPY_START = re.compile(r"^(?P<prefix>\s*)(?P<exc>[A-Za-z_][\w.]*)\s{2,}Traceback \(most recent call last\)\s*$")
_IPY_FRAME = re.compile(
    r"^(?:File (?P<file>\S+?):(?P<line>\d+), in (?P<function>[^(\s]+)"
    r"|Cell In\[\d+\], line (?P<cell_line>\d+)"
    r"|(?P<file2>\S+\.py|<ipython-input-[^>]+>) in (?P<function2>[^(\s]+))"
)
_RICH_START = re.compile(r"^(?P<prefix>.*?)╭─+ Traceback \(most recent call last\) ─+╮")
_RICH_FRAME = re.compile(r"│ (?P<file>\S+\.py):(?P<line>\d+)(?: in (?P<function>[\w<>.]+))?")


_QUOTE = re.compile(r"^(?:> ?)+")


def _notebook_tracebacks(frame: pl.DataFrame, cand: pl.DataFrame) -> list[dict]:
    opener = _openers(frame, cand, _TB)
    if opener.height == 0:
        return []
    text = frame.get_column("text")
    lines = frame.get_column("line")
    n = len(text)
    events = []
    for row in opener.iter_rows(named=True):
        # A notebook traceback pasted inside a Markdown quote keeps its `> ` on every line.
        head = _QUOTE.sub("", row["text"])
        ipy, rich = _IPY_START.match(head), _RICH_START.match(head)
        if not (ipy or rich):
            continue
        pos = row["_pos"]
        window = [_QUOTE.sub("", ln) for ln in text.slice(pos + 1, WINDOW).to_list()]
        frames: list[re.Match] = []
        exc_at = None
        if ipy:
            exc = ipy.group("exc")
            short = exc.rsplit(".", 1)[-1]
            for k, ln in enumerate(window):
                s = ln.strip()
                if s.startswith((exc + ":", short + ":")) or s in (exc, short):
                    exc_at = k
                    break
                fm = _IPY_FRAME.match(s)
                if fm:
                    frames.append(fm)
        else:
            for k, ln in enumerate(window):
                if ln.lstrip().startswith("╰"):
                    exc_at = k + 1 if k + 1 < len(window) and window[k + 1].strip() else None
                    break
                fm = _RICH_FRAME.search(ln)
                if fm:
                    frames.append(fm)
        if exc_at is None:
            continue
        end = exc_at
        while end + 1 < len(window) and end - exc_at < MAX_MESSAGE_LINES and window[end + 1].strip():
            end += 1
        exc_line = window[exc_at].strip()
        fields: dict = {"form": "ipython" if ipy else "rich", "frames": len(frames)}
        if frames:
            fm = frames[-1]
            gd = fm.groupdict()
            fields.update(file=gd.get("file") or gd.get("file2"), line=gd.get("line") or gd.get("cell_line"),
                          function=gd.get("function") or gd.get("function2"))
        tm = _EXC_TYPE.match(exc_line)
        fields["exc_type"] = tm.group("type") if tm else (ipy.group("exc") if ipy else None)
        start = pos - 1 if pos > 0 and set(_QUOTE.sub("", str(text[pos - 1])).strip()) == {"-"} else pos
        stop = min(n - 1, pos + 1 + end)
        events.append(
            _event(
                line=int(lines[start]),
                end_line=int(lines[stop]),
                code="python_traceback",
                severity="error",
                message=exc_line,
                text=_text(text, np.arange(start, stop + 1)),
                fields=fields,
                rank=row["rank"],
                ts=row["ts"],
            )
        )
    return events


# ---------------------------------------------------------------------------------------------
# C++ frame dumps (`Exception raised from ... (most recent call first):` + `frame #N: ...`)
# ---------------------------------------------------------------------------------------------


def _cpp_dumps(frame: pl.DataFrame, cand: pl.DataFrame) -> list[dict]:
    opener = _openers(frame, cand, "Exception raised from")
    if opener.height == 0:
        return []
    text = frame.get_column("text")
    groups: dict[str, list[tuple[int, dict, re.Match]]] = {}
    for row in opener.iter_rows(named=True):
        m = _CPP_START.search(row["text"])
        if m:
            groups.setdefault(row["text"][: m.start()], []).append((row["_pos"], row, m))
    events = []
    for prefix, items in groups.items():
        v = _view(text, [pos for pos, _, _ in items], prefix)
        is_frame = v.body.str.starts_with("frame #").fill_null(False).to_numpy()
        for pos, row, m in items:
            p = v.find(pos)
            if p >= len(v.rows) or v.rows[p] != pos:
                continue
            end = _run_end(is_frame, p + 1, min(len(is_frame), p + 1 + 500)) - 1
            frames = [v.body[k] for k in range(p + 1, end + 1)]
            origin = next((f for f in frames if not re.search(r"c10::Error|c10::detail::|torchCheckFail|c10::\w+Error::", f)), None)
            fields = {
                "function": m.group("function"),
                "file": m.group("file"),
                "line": m.group("line"),
                "frames": len(frames),
                "origin": re.sub(r"^frame #\d+: ", "", origin) if origin else None,
            }
            rank = row["rank"] if row["rank"] is not None else _rank_of(prefix)
            if rank is None and pos > 0:
                # The dump continues the record above it (`[rank7]:[E ...] ... exception:`), which has the rank.
                rank = _rank_of(str(text[pos - 1])[:24])
            events.append(
                _event(
                    line=int(row["line"]),
                    end_line=int(frame.get_column("line")[int(v.rows[max(p, end)])]),
                    code="cpp_stacktrace",
                    severity="error",
                    message=m.group(0),
                    text=_text(text, v.rows[p : max(p, end) + 1]),
                    fields=fields,
                    rank=rank,
                    ts=row["ts"],
                )
            )
    return events


# ---------------------------------------------------------------------------------------------
# torchrun's ChildFailedError report (both layouts: <=1.10 `Root Cause:` and >=1.11 `Failures:`)
# ---------------------------------------------------------------------------------------------

_BORDER = re.compile(r"^\s*(?:={3,}|\*{3,}|-{3,})\s*$")
_ENTRY = re.compile(r"^\[(\d+)\]:\s*$")
_MSG_MESSAGE = re.compile(r'^\s+"message": "(.*)",?\s*$')
_KEY = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback|msg)\s*:\s?(.*)$")
_REPORT_LINE = re.compile(r"^(?:\s|\[\d+\]:|(?:Other )?Failures:|Root Cause|.*\bFAILED\s*$|={3,}|\*{3,}|-{3,})")


def _reports(frame: pl.DataFrame, cand: pl.DataFrame) -> list[dict]:
    opener = _openers(frame, cand, "Root Cause")
    if opener.height == 0:
        return []
    text = frame.get_column("text")
    events = []
    for row in opener.iter_rows(named=True):
        m = _REPORT_START.match(row["text"])
        if not m:
            continue
        prefix, pos = m.group("prefix"), row["_pos"]
        lo = max(0, pos - 400)
        v = _view(text, [lo], prefix)
        a = v.find(pos)
        if a >= len(v.rows) or v.rows[a] != pos:
            continue
        body = v.body
        # Backwards to the ChildFailedError line (or the first report line); forwards to the last border.
        b = a
        while b - 1 >= 0 and a - b < 400:
            prev = body[b - 1]
            if "ChildFailedError" in prev:
                b -= 1
                break
            if not _in_report(prev, body[b - 2] if b >= 2 else ""):
                break
            b -= 1
        e = a
        while e + 1 < len(body) and e - a < 2000:
            if not _in_report(body[e + 1], body[e + 2] if e + 2 < len(body) else ""):
                break
            e += 1
        while e > a and not body[e].strip():
            e -= 1
        lines = [body[k] for k in range(b, e + 1)]
        events.append(_report_event(frame, v, b, e, lines, row, prefix))
    return events


def _in_report(line: str, beyond: str) -> bool:
    """Whether a line belongs to a report; an empty line does when the report goes on after it.

    (A child's call stack ends with a line of two spaces, which log capture right-strips to nothing.)
    """
    if line.strip():
        return bool(_REPORT_LINE.match(line))
    return bool(beyond.strip()) and bool(_REPORT_LINE.match(beyond))


def _parse_failures(lines: list[str]) -> tuple[str | None, list[dict], list[dict]]:
    """Title, root-cause entries and other entries of a report."""
    title, section = None, None
    root: list[dict] = []
    other: list[dict] = []
    entry: dict | None = None
    key = None
    for raw in lines:
        line = raw.rstrip()
        s = line.strip()
        # The title is flush left; PyTorch 1.9-1.10 centred it between `*` and `=` borders, before any section.
        if s.endswith("FAILED") and title is None and (not line.startswith(" ") or section is None):
            title = s[: -len("FAILED")].strip()
            continue
        if s in ("Failures:", "Other Failures:"):
            section, entry = "other", None
            continue
        if s.startswith("Root Cause"):
            section, entry = "root", None
            continue
        if _BORDER.match(line) or "ChildFailedError" in line:
            entry, key = None, None
            continue
        em = _ENTRY.match(s)
        if em and section:
            entry = {"idx": em.group(1)}
            (root if section == "root" else other).append(entry)
            key = None
            continue
        km = _KEY.match(line)
        if km and entry is not None and (key is None or len(line) - len(line.lstrip()) <= 2):
            key = km.group(1)
            entry[key] = km.group(2).strip()
            entry.setdefault("_lines", {})[key] = []
            continue
        if entry is not None and key in ("traceback", "msg") and line.startswith("  "):
            entry["_lines"][key].append(line)
    return title, root, other


def _entry_fields(entry: dict) -> dict:
    out: dict = {}
    rm = re.match(r"(-?\d+) \(local_rank: (\d+)\)", entry.get("rank", ""))
    if rm:
        out["rank"], out["local_rank"] = rm.group(1), rm.group(2)
    xm = re.match(r"(-?\d+) \(pid: (\d+)\)", entry.get("exitcode", ""))
    if xm:
        out["exitcode"], out["pid"] = xm.group(1), xm.group(2)
    out["time"] = entry.get("time")
    out["host"] = entry.get("host")
    out["error_file"] = entry.get("error_file")
    tb = entry.get("traceback", entry.get("msg", "")).strip('"')
    out["traceback"] = tb or None
    sm = re.search(r"Signal (\d+) \((SIG\w+)\) received by PID (\d+)", tb)
    if sm:
        out["signal"] = sm.group(2)
    more = [ln.strip() for ln in entry.get("_lines", {}).get("traceback", []) if ln.strip()]
    if more:
        # The child's py_callstack, indented by two: its last line is the exception.
        out["exception"] = more[-1]
    for ln in entry.get("_lines", {}).get("msg", []):
        # PyTorch 1.9-1.10 printed the child's error.json under `msg:`; its "message" is the exception.
        mm = _MSG_MESSAGE.match(ln)
        if mm:
            out["exception"] = mm.group(1)
            break
    return out


def _parse_time(text: str | None) -> dt.datetime | None:
    """The report row's `time`: torchrun prints `datetime.fromtimestamp(ts).isoformat(sep="_")` (ProcessFailure.
    timestamp_isoformat), the agent host's LOCAL time with no zone. Like every zone-less stamp it is read as UTC
    (the host's zone is not in the log); it is still the failure's own time, so it wins over the stamp of the
    line the report is printed on (printed later, and often a stamp of the same zone-less kind)."""
    if not text:
        return None
    try:
        return dt.datetime.strptime(text.strip(), "%Y-%m-%d_%H:%M:%S").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def _report_event(frame: pl.DataFrame, v: _View, b: int, e: int, lines: list[str], row: dict, prefix: str) -> dict:
    title, root, other = _parse_failures(lines)
    rf = _entry_fields(root[0]) if root else {}
    others = [_entry_fields(x) for x in other]
    fields = {
        "title": title,
        **rf,
        "failures": len(root) + len(others),
        "other_ranks": ",".join(o.get("rank", "?") for o in others) or None,
        "other_local_ranks": ",".join(o.get("local_rank", "?") for o in others) or None,
        "other_exitcodes": ",".join(o.get("exitcode", "?") for o in others) or None,
        "other_pids": ",".join(o.get("pid", "?") for o in others) or None,
    }
    what = rf.get("exception") or rf.get("traceback") or ""
    message = f"{title or 'worker'} FAILED: rank {rf.get('rank', '?')} (local_rank {rf.get('local_rank', '?')}) exitcode {rf.get('exitcode', '?')}"
    if what:
        message += f": {what}"
    rank = int(rf["rank"]) if rf.get("rank", "").lstrip("-").isdigit() else _rank_of(prefix)
    return _event(
        line=int(frame.get_column("line")[int(v.rows[b])]),
        end_line=int(frame.get_column("line")[int(v.rows[e])]),
        code="torchrun_child_failed_report",
        severity="error",
        message=message,
        text=_text(frame.get_column("text"), v.rows[b : e + 1]),
        fields=fields,
        rank=rank,
        ts=_parse_time(rf.get("time")) or row["ts"],
    )


# ---------------------------------------------------------------------------------------------
# nvidia-smi default tables pasted into a log (event only; another parser reads the numbers)
# ---------------------------------------------------------------------------------------------

_CTIME = re.compile(r"^\s*[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\s*$")
_SMI_VERSIONS = re.compile(r"NVIDIA-SMI (?P<smi>\S+)\s+Driver Version: (?P<driver>\S+)\s+CUDA Version: (?P<cuda>\S+)")
_SMI_GPU_ROW = re.compile(r"^\|\s+\d+\s+.*\|\s+[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d")
_SMI_PROC_ROW = re.compile(r"^\|\s+\d+\s+(?:N/A|\d+)\s+(?:N/A|\d+)\s+\d+\s+[CGM+]+\s")


def _smi_tables(frame: pl.DataFrame, cand: pl.DataFrame) -> list[dict]:
    opener = _openers(frame, cand, "NVIDIA-SMI ")
    if opener.height == 0:
        return []
    text = frame.get_column("text")
    events = []
    for row in opener.iter_rows(named=True):
        m = _SMI_START.match(row["text"])
        if not m:
            continue
        prefix, pos = m.group("prefix"), row["_pos"]
        v = _view(text, [max(0, pos - 3)], prefix)
        a = v.find(pos)
        if a >= len(v.rows) or v.rows[a] != pos:
            continue
        body = v.body
        b = a
        if b - 1 >= 0 and body[b - 1].strip().startswith("+"):
            b -= 1
        date = None
        for k in (b - 1, b - 2):
            if k >= 0 and _CTIME.match(body[k]):
                date, b = body[k].strip(), k
                break
        e = a
        while e + 1 < len(body) and e - a < 400:
            nxt = body[e + 1].strip()
            if nxt.startswith(("|", "+")):
                e += 1
            elif not nxt and e + 2 < len(body) and body[e + 2].strip().startswith("+"):
                e += 2
            else:
                break
        lines = [body[k] for k in range(b, e + 1)]
        vm = _SMI_VERSIONS.search(body[a])
        fields = {
            "smi_version": m.group("smi"),
            "driver_version": vm.group("driver") if vm else None,
            "cuda_version": vm.group("cuda") if vm else None,
            "gpus": sum(1 for ln in lines if _SMI_GPU_ROW.match(ln.strip())),
            "processes": sum(1 for ln in lines if _SMI_PROC_ROW.match(ln.strip())),
            "date": date,
        }
        ts = None
        if date:
            try:
                ts = dt.datetime.strptime(re.sub(r"\s+", " ", date), "%a %b %d %H:%M:%S %Y").replace(tzinfo=dt.timezone.utc)
            except ValueError:
                ts = None
        events.append(
            _event(
                line=int(frame.get_column("line")[int(v.rows[b])]),
                end_line=int(frame.get_column("line")[int(v.rows[e])]),
                code="nvidia_smi_table",
                severity="info",
                message=re.sub(r"\s+", " ", body[a].strip("| ")),
                text=_text(text, v.rows[b : e + 1]),
                fields=fields,
                rank=row["rank"] if row["rank"] is not None else _rank_of(prefix),
                ts=ts or row["ts"],
            )
        )
    return events


# The record an exception block belongs to when it is printed right under it: Python logging's `logger.exception` /
# `exc_info=True` (`... - ERROR - Training failed: ...` then `Traceback ...`), c10's `[E ...]` / glog `E0626 ...` record
# whose message ends where the C++ dump starts. Read in the prefix that split_prefixes cut off the record.
_ERROR_RECORD = re.compile(r"(?<![A-Za-z])(?:ERROR|CRITICAL|FATAL|EXCEPTION)(?![A-Za-z])|^\[?[EF](?:\d{3,4} | )")


def _stamp_from_record_above(frame: pl.DataFrame, rows: list[dict], year: int) -> None:
    """Give a block event without a time the stamp of the error record on the line right above its first line.

    A traceback or dump has no stamp of its own; the record that announced it has (the same moment). Only the
    line right above counts, only an error-level record, and only of the same rank where both name one. The
    few lines looked at are prefix-split together (one per block event, never all lines).
    """
    need = [r for r in rows if r["ts"] is None and r["line"] > 1]
    if not need:
        return
    lines = frame.get_column("line").to_numpy()
    at = np.searchsorted(lines, np.asarray([r["line"] for r in need], dtype=lines.dtype)) - 1
    ok = at >= 0
    if not ok.any():
        return
    above = frame.select("line", "seg", "text")[at[ok].tolist()]
    above = split_prefixes(above, year)
    for r, rec in zip([r for r, k in zip(need, ok, strict=True) if k], above.iter_rows(named=True), strict=True):
        if rec["ts"] is None or rec["line"] != r["line"] - 1:
            continue
        text, msg = rec["text"], rec["msg"] or ""
        head = text[: len(text) - len(msg)] if text.endswith(msg) else text
        if not _ERROR_RECORD.search(head):
            continue
        if r["rank"] is not None and rec["rank"] is not None and r["rank"] != rec["rank"]:
            continue
        r["ts"] = rec["ts"]


def extract(frame: pl.DataFrame, cand: pl.DataFrame, year: int) -> pl.DataFrame:
    """Block events found in one frame (`cand` holds the prefix-split candidate lines)."""
    rows = _tracebacks(frame, cand) + _notebook_tracebacks(frame, cand)
    rows += _tail_tracebacks(frame, cand, [(r["line"], r["end_line"]) for r in rows])
    rows += _cpp_dumps(frame, cand) + _reports(frame, cand) + _smi_tables(frame, cand)
    if not rows:
        return pl.DataFrame(schema=SCHEMA)
    _stamp_from_record_above(frame, rows, year)
    return pl.DataFrame(rows, schema=SCHEMA).sort("line")

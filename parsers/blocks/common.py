"""What every block kind shares: bounds, the prefix view of a stream, the opener loop and the event row."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import orjson
import polars as pl
from forensics.parsers.prefixes import RAY_REPEATED

# How far (in lines) a block may reach from its opener; a longer block is cut there.
WINDOW = 3000
# Lines of exception message kept after the exception line (CUDA, NCCL and launcher messages span lines).
MAX_MESSAGE_LINES = 60
MAX_TEXT_CHARS = 32_000

TB = "Traceback (most recent call last)"
# The opener; a progress-bar redraw may be glued after it (`...call last):     | 4/84 [00:52<17:32, ...]`).
# PaddlePaddle's `C++ Traceback (most recent call last):` heads a C++ frame list, not a Python traceback.
TB_START = re.compile(r"(?<!Original )(?<!C\+\+ )Traceback \(most recent call last\)")
_RANK_IN_PREFIX = re.compile(r"\[(?:rank|default|Rank |RANK:|RANK )(\d+)\]|\brank=(\d+)\b")
# `> ` marks the frame that raised in loguru / better_exceptions tracebacks.
FRAME = re.compile(r'^\s*(?:> )?File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.+))?')
EXC_TYPE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Failure|Timeout)|[A-Za-z_][\w.]*\.[A-Z]\w*)(?::|$)")
_TIME_TOKEN = re.compile(r"\d{4}-\d{2}-\d{2}[T _]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?|\d{2}:\d{2}:\d{2}(?:[.,]\d+)?")


@dataclass
class View:
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


def view(text: pl.Series, starts: list[int], prefix: str, force: dict[int, str] | None = None) -> View:
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
    return View(rows=rows[keep], body=body.filter(keep))


def opener_views(frame: pl.DataFrame, cand: pl.DataFrame, needle: str, start: re.Pattern,
                 reach_back: int) -> Iterator[tuple[dict, re.Match, View, int]]:
    """Anchored openers (their `start` match holds a `prefix` group), each with the view of its prefix from
    `reach_back` lines above it and the opener's place in that view; an opener whose own text does not carry the
    prefix (so it is not in the view) is passed over."""
    text = frame.get_column("text")
    for row, m in opener_rows(frame, cand, needle, start, anchored=True):
        pos = row["_pos"]
        v = view(text, [max(0, pos - reach_back)], m.group("prefix"))
        a = v.find(pos)
        if a < len(v.rows) and v.rows[a] == pos:
            yield row, m, v, a


def run_end(mask: np.ndarray, start: int, limit: int) -> int:
    """First position >= start where `mask` is False (at most `limit`)."""
    seg = mask[start:limit]
    if seg.size == 0 or seg.all():
        return min(limit, len(mask))
    return start + int(np.argmin(seg))


def rank_of(prefix: str) -> int | None:
    m = _RANK_IN_PREFIX.search(prefix)
    return int(m.group(1) or m.group(2)) if m else None


def block_text(frame_text: pl.Series, rows: np.ndarray) -> str:
    text = "\n".join(frame_text.gather(rows).to_list())
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 20] + "\n[... block cut ...]"


def event(line: int, end_line: int, code: str, severity: str, message: str, text: str, fields: dict,
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


def openers(frame: pl.DataFrame, cand: pl.DataFrame, needle: str) -> pl.DataFrame:
    """Candidate lines containing `needle`, each with `_pos`, its row in the frame.

    Rows are not lines: tqdm's `\r` redraws split one line into several rows, so the position
    is looked up, never computed from the line number.
    """
    opener = cand.filter(pl.col("text").str.contains(needle, literal=True))
    rows = frame.select("line", "seg").with_row_index("_pos").with_columns(pl.col("_pos").cast(pl.Int64))
    return opener.join(rows, on=["line", "seg"], how="inner", maintain_order="left")


def opener_rows(frame: pl.DataFrame, cand: pl.DataFrame, needle: str, start: re.Pattern | None = None,
                anchored: bool = False) -> Iterator[tuple[dict, re.Match | None]]:
    """The loop every block kind starts with: candidate lines holding `needle`, each with its `start` match.

    Lines that `start` does not match (searched, or matched at the line start when `anchored`) are passed over.
    """
    for row in openers(frame, cand, needle).iter_rows(named=True):
        if start is None:
            yield row, None
            continue
        m = start.match(row["text"]) if anchored else start.search(row["text"])
        if m:
            yield row, m

"""IPython / Jupyter and rich tracebacks pasted from notebooks and Lightning/typer consoles."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
from forensics.parsers.blocks.common import EXC_TYPE, MAX_MESSAGE_LINES, TB, WINDOW, block_text, event, opener_rows

IPY_START = re.compile(r"^(?P<prefix>\s*)(?P<exc>[A-Za-z_][\w.]*)\s{2,}Traceback \(most recent call last\)\s*$")
_IPY_FRAME = re.compile(
    r"^(?:File (?P<file>\S+?):(?P<line>\d+), in (?P<function>[^(\s]+)"
    r"|Cell In\[\d+\], line (?P<cell_line>\d+)"
    r"|(?P<file2>\S+\.py|<ipython-input-[^>]+>) in (?P<function2>[^(\s]+))"
)
# A notebook traceback pasted inside a Markdown quote keeps its `> ` on every line.
QUOTE = re.compile(r"^(?:> ?)+")
_RICH_START = re.compile(r"^(?P<prefix>.*?)╭─+ Traceback \(most recent call last\) ─+╮")
_RICH_FRAME = re.compile(r"│ (?P<file>\S+\.py):(?P<line>\d+)(?: in (?P<function>[\w<>.]+))?")


def read(frame: pl.DataFrame, cand: pl.DataFrame, found: list[dict]) -> list[dict]:
    """IPython (`ValueError    Traceback (most recent call last)`) and rich (`╭─ Traceback ... ─╮`) tracebacks."""
    text = frame.get_column("text")
    lines = frame.get_column("line")
    n = len(text)
    events = []
    for row, _ in opener_rows(frame, cand, TB):
        head = QUOTE.sub("", row["text"])
        ipy, rich = IPY_START.match(head), _RICH_START.match(head)
        if not (ipy or rich):
            continue
        pos = row["_pos"]
        window = [QUOTE.sub("", ln) for ln in text.slice(pos + 1, WINDOW).to_list()]
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
        tm = EXC_TYPE.match(exc_line)
        fields["exc_type"] = tm.group("type") if tm else (ipy.group("exc") if ipy else None)
        start = pos - 1 if pos > 0 and set(QUOTE.sub("", str(text[pos - 1])).strip()) == {"-"} else pos
        stop = min(n - 1, pos + 1 + end)
        events.append(
            event(
                line=int(lines[start]),
                end_line=int(lines[stop]),
                code="python_traceback",
                severity="error",
                message=exc_line,
                text=block_text(text, np.arange(start, stop + 1)),
                fields=fields,
                rank=row["rank"],
                ts=row["ts"],
            )
        )
    return events

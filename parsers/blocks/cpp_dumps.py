"""C++ frame dumps: `Exception raised from ... (most recent call first):` and its `frame #N:` lines."""

from __future__ import annotations

import re

import polars as pl
from forensics.parsers.blocks.common import block_text, event, opener_rows, rank_of, run_end, view

NEEDLE = "Exception raised from"
# The file is at most 1024 characters: unbounded, `.+?` rescans the rest of the line from every `Exception raised
# from` of a line that never completes (quadratic).
CPP_START = re.compile(r"Exception raised from (?P<function>\S+) at (?P<file>.{1,1024}?):(?P<line>\d+) \(most recent call first\):")


def read(frame: pl.DataFrame, cand: pl.DataFrame, found: list[dict]) -> list[dict]:
    """C++ frame dumps, per stream prefix."""
    text = frame.get_column("text")
    groups: dict[str, list[tuple[int, dict, re.Match]]] = {}
    for row, m in opener_rows(frame, cand, NEEDLE, CPP_START):
        groups.setdefault(row["text"][: m.start()], []).append((row["_pos"], row, m))
    events = []
    for prefix, items in groups.items():
        v = view(text, [pos for pos, _, _ in items], prefix)
        is_frame = v.body.str.starts_with("frame #").fill_null(False).to_numpy()
        for pos, row, m in items:
            p = v.find(pos)
            if p >= len(v.rows) or v.rows[p] != pos:
                continue
            end = run_end(is_frame, p + 1, min(len(is_frame), p + 1 + 500)) - 1
            frames = [v.body[k] for k in range(p + 1, end + 1)]
            origin = next((f for f in frames if not re.search(r"c10::Error|c10::detail::|torchCheckFail|c10::\w+Error::", f)), None)
            fields = {
                "function": m.group("function"),
                "file": m.group("file"),
                "line": m.group("line"),
                "frames": len(frames),
                "origin": re.sub(r"^frame #\d+: ", "", origin) if origin else None,
            }
            rank = row["rank"] if row["rank"] is not None else rank_of(prefix)
            if rank is None and pos > 0:
                # The dump continues the record above it (`[rank7]:[E ...] ... exception:`), which has the rank.
                rank = rank_of(str(text[pos - 1])[:24])
            events.append(
                event(
                    line=int(row["line"]),
                    end_line=int(frame.get_column("line")[int(v.rows[max(p, end)])]),
                    code="cpp_stacktrace",
                    severity="error",
                    message=m.group(0),
                    text=block_text(text, v.rows[p : max(p, end) + 1]),
                    fields=fields,
                    rank=rank,
                    ts=row["ts"],
                )
            )
    return events

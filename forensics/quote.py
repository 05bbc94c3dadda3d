"""Quote the real input lines behind evidence that was built from parsed values (metric rows)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from forensics.contracts.model import Evidence
from forensics.parsers.base import kinds_where
from forensics.sources import make_source

MAX_QUOTE = 2000
_PIECE = 1024 * 1024
# Runs whose files are not plain files under their root (archive members read by `forensics scan`):
# str(root) -> a function giving the Source of a relative path.
OPENERS: dict[str, Callable[[str], object]] = {}


def read_lines(root: Path, rel: str, wanted: set[int]) -> dict[int, str]:
    """The requested 1-based lines of one file (decompressed transparently), read once, streaming."""
    path = root / rel if root.is_dir() else root
    out: dict[int, str] = {}
    opener = OPENERS.get(str(root))
    if not wanted or (opener is None and not path.is_file()):
        return out
    last = max(wanted)
    try:
        src = opener(rel) if opener is not None else make_source(path, rel)
        if src is None:
            return out
        with src.open() as fh:
            n = 0
            while raw := fh.readline(_PIECE):
                n += 1
                if n in wanted:
                    out[n] = raw.decode("utf-8", errors="replace").rstrip("\r\n")[:MAX_QUOTE]
                # A line without end is skipped piece by piece, never held whole.
                while not raw.endswith(b"\n") and (raw := fh.readline(_PIECE)):
                    pass
                if n >= last:
                    break
    except OSError:
        return out
    return out


def fill(root: Path, kinds: dict[str, str], rows: list[Evidence]) -> list[Evidence]:
    """Replace synthetic evidence text with the line it came from, where that line can be read
    (files whose parser declares `quotable`: their rows' `line` is a physical line)."""
    quotable = kinds_where("quotable")
    wanted: dict[str, set[int]] = {}
    for e in rows:
        if e.synthetic and kinds.get(e.file) in quotable:
            wanted.setdefault(e.file, set()).add(e.line)
    lines = {f: read_lines(root, f, ls) for f, ls in wanted.items()}
    return [dataclasses.replace(e, text=lines[e.file][e.line], synthetic=False)
            if e.synthetic and e.line in lines.get(e.file, {}) else e for e in rows]

"""Input fingerprints (what a run folder or archive holds) and failure fingerprints (how a run failed, masked)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from forensics.discover import input_entries


@dataclass(frozen=True)
class InputStat:
    """Identity and size of one run's inputs, from one walk of its folder."""

    fingerprint: str
    bytes: int
    files: int
    mtime: float  # newest modification time of any input (for --since)


def input_stat(path: Path) -> InputStat:
    """Hash of every file's relative path, size and mtime (contents are not read: a rescan must be cheap)."""
    h = hashlib.sha256()
    total = count = 0
    newest = 0.0
    if path.is_file():
        st = path.stat()
        h.update(f"{path.name}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        return InputStat(h.hexdigest()[:32], st.st_size, 1, st.st_mtime)
    # The files of analyze's own discovery: no recursion limit, a sample's expect.toml left out.
    for rel, st in input_entries(path):
        if st is None:
            h.update(rel + b"\0?\n")
            continue
        h.update(rel + f"\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        total += st.st_size
        count += 1
        newest = max(newest, st.st_mtime)
    return InputStat(h.hexdigest()[:32], total, count, newest)


# Order matters: timestamps and paths before bare numbers, so that their digits do not leave stray tokens.
_MASKS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^\s*\[(?:rank|default)\d+\]:\s*"), ""),
    (re.compile(r"\d{4}-\d\d-\d\d[T _]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"\b[EWIF]\d{4} \d\d:\d\d:\d\d\.\d+"), "<time>"),
    (re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)? ?[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d(?: \d{4})?"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d\d:\d\d(?:\.\d+)?\b"), "<time>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.@+~-]+){2,}[/\\]?|~/[\w./@+-]+"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<addr>"),
    (re.compile(r"\b[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?\b"), "<pci>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<ip>"),
    (re.compile(r"\b[0-9a-fA-F]{8,}\b"), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
]


def mask(line: str) -> str:
    """The line with numbers, addresses, paths, ranks and timestamps replaced by placeholders."""
    out = line.splitlines()[0] if line else ""
    for rx, repl in _MASKS:
        out = rx.sub(repl, out)
    return out.strip()[:300]


def failure_fingerprint(playbook: str | None, cause: str | None, line: str | None) -> str | None:
    """Runs that failed the same way share this: root playbook, top cause and the masked evidence line."""
    if not playbook:
        return None
    text = f"{playbook}\0{cause or ''}\0{mask(line or '')}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]

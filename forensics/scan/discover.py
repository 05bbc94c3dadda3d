"""Find the runs under a scan root: run folders, archives, or what `--runs GLOB` names; `--since` filters by age."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from forensics.discover import SKIP_DIRS, walk
from forensics.scan.archive import is_archive

# The scan's own output folder and caches are never runs.
_SCAN_SKIP = SKIP_DIRS | {"parts"}


@dataclass(frozen=True)
class RunRef:
    """One run to scan: a folder or an archive file, by absolute path and by path relative to the root."""

    path: str
    rel: str
    kind: str  # folder | archive


def _has_files(folder: Path) -> bool:
    """True when the folder directly holds a regular non-archive file (logs, traces)."""
    try:
        with os.scandir(folder) as it:
            return any(e.is_file(follow_symlinks=False) and not is_archive(Path(e.name)) and not e.name.startswith(".")
                       for e in it)
    except OSError:
        return False


def find_runs(root: Path, runs_glob: str | None = None, exclude: Path | None = None) -> list[RunRef]:
    """The runs under `root`, sorted by relative path.

    Without a glob: every folder that directly holds a file is a run (its subfolders belong to it),
    and every archive outside a run folder is a run; the root itself is a run only when nothing below it is.
    """
    root = Path(root).resolve()
    skip = exclude.resolve() if exclude is not None else None
    refs: list[RunRef] = []

    def add(p: Path) -> None:
        if skip is not None and (p == skip or skip in p.parents):
            return
        kind = "archive" if p.is_file() else "folder"
        refs.append(RunRef(str(p), str(p.relative_to(root)) if p != root else ".", kind))

    if root.is_file():
        add(root)
        return refs
    if runs_glob:
        for p in sorted(root.glob(runs_glob)):
            if p.is_dir() or (p.is_file() and is_archive(p)):
                add(p)
        return refs
    # Without recursion (os.walk of Python 3.11 recurses: a folder ~1,000 levels deep raised RecursionError).
    for dirpath, dirnames, filenames in walk(root, lambda exc: None):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in _SCAN_SKIP and not d.startswith("."))
        if skip is not None and (here == skip or skip in here.parents):
            dirnames[:] = []
            continue
        if here != root and _has_files(here):
            add(here)
            dirnames[:] = []  # everything below a run folder is part of that run
            continue
        for name in sorted(filenames):
            if is_archive(Path(name)):
                add(here / name)
    if not refs and _has_files(root):
        add(root)
    return sorted(refs, key=lambda r: r.rel)


def parse_since(text: str) -> float:
    """`--since` as a POSIX time: an ISO date or date-time (UTC unless it says otherwise)."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"--since: not an ISO date or date-time: {text!r}") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()

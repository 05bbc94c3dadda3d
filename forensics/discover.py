"""Walk a run folder: every entry becomes a Source to parse or a row explaining why not."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from forensics.sources import Source, make_source

# Folders that never hold run evidence and can be huge.
SKIP_DIRS = {".git", "__pycache__", ".forensics-cache"}
# Files at the top of a run folder written about the run, not by it: a sample case's expectations
# (sample_logs/<playbook>/<case>/expect.toml) sit beside the run they describe.
SKIP_TOP_FILES = {"expect.toml"}


@dataclass
class Skipped:
    """A folder entry that will not be parsed, with the status and reason for the files table."""

    rel: str
    status: str  # unrecognized | failed
    error: str
    size: int = 0


def walk(root: Path, on_error) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(root, topdown=True, followlinks=False)` without recursion (Python 3.11's is recursive,
    so a folder nested ~1,000 levels deep raised RecursionError). The caller may prune `dirnames` in place;
    the order is the same depth-first pre-order."""
    stack = [str(root)]
    while stack:
        top = stack.pop()
        dirnames: list[str] = []
        filenames: list[str] = []
        links: set[str] = set()
        try:
            with os.scandir(top) as it:
                for entry in it:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dirnames if is_dir else filenames).append(entry.name)
                    if is_dir and entry.is_symlink():
                        links.add(entry.name)
        except OSError as exc:
            on_error(exc)
            continue
        yield top, dirnames, filenames
        # followlinks=False: a symlinked folder is never entered, so no loop is possible.
        stack.extend(os.path.join(top, d) for d in reversed(dirnames) if d not in links)


def input_entries(root: Path) -> Iterator[tuple[bytes, os.stat_result | None]]:
    """Every file under `root` as (relative path as bytes, its lstat or None when it cannot be taken), in walk
    order, a sample case's expect.toml at the top left out: what an input fingerprint is made of. Names are
    bytes (a name need not be UTF-8) and entries are never followed (a link to /proc must not change it)."""
    for dirpath, dirnames, filenames in walk(root, lambda exc: None):
        dirnames.sort()
        for name in sorted(filenames):
            if name in SKIP_TOP_FILES and dirpath == str(root):
                continue
            full = os.path.join(dirpath, name)
            try:
                st: os.stat_result | None = os.lstat(full)
            except OSError:
                st = None
            yield os.fsencode(os.path.relpath(full, root)), st


def display_name(rel: str) -> str:
    """A relative path as the files table and reports show it: bytes that are not UTF-8 as `\\xNN`."""
    try:
        rel.encode("utf-8")
        return rel
    except UnicodeEncodeError:
        return os.fsencode(rel).decode("utf-8", "backslashreplace")


def _inside(root: Path, target: Path) -> bool:
    try:
        target.relative_to(root)
        return True
    except ValueError:
        return False


def discover(root: Path) -> tuple[list[Source], list[Skipped]]:
    """All regular files under `root` (recursively, symlinks kept inside the folder), sorted by path."""
    root = Path(root)
    if root.is_file():
        return [make_source(root, root.name)], []
    real_root = root.resolve()
    skipped: list[Skipped] = []
    # (rel, path to read, its stat, whether reached through a symlink), in walk order.
    found: list[tuple[str, Path, os.stat_result, bool]] = []

    def on_error(exc: OSError) -> None:
        rel = display_name(os.path.relpath(exc.filename or str(root), root)) if exc.filename else "."
        skipped.append(Skipped(rel, "failed", f"cannot list folder: {exc.strerror or exc}"))

    for dirpath, dirnames, filenames in walk(root, on_error):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for d in list(dirnames):
            full = Path(dirpath) / d
            if full.is_symlink():
                rel = display_name(str(full.relative_to(root)))
                skipped.append(Skipped(rel, "unrecognized", "symlink to a folder: not followed"))
        top = dirpath == str(root)
        for name in sorted(filenames):
            if top and name in SKIP_TOP_FILES:
                continue
            full = Path(dirpath, name)
            rel = display_name(os.path.relpath(full, root))
            try:
                lst = os.lstat(full)
                if stat.S_ISLNK(lst.st_mode):
                    try:
                        target = full.resolve(strict=True)
                    except (OSError, RuntimeError) as exc:
                        reason = "symlink loop" if "loop" in str(exc).lower() or isinstance(exc, RuntimeError) else "dangling symlink"
                        skipped.append(Skipped(rel, "failed", reason))
                        continue
                    if not _inside(real_root, target):
                        skipped.append(Skipped(rel, "unrecognized", "symlink points outside the run folder: not followed"))
                        continue
                    st = os.stat(target)
                    if not stat.S_ISREG(st.st_mode):
                        skipped.append(Skipped(rel, "unrecognized", "symlink to something that is not a regular file"))
                        continue
                    found.append((rel, target, st, True))
                elif not stat.S_ISREG(lst.st_mode):
                    # FIFOs, sockets, devices: opening one could block or never end.
                    skipped.append(Skipped(rel, "unrecognized", "not a regular file"))
                else:
                    found.append((rel, full, lst, False))
            except PermissionError:
                skipped.append(Skipped(rel, "failed", "permission denied"))
            except OSError as exc:
                skipped.append(Skipped(rel, "failed", f"cannot read: {exc.strerror or exc}"))
    # One file reached under several names (hard links, symlinks inside the folder) is read once: under its
    # first name that is not a symlink, else its first name.
    reader: dict[tuple[int, int], tuple[str, bool]] = {}
    for rel, _, st, is_link in found:
        key = (st.st_dev, st.st_ino)
        if key not in reader or (not is_link and reader[key][1]):
            reader[key] = (rel, is_link)
    sources: list[Source] = []
    for rel, path, st, is_link in found:
        first, _ = reader[(st.st_dev, st.st_ino)]
        if first != rel:
            what = "symlink to a file" if is_link else "hard link to a file"
            skipped.append(Skipped(rel, "unrecognized", f"{what} already read as {first}", st.st_size))
            continue
        if not os.access(path, os.R_OK):
            skipped.append(Skipped(rel, "failed", "permission denied", st.st_size))
            continue
        try:
            sources.append(make_source(path, rel, st))
        except PermissionError:
            skipped.append(Skipped(rel, "failed", "permission denied", st.st_size))
        except OSError as exc:
            skipped.append(Skipped(rel, "failed", f"cannot read: {exc.strerror or exc}", st.st_size))
    return sources, skipped

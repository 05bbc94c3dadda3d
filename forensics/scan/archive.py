"""Runs packed as .tar, .tar.gz/.tgz or .zip, read in place: each member is a Source opened from the archive."""

from __future__ import annotations

import functools
import io
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from forensics.discover import Skipped
from forensics.sources import DEFAULT_MAX_DECOMPRESSED, Source, _Decompressing, compression_of

SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")
# Archive kinds the standard library cannot read in place: reported as skipped runs, never ignored.
UNSUPPORTED = (".tar.zst", ".tar.zstd", ".tzst", ".7z", ".rar")
# Members of one archive beyond this are reported, not read (an archive of a million tiny files is not a run).
MAX_MEMBERS = 20000


def is_archive(path: Path) -> bool:
    """True for a file whose name says it is an archive (read in place, or reported as unsupported)."""
    return path.name.lower().endswith(SUFFIXES + UNSUPPORTED)


def unsupported(path: Path) -> str | None:
    """Why an archive cannot be read in place, or None when it can."""
    if path.name.lower().endswith(UNSUPPORTED):
        return f"archive format not read in place ({path.name.rsplit('.', 1)[-1]}): extract it and scan the folder"
    return None


@functools.lru_cache(maxsize=4)
def _open(path: str, mtime_ns: int) -> tarfile.TarFile | zipfile.ZipFile:
    # Kept open per worker process: sniffing and parsing open each member more than once.
    if path.lower().endswith(".zip"):
        return zipfile.ZipFile(path)
    return tarfile.open(path, "r:*")


def _archive(path: Path) -> tarfile.TarFile | zipfile.ZipFile:
    return _open(str(path), path.stat().st_mtime_ns)


@dataclass
class ArchiveSource(Source):
    """One archive member; `path` is the archive, `member` the name inside it."""

    member: str = ""

    @property
    def name(self) -> str:
        base = self.member.rsplit("/", 1)[-1]
        for suffix in (".gz", ".zst", ".zstd", ".bz2", ".xz"):
            if self.compression and base.endswith(suffix):
                return base[: -len(suffix)]
        return base

    def _raw(self) -> BinaryIO:
        arc = _archive(self.path)
        if isinstance(arc, zipfile.ZipFile):
            return arc.open(self.member)
        fh = arc.extractfile(self.member)
        if fh is None:
            raise OSError(f"{self.member}: not a regular file in the archive")
        return fh

    def open(self) -> BinaryIO:
        self.problems.clear()
        self.truncated = False
        raw = self._raw()
        if self.compression is None:
            return io.BufferedReader(raw, 1024 * 1024) if not isinstance(raw, io.BufferedReader) else raw
        return io.BufferedReader(_Decompressing(raw, self), 1024 * 1024)


def _common_prefix(names: list[str]) -> str:
    """`job-7/` when every member sits in that one folder: rel paths then match the extracted run's."""
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) == 1 and all("/" in n for n in names):
        return next(iter(tops)) + "/"
    return ""


def members(path: Path) -> tuple[list[Source], list[Skipped]]:
    """The archive's regular files as Sources (sorted by path) and its other entries as skipped rows.

    Raises OSError/tarfile.TarError/zipfile.BadZipFile for an archive that cannot be listed.
    """
    arc = _archive(path)
    entries: list[tuple[str, int, bool]] = []  # name, size, regular file
    if isinstance(arc, zipfile.ZipFile):
        for info in arc.infolist():
            if not info.is_dir():
                entries.append((info.filename, info.file_size, True))
    else:
        for info in arc.getmembers():
            if not info.isdir():
                entries.append((info.name, info.size, info.isfile()))
    # Names as shown (no leading './'), the stored name kept for opening the member.
    shown = [(n[2:] if n.startswith("./") else n, n, s, r) for n, s, r in entries]
    prefix = _common_prefix([n for n, _, _, _ in shown])
    sources: list[Source] = []
    skipped: list[Skipped] = []
    for i, (name, stored, size, regular) in enumerate(sorted(shown)):
        rel = name[len(prefix):]
        if not regular:
            skipped.append(Skipped(rel, "unrecognized", "archive member that is not a regular file (link or device)"))
            continue
        if i >= MAX_MEMBERS:
            skipped.append(Skipped(rel, "unrecognized", f"more than {MAX_MEMBERS} members in the archive: not read"))
            continue
        src = ArchiveSource(path=path, rel=rel, size=size, member=stored, max_decompressed=DEFAULT_MAX_DECOMPRESSED)
        try:
            with src._raw() as fh:
                src.compression = compression_of(fh.read(8))
        except Exception as exc:  # noqa: BLE001 - one damaged member is a failed row, not a failed run
            skipped.append(Skipped(rel, "failed", f"cannot read archive member: {exc}", size))
            continue
        sources.append(src)
    return sources, skipped


def source_for(archive: Path, rel: str) -> Source | None:
    """The Source of the member at `rel` (for quoting real lines of an archived run)."""
    try:
        sources, _ = members(archive)
    except Exception:  # noqa: BLE001
        return None
    return next((s for s in sources if s.rel == rel), None)

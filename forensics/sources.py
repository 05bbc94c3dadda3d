"""Read-only access to one input file, with transparent, bounded decompression."""

from __future__ import annotations

import bz2
import contextlib
import io
import lzma
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

# Magic numbers of the compressed containers we open transparently.
MAGIC = {
    b"\x1f\x8b": "gzip",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"BZh": "bz2",
    b"\xfd7zXZ\x00": "xz",
}

# A decompressed stream larger than this is cut off (a decompression bomb guard).
DEFAULT_MAX_DECOMPRESSED = 64 * 1024**3
# ... and so is one that grows past this multiple of its compressed size (real logs compress 5-30x; a
# bomb, hundreds to thousands of times). The floor keeps small, very repetitive logs whole. Both are overridable
# (FORENSICS_DECOMPRESS_RATIO, FORENSICS_DECOMPRESS_FLOOR_MB).
DECOMPRESS_RATIO = int(os.environ.get("FORENSICS_DECOMPRESS_RATIO", "50"))
DECOMPRESS_FLOOR = int(os.environ.get("FORENSICS_DECOMPRESS_FLOOR_MB", "64")) * 1024**2
# The most one step of decompression produces: a bomb block expands in bounded pieces, never at once.
_STEP = 4 * 1024 * 1024
_ZLIB = type(zlib.decompressobj())  # zlib exports no name for its decompressor type


# A JSON document (read whole, or a trace streamed) larger than this is read up to it and marked partial; the trace
# readers then keep the complete events before the cut. Overridable (FORENSICS_MAX_DOCUMENT_MB), read per file.
DEFAULT_MAX_DOCUMENT_MB = 4096


def document_budget() -> int:
    """Bytes of one document read whole, at most."""
    try:
        return max(1, int(float(os.environ.get("FORENSICS_MAX_DOCUMENT_MB", DEFAULT_MAX_DOCUMENT_MB)) * 1024**2))
    except ValueError:
        return DEFAULT_MAX_DOCUMENT_MB * 1024**2


def decompress_budget(compressed_size: int) -> int:
    """The decompressed bytes a file of this compressed size may yield before it is cut and marked partial."""
    return min(DEFAULT_MAX_DECOMPRESSED, max(DECOMPRESS_FLOOR, DECOMPRESS_RATIO * compressed_size))


class InputError(Exception):
    """A file that cannot be read the way its kind requires; the message is user-facing."""


def compression_of(head: bytes) -> str | None:
    """The compression container named by the first bytes, or None for plain files."""
    for magic, name in MAGIC.items():
        if head.startswith(magic):
            return name
    return None


def _decompressor(kind: str):
    """A fresh incremental decompressor for one member/frame of the container."""
    if kind == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if kind == "bz2":
        return bz2.BZ2Decompressor()
    if kind == "xz":
        return lzma.LZMADecompressor()
    if kind == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()
    raise InputError(f"unsupported compression {kind}")


def _before_damage(dec, data: bytes) -> bytes:
    """What a zlib decompressor yields from `data` up to the point where it fails (at most one step's worth)."""
    out: list[bytes] = []
    got = 0
    for i in range(0, len(data), 64):
        try:
            piece = dec.decompress(data[i:i + 64])
        except zlib.error:
            break
        out.append(piece)
        got += len(piece)
        if got >= _STEP:
            break
    return b"".join(out)


class _Filter(io.RawIOBase):
    """A read-only stream made from another one (decompressed, recoded); closing it closes the source."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._buf = b""  # produced, not handed out yet
        self._done = False

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._raw.close()
        super().close()


class _Decompressing(_Filter):
    """Incremental decompression that keeps every byte decoded before a truncation or corruption.

    Library file objects (gzip.GzipFile, ...) raise at a truncated end and drop the
    partly decoded block; feeding the decompressor ourselves loses nothing.
    """

    def __init__(self, raw: BinaryIO, owner: Source) -> None:
        super().__init__(raw)
        self._owner = owner
        self._dec = _decompressor(owner.compression or "")
        self._budget = min(owner.max_decompressed, decompress_budget(owner.size))
        self._left = self._budget
        self._pending = b""  # compressed input the decompressor has not consumed yet
        self._more = False  # bz2/xz: output buffered inside the decompressor

    def _step(self, data: bytes) -> bytes:
        """Decompress at most _STEP bytes; input not consumed yet stays in `_pending`."""
        dec = self._dec
        if isinstance(dec, _ZLIB):
            out = dec.decompress(data, _STEP)
            self._pending = dec.unconsumed_tail
        elif isinstance(dec, (bz2.BZ2Decompressor, lzma.LZMADecompressor)):
            out = dec.decompress(data, max_length=_STEP)
            self._pending = b""
            # Output still buffered inside the decompressor: the next step asks for it with no new input.
            self._more = not dec.needs_input and not dec.eof
        else:  # zstandard's decompressobj has no output bound: feed it small inputs (1 KiB is at most ~32 MiB out)
            out = dec.decompress(data[:1024])
            self._pending = data[1024:]
        return out

    def _fill(self) -> None:
        while not self._buf and not self._done:
            if self._pending or self._more:
                block = self._pending
            else:
                block = self._raw.read(256 * 1024)
                if not block:
                    if isinstance(self._dec, _ZLIB) and not self._dec.eof:
                        with contextlib.suppress(zlib.error):
                            # Output zlib still holds for input it has consumed (the step bound stopped it).
                            self._buf = self._dec.flush()
                            if self._buf:
                                return
                    if not getattr(self._dec, "eof", True):
                        self._owner.truncated = True
                        self._owner.problems.append(f"truncated {self._owner.compression} stream: its end is missing")
                    self._done = True
                    return
            # zlib's state before this step: a bad CRC or corrupt deflate data fails the whole step, so the
            # step is replayed in small pieces from here to keep what decodes before the damage.
            saved = self._dec.copy() if isinstance(self._dec, _ZLIB) else None
            try:
                self._more = False
                out = self._step(block)
                # Concatenated members (gzip -c a >> b, pigz, multi-frame zstd) continue in a new decompressor,
                # which gets what the ended one left over, then the input not fed yet.
                if getattr(self._dec, "eof", False) and getattr(self._dec, "unused_data", b""):
                    self._pending = self._dec.unused_data + self._pending
                    self._dec = _decompressor(self._owner.compression or "")
            except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error) as exc:
                self._owner.truncated = True
                self._owner.problems.append(f"corrupt {self._owner.compression} stream: {exc}")
                self._done = True
                if saved is not None:
                    self._buf = _before_damage(saved, block)
                return
            except Exception as exc:  # noqa: BLE001 - zstandard raises its own error type
                self._owner.truncated = True
                self._owner.problems.append(f"corrupt {self._owner.compression} stream: {exc}")
                self._done = True
                return
            self._buf = out

    def readinto(self, b) -> int:  # type: ignore[override]
        self._fill()
        if not self._buf:
            return 0
        if self._left <= 0:
            self._owner.truncated = True
            if self._budget < decompress_budget(self._owner.size):  # the run folder's budget (run_budget.py) cut it
                self._owner.problems.append(
                    f"the run folder's decompressed budget (FORENSICS_MAX_RUN_DECOMPRESSED_GB) ran out after "
                    f"{self._budget // 1024**2:,} MiB of this file: the rest was not read")
            else:
                self._owner.problems.append(
                    f"decompressed size budget reached ({self._budget // 1024**2} MiB): the rest was not read (a decompression bomb?)")
            self._done, self._buf = True, b""
            return 0
        n = min(len(b), len(self._buf), self._left)
        memoryview(b)[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        self._left -= n
        return n


# Byte-order marks of the wide Unicode encodings (UTF-32 first: its little-endian mark starts like UTF-16's).
BOMS = ((b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def wide_encoding(head: bytes) -> str | None:
    """UTF-16/32 named by a byte-order mark at the start (PowerShell's `>` writes UTF-16 logs), else None.

    The text after the mark must look wide too: a log's mostly-ASCII characters leave NUL bytes in at least
    an eighth of it (half in UTF-16, three quarters in UTF-32); bytes FF FE before plain text are just bad UTF-8."""
    for bom, name in BOMS:
        if head.startswith(bom):
            body = head[len(bom):len(bom) + 512]
            return name if body and body.count(0) * 8 >= len(body) else None
    return None


class _Recoding(_Filter):
    """A UTF-16/32 stream (with its BOM) read as UTF-8, block by block: every reader downstream sees UTF-8."""

    def __init__(self, raw: BinaryIO, encoding: str) -> None:
        import codecs

        super().__init__(raw)
        self._dec = codecs.getincrementaldecoder(encoding)("replace")

    def readinto(self, b) -> int:  # type: ignore[override]
        while not self._buf and not self._done:
            block = self._raw.read(256 * 1024)
            self._done = not block
            self._buf = self._dec.decode(block, final=self._done).encode("utf-8", "surrogatepass")
        n = min(len(b), len(self._buf))
        memoryview(b)[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


class _Capped(io.RawIOBase):
    """A stream read up to `left` bytes, no further."""

    def __init__(self, fh: BinaryIO, left: int) -> None:
        self._fh = fh
        self.left = left

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        block = self._fh.read(self.left if n is None or n < 0 else min(n, self.left))
        self.left -= len(block)
        return block


@dataclass
class Source:
    """One regular file of the run folder, opened read-only and decompressed on the fly."""

    path: Path
    rel: str
    size: int
    compression: str | None = None
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
    problems: list[str] = field(default_factory=list)
    truncated: bool = False
    recoded: bool = False  # read from UTF-16/32 as UTF-8: its size is no longer the file's

    @property
    def name(self) -> str:
        """The file name without its compression suffix (`rank0.log.gz` -> `rank0.log`)."""
        base = self.path.name
        for suffix in (".gz", ".zst", ".zstd", ".bz2", ".xz"):
            if self.compression and base.endswith(suffix):
                return base[: -len(suffix)]
        return base

    def open(self) -> BinaryIO:
        """A fresh binary stream of the decompressed content (never opened for writing)."""
        # Problems describe the latest full read, not the sniffing peek before it.
        self.problems.clear()
        self.truncated = False
        raw = open(self.path, "rb", buffering=1024 * 1024)  # noqa: SIM115 - caller closes
        fh = raw if self.compression is None else io.BufferedReader(_Decompressing(raw, self), 1024 * 1024)
        wide = wide_encoding(fh.peek(516)[:516])
        if wide is None:
            return fh
        self.recoded = True
        return io.BufferedReader(_Recoding(fh, wide), 1024 * 1024)

    def head(self, n: int = 65536) -> bytes:
        """The first `n` decompressed bytes."""
        with self.open() as fh:
            return fh.read(n)

    def _cut_at_budget(self, fh: BinaryIO, budget: int) -> None:
        """Mark the content cut when more than `budget` bytes remain unread after it."""
        if fh.read(1):
            self.truncated = True
            self.problems.append(f"document larger than the {budget // 1024**2} MiB budget (FORENSICS_MAX_DOCUMENT_MB): "
                                 "read up to it")

    def read_all(self) -> bytes:
        """The whole decompressed content (for formats that need it: JSON documents), up to the document budget."""
        budget = document_budget()
        with self.open() as fh:
            data = fh.read(budget)
            self._cut_at_budget(fh, budget)
            return data

    @contextlib.contextmanager
    def document(self) -> Iterator[BinaryIO]:
        """The decompressed content as a stream that ends at the document budget, for readers that stream one
        JSON document (traces): a content cut by the budget is marked when the reader has read up to it."""
        budget = document_budget()
        with self.open() as fh:
            capped = _Capped(fh, budget)
            yield capped
            if capped.left == 0:
                self._cut_at_budget(fh, budget)

    def chunks(self, size: int = 32 * 1024 * 1024) -> Iterator[bytes]:
        """Decompressed content in blocks of about `size` bytes."""
        with self.open() as fh:
            while True:
                block = fh.read(size)
                if not block:
                    return
                yield block


def make_source(path: Path, rel: str, st: os.stat_result | None = None) -> Source:
    """A Source for a regular file (`st`: its stat when the caller has it), with its compression sniffed from
    the magic bytes."""
    st = st if st is not None else os.stat(path)
    with open(path, "rb") as fh:
        magic = fh.read(8)
    return Source(path=path, rel=rel, size=st.st_size, compression=compression_of(magic))

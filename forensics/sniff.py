"""Decide a file's kind from its content (the first decompressed bytes), not its name."""

from __future__ import annotations

from dataclasses import dataclass

from forensics.parsers.base import Parser, Sniffed, registry
from forensics.sources import Source

HEAD_BYTES = 65536
PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")


def archive_kind(head: bytes) -> str | None:
    """`zip` or `tar` when the (decompressed) first bytes are an archive's, else None."""
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head[257:262] == b"ustar":  # POSIX and GNU tar headers
        return "tar"
    return None


@dataclass
class Verdict:
    """What discovery decided about one file."""

    kind: str
    parser: Parser | None
    sniffed: Sniffed | None
    reason: str | None = None  # why no parser was chosen


def sniff_source(src: Source, head: bytes | None = None) -> Verdict:
    """Choose the parser whose sniff scores the file highest; explain when none does (`head`: the first bytes,
    when the caller has read them already)."""
    head = src.head(HEAD_BYTES) if head is None else head[:HEAD_BYTES]
    sn = Sniffed(head=head, text=head.decode("utf-8", errors="replace"), name=src.name, rel=src.rel)
    if not head:
        if src.problems:
            return Verdict("unknown", None, sn, "; ".join(src.problems))
        return Verdict("empty", None, sn, "empty file")
    archive = archive_kind(head)
    if archive:
        return Verdict("archive", None, sn, f"archive ({archive}): its members are not read in place; extract it, "
                                            "or give the archive itself to `forensics scan`")
    if head.startswith(PICKLE_MAGIC):
        # Memory snapshots (torch.cuda.memory._dump_snapshot) are pickles; loading one runs code.
        return Verdict("pickle", None, sn, "Python pickle (e.g. a CUDA memory snapshot): never loaded, pickles can execute code")
    best: tuple[int, Parser] | None = None
    for parser in registry().values():
        try:
            score = parser.sniff(sn)
        except Exception:  # noqa: BLE001 - one parser's bad sniff must not stop discovery
            score = 0
        if score > 0 and (best is None or score > best[0]):
            best = (score, parser)
    if best is None:
        return Verdict("binary", None, sn, "binary or unknown content: no parser recognises it")
    return Verdict(best[1].kind, best[1], sn)

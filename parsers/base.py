"""The parser contract: how a parser claims a file (sniff) and what it returns (ParseResult)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from forensics.sources import Source


@dataclass
class ParseResult:
    """Evidence tables produced from one file, and how completely the file was read."""

    tables: dict[str, pa.Table] = field(default_factory=dict)
    status: str = "parsed"  # parsed | partial | unrecognized | failed
    error: str | None = None
    # Run-level facts a file reveals (world size, device properties, ...).
    meta: dict = field(default_factory=dict)
    # A rank the file as a whole belongs to (from its name or its content).
    rank: int | None = None

    def rows(self) -> int:
        """Total rows over every table."""
        return sum(t.num_rows for t in self.tables.values())


@dataclass
class Sniffed:
    """What the first bytes of a file say about it."""

    head: bytes
    text: str  # head decoded as UTF-8 with replacement
    name: str  # file name without compression suffix
    rel: str  # path relative to the run folder


@dataclass(frozen=True)
class Parser:
    """One input family: `sniff` scores a file (0 = not mine), `parse` reads it."""

    kind: str
    sniff: Callable[[Sniffed], int]
    parse: Callable[[Source, Sniffed], ParseResult]
    description: str = ""
    # Its files are scanned for error events: an empty events table from them means "nothing found".
    event_source: bool = False
    # Its rows' `line` is a physical line of the file (traces number events instead), so a row's
    # real text can be quoted from the file.
    quotable: bool = False


_REGISTRY: dict[str, Parser] = {}


def register(parser: Parser) -> Parser:
    """Add a parser to the registry (module import time)."""
    _REGISTRY[parser.kind] = parser
    return parser


def registry() -> dict[str, Parser]:
    """Every parser of the package: each module that defines a module-level `PARSER`."""
    if not _REGISTRY:
        import importlib
        import pkgutil

        import forensics.parsers as parsers

        for info in sorted(pkgutil.iter_modules(parsers.__path__), key=lambda m: m.name):
            module = importlib.import_module(f"forensics.parsers.{info.name}")
            parser = getattr(module, "PARSER", None)
            if isinstance(parser, Parser):
                register(parser)
    return dict(_REGISTRY)


def kinds_where(flag: str) -> tuple[str, ...]:
    """The kinds of the parsers that declare `flag` (`event_source`, `quotable`), sorted."""
    return tuple(sorted(kind for kind, p in registry().items() if getattr(p, flag)))

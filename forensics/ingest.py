"""Ingest a run folder: discover files, run each file's parser, gather the evidence tables."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from forensics import tables as T
from forensics.discover import discover
from forensics.sniff import sniff_source
from parsers.base import ParseResult


@dataclass
class Run:
    """Everything parsed from one run folder."""

    root: Path
    tables: dict[str, pa.Table] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def table(self, name: str) -> pa.Table:
        """One evidence table (empty with its schema when nothing produced it)."""
        return self.tables.get(name) or T.empty(name)


def _file_row(rel: str, kind: str, size: int, compression: str | None, parser: str | None,
              status: str, error: str | None, rows: int, rank: int | None) -> dict:
    return {
        "file": rel, "kind": kind, "bytes": size, "compression": compression, "parser": parser,
        "status": status, "error": error, "rows": rows, "rank": rank,
    }


def parse_one(src) -> tuple[dict, ParseResult | None]:
    """Sniff and parse one file; any exception becomes a `failed` row, never a crash."""
    try:
        verdict = sniff_source(src)
    except Exception as exc:  # noqa: BLE001 - a bad file must not abort the run
        return _file_row(src.rel, "unknown", src.size, src.compression, None, "failed", f"cannot read: {exc}", 0, None), None
    if verdict.parser is None:
        return _file_row(src.rel, verdict.kind, src.size, src.compression, None, "unrecognized", verdict.reason, 0, None), None
    try:
        result = verdict.parser.parse(src, verdict.sniffed)
    except Exception as exc:  # noqa: BLE001
        where = traceback.extract_tb(exc.__traceback__)[-1]
        msg = f"{type(exc).__name__}: {exc} (in {Path(where.filename).name}:{where.lineno})"
        return _file_row(src.rel, verdict.kind, src.size, src.compression, verdict.parser.kind, "failed", msg, 0, None), None
    if src.truncated and result.status == "parsed":
        result.status = "partial"
    if src.problems and not result.error:
        result.error = "; ".join(src.problems)
    row = _file_row(src.rel, verdict.kind, src.size, src.compression, verdict.parser.kind,
                    result.status, result.error, result.rows(), result.rank)
    return row, result


def ingest(root: Path, progress=None) -> Run:
    """Parse every file under `root` into the evidence tables (input is only ever read)."""
    root = Path(root)
    sources, skipped = discover(root)
    rows: list[dict] = [
        _file_row(s.rel, "unknown", s.size, None, None, s.status, s.error, 0, None) for s in skipped
    ]
    if progress is not None:
        for row in rows:
            progress(row)
    parts: dict[str, list[pa.Table]] = {name: [] for name in T.EVIDENCE_TABLES}
    run = Run(root=root)
    for src in sources:
        row, result = parse_one(src)
        rows.append(row)
        if progress is not None:
            progress(row)
        if result is None:
            continue
        for name, table in result.tables.items():
            parts.setdefault(name, []).append(table)
        for key, value in result.meta.items():
            run.meta.setdefault(key, value)
    rows.sort(key=lambda r: r["file"])
    run.tables["files"] = pa.Table.from_pylist(rows, schema=T.FILES) if rows else T.empty("files")
    for name, tabs in parts.items():
        run.tables[name] = T.concat(name, tabs)
    return run

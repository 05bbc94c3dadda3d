"""Test helpers: write a small run folder and ingest it, and read the events of lines or recorded pastes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import polars as pl
from forensics.parsers import signatures
from forensics.parsers.prefixes import split_prefixes

from forensics.ingest import Run, ingest

ROOT = Path(__file__).resolve().parent.parent
# Real logs pasted in public GitHub issues; SOURCES.md names the thread of each.
ISSUES = ROOT / "tests" / "recordings" / "issues"
# Real error output recorded here (tests/recordings/events_record.sh, torch 2.13 CPU).
RECORDED = ROOT / "tests" / "recordings" / "events"


def write_run(tmp: Path, files: dict[str, str | bytes], name: str = "run") -> Path:
    """Create a run folder `tmp/name` with the given relative paths and contents."""
    root = tmp / name
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)
    return root


def ingest_text(tmp: Path, text: str, name: str = "train.log") -> Run:
    """Ingest one text log held in a string."""
    return ingest(write_run(tmp, {name: text}))


def ingest_files(tmp: Path, files: dict[str, str | bytes], mtime: float | None = None) -> Run:
    """Ingest a run folder made of `files`; `mtime` (epoch seconds) dates every file, for stamps without a year."""
    root = write_run(tmp, files)
    if mtime is not None:
        for rel in files:
            os.utime(root / rel, (mtime, mtime))
    return ingest(root)


def frame(run: Run, table: str) -> pl.DataFrame:
    """A table of the run as a polars frame with plain (non-categorical) strings."""
    df = pl.from_arrow(run.table(table))
    return df.with_columns(pl.col(pl.Categorical).cast(pl.String))


def tables(tmp: Path, files: dict[str, str | bytes], *names: str) -> tuple[pl.DataFrame, ...]:
    """The named tables of a run made of `files`, as polars frames."""
    run = ingest_files(tmp, files)
    return tuple(frame(run, name) for name in names)


def gpu_tables(tmp: Path, text: str | bytes, name: str) -> tuple[dict, pl.DataFrame, pl.DataFrame]:
    """The files row (as a dict), gpu and gpu_procs tables of a run holding one file `name`."""
    files, gpu, procs = tables(tmp, {name: text}, "files", "gpu", "gpu_procs")
    return files.row(0, named=True), gpu, procs


def log_events(tmp: Path, text: str) -> pl.DataFrame:
    """The events table of a run holding one log, `train.log`, made of `text`."""
    return frame(ingest_text(tmp, text), "events")


def events_of(*lines: str) -> pl.DataFrame:
    """Signature events of some log lines (prefix splitting included), `fields` still JSON text."""
    df = pl.DataFrame(
        {"line": list(range(1, len(lines) + 1)), "seg": [0] * len(lines), "text": list(lines)},
        schema={"line": pl.Int64, "seg": pl.Int32, "text": pl.String},
    )
    return signatures.extract(split_prefixes(df, 2024))


def only(line: str) -> dict:
    """The one event a line gives (fields decoded)."""
    ev = events_of(line)
    assert ev.height == 1, ev.select("code", "fields").rows()
    row = ev.row(0, named=True)
    row["fields"] = json.loads(row["fields"])
    return row


def ingest_issue(tmp_path: Path, name: str) -> pl.DataFrame:
    """The events of one recorded issue paste (which must parse cleanly), by line."""
    run = ingest_text(tmp_path, (ISSUES / name).read_text(encoding="utf-8"), name=name)
    files = frame(run, "files")
    assert files.get_column("status").to_list() == ["parsed"], files.rows()
    return frame(run, "events").sort("line")


def event_rows(ev: pl.DataFrame, code: str, *keys: str) -> list[tuple]:
    """(line, rank, *field values) of each event of `code`."""
    out = []
    for r in ev.filter(pl.col("code") == code).iter_rows(named=True):
        f = json.loads(r["fields"])
        out.append((r["line"], r["rank"], *(f.get(k) for k in keys)))
    return out


def event_codes(ev: pl.DataFrame) -> list[tuple[int, str]]:
    """(line, code) of every event, in line order."""
    return ev.sort("line", "code").select("line", "code").rows()


def fields_of(row: dict) -> dict:
    """The decoded `fields` of an event row."""
    return json.loads(row["fields"])


def recorded_log_events(tmp_path: Path, name: str) -> pl.DataFrame:
    """The events of one recorded log of tests/recordings/events, by line."""
    text = (RECORDED / name).read_text(encoding="utf-8")
    return frame(ingest_text(tmp_path, text, name=name), "events").sort("line")


def recorded_run_events(tmp_path: Path, folder: str) -> pl.DataFrame:
    """The events of a recorded run folder of tests/recordings/events (copied, then ingested), by file and line."""
    run = tmp_path / folder
    shutil.copytree(RECORDED / folder, run)
    return frame(ingest(run), "events").sort("file", "line")


def analyze_console(tmp: Path, lines: list[str]) -> tuple[list, pl.DataFrame]:
    """The findings above info of a run whose `console.log` holds these lines, and its events."""
    from forensics.contracts.context import Context
    from forensics.contracts.model import Severity
    from forensics.engine import analyze

    ctx = Context(ingest(write_run(tmp, {"console.log": "\n".join(lines) + "\n"})))
    return [f for f in analyze(ctx).findings if f.severity > Severity.INFO], ctx.events

"""The same log read through the usual damage of copying it around (CRLF line ends, a Markdown quote in an
issue thread, trailing spaces) gives the same events and the same metric rows as the original."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from forensics.ingest import ingest
from tests.conftest import ROOT
from tests.helpers import frame, write_run

SUFFIXES = (".log", ".txt", ".out", ".err")
# Every 12th recorded text log (sorted), so the sample is fixed and spans the recordings and samples.
LOGS = sorted(p for base in ("tests/recordings", "sample_logs") for p in (ROOT / base).rglob("*")
              if p.is_file() and p.suffix in SUFFIXES and p.stat().st_size < 200_000)[::12]

MUTATIONS = {
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "markdown_quote": lambda t: "".join("> " + line for line in t.splitlines(True)),
    "trailing_spaces": lambda t: "".join(line.rstrip("\n") + "  \n" for line in t.splitlines(True)),
}


def _summary(tmp: Path, name: str, text: str) -> tuple[list, list]:
    run = ingest(write_run(tmp, {name: text}))
    ev = frame(run, "events").select("line", "code").sort("line", "code").rows()
    # Values as text: NaN != NaN, and a NaN loss must survive the copy too.
    m = (frame(run, "metrics").select("line", "step", "name", pl.col("value").cast(pl.String))
         .sort("line", "name", "step").rows())
    return ev, m


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("log", LOGS, ids=[p.relative_to(ROOT).as_posix() for p in LOGS])
def test_pasted_copy_reads_the_same(tmp_path, log: Path, mutation: str):
    text = log.read_text(encoding="utf-8", errors="replace")
    base = _summary(tmp_path / "a", log.name, text)
    got = _summary(tmp_path / "b", log.name, MUTATIONS[mutation](text))
    assert got == base


def test_the_sample_is_not_empty():
    assert len(LOGS) >= 30

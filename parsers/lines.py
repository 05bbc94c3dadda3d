"""Stream a text file as polars frames of cleaned lines, in bounded chunks.

Each frame has `line` (1-based physical line), `seg` (0 unless a carriage return
split the physical line: tqdm redraws) and `text` (ANSI codes removed, right-stripped).
Work is per chunk, never per line: decode, split and clean are vectorised.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from forensics.sources import Source

CHUNK_BYTES = 32 * 1024 * 1024
# ANSI CSI sequences (colours, cursor moves) that terminals and rich progress bars emit.
ANSI_RE = r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07"
# A line longer than this is cut before matching; a multi-MB line is data, not a message.
MAX_LINE_CHARS = 64 * 1024
# Lines that open a multi-line block; a block that starts near a chunk's end is moved to the next chunk.
BLOCK_START = r"Traceback \(most recent call last\)|ChildFailedError|Exception raised from|NVIDIA-SMI \d|Root Cause(?: \(first observed failure\))?:"
BLOCK_LOOKAHEAD = 4000


@dataclass
class ReadStats:
    """What was odd about the bytes of one file."""

    invalid_utf8: int = 0
    nul_bytes: int = 0
    long_lines: int = 0
    lines: int = 0
    notes: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """User-facing descriptions of the anomalies seen."""
        out = []
        if self.invalid_utf8:
            out.append(f"{self.invalid_utf8} chunk(s) with invalid UTF-8 (replaced with U+FFFD)")
        if self.nul_bytes:
            out.append(f"{self.nul_bytes} NUL bytes removed")
        if self.long_lines:
            out.append(f"{self.long_lines} line(s) longer than {MAX_LINE_CHARS} characters cut for matching")
        return out + self.notes


def _decode(block: bytes, stats: ReadStats) -> str:
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        stats.invalid_utf8 += 1
        text = block.decode("utf-8", errors="replace")
    if "\x00" in text:
        stats.nul_bytes += text.count("\x00")
        text = text.replace("\x00", "")
    return text


def _frame(text: str, first_line: int, stats: ReadStats) -> pl.DataFrame:
    """Split one decoded chunk (whole lines only) into a cleaned frame."""
    lines = pl.Series("text", [text], dtype=pl.String).str.split("\n").explode()
    df = pl.DataFrame({"text": lines}).with_row_index("line", offset=first_line).with_columns(
        pl.col("line").cast(pl.Int64)
    )
    if "\x1b" in text:
        df = df.with_columns(pl.col("text").str.replace_all(ANSI_RE, ""))
    if "\r" in text:
        # CRLF endings first, then tqdm-style redraws: every `\r` starts a new segment of the same line.
        df = df.with_columns(pl.col("text").str.strip_suffix("\r").str.split("\r")).explode("text")
        df = df.with_columns(pl.int_range(pl.len()).over("line").cast(pl.Int32).alias("seg"))
        df = df.filter((pl.col("text").str.len_bytes() > 0) | (pl.col("seg") == 0))
    else:
        df = df.with_columns(pl.lit(0, pl.Int32).alias("seg"))
    long = df.get_column("text").str.len_bytes() > MAX_LINE_CHARS
    n_long = int(long.sum())
    if n_long:
        stats.long_lines += n_long
        df = df.with_columns(pl.col("text").str.slice(0, MAX_LINE_CHARS))
    return df.with_columns(pl.col("text").str.strip_chars_end()).select("line", "seg", "text")


def iter_frames(src: Source, chunk_bytes: int = CHUNK_BYTES, stats: ReadStats | None = None) -> Iterator[pl.DataFrame]:
    """Yield cleaned line frames covering the whole file, each ending on a line boundary.

    A multi-line block (traceback, launcher report, nvidia-smi table) that starts in the
    last lines of a chunk is held back and starts the next frame, so it is never split.
    """
    stats = stats if stats is not None else ReadStats()
    pending = b""
    next_line = 1
    held: pl.DataFrame | None = None
    for block in src.chunks(chunk_bytes):
        data = pending + block
        cut = data.rfind(b"\n")
        if cut < 0:
            pending = data
            continue
        pending = data[cut + 1 :]
        text = _decode(data[:cut], stats)
        df = _frame(text, next_line, stats)
        next_line += text.count("\n") + 1
        if held is not None:
            df = pl.concat([held, df])
            held = None
        df, held = _hold_back_open_block(df)
        if df.height:
            stats.lines = next_line - 1
            yield df
    tail = []
    if held is not None:
        tail.append(held)
    if pending:
        tail.append(_frame(_decode(pending, stats), next_line, stats))
        next_line += 1
    stats.lines = next_line - 1
    if tail:
        yield pl.concat(tail)


def _hold_back_open_block(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    n = df.height
    if n <= BLOCK_LOOKAHEAD:
        return df, None
    tail = df.slice(n - BLOCK_LOOKAHEAD)
    starts = tail.with_row_index("i").filter(pl.col("text").str.contains(BLOCK_START)).get_column("i")
    if starts.len() == 0:
        return df, None
    at = n - BLOCK_LOOKAHEAD + int(starts[0])
    return df.slice(0, at), df.slice(at)

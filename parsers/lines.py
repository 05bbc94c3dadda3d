"""Stream a text file as polars frames of cleaned lines, in bounded chunks.

Each frame has `line` (1-based physical line), `seg` (0 unless a carriage return
split the physical line: tqdm redraws) and `text` (ANSI codes removed, right-stripped).
Work is per chunk, never per line: decode, split and clean are vectorised.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from forensics.sources import Source

# Memory of a parse is about 30x the chunk size; CPU per byte is the same from 4 MB up.
CHUNK_BYTES = 8 * 1024 * 1024
# ANSI CSI sequences (colours, cursor moves) that terminals and rich progress bars emit.
ANSI_RE = r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07"
# A line longer than this is cut before matching; a multi-MB line is data, not a message.
MAX_LINE_CHARS = 64 * 1024
# A physical line longer than this many bytes is cut there and the rest of it skipped unread (the file is then
# `partial`): a log without newlines must not be held whole. Overridable (FORENSICS_MAX_LINE_MB), read per file.
DEFAULT_MAX_LINE_MB = 64


def max_line_bytes() -> int:
    """The per-line byte budget in force."""
    try:
        return max(1, int(float(os.environ.get("FORENSICS_MAX_LINE_MB", DEFAULT_MAX_LINE_MB)) * 1024 * 1024))
    except ValueError:
        return DEFAULT_MAX_LINE_MB * 1024 * 1024


# Lines that open a multi-line block; a block that starts near a chunk's end is moved to the next chunk.
BLOCK_START = r"Traceback \(most recent call last\)|ChildFailedError|Exception raised from|NVIDIA-SMI \d|Root Cause(?: \(first observed failure\))?:"
BLOCK_LOOKAHEAD = 4000
# Per-line prefixes that `\r` segments after the first inherit: whatever relays a child's output line by line writes
# its prefix once per physical line, in front of all the tqdm redraws on it. Outermost first (each optional, any
# that are there in this order; see parsers/prefixes.py for each form and its source): a collector's receive time
# (`kubectl logs --timestamps`, `docker logs -t`, GitHub Actions raw logs, a CloudWatch export's tab), docker
# compose's `name  | ` column, journald's `Feb 22 06:35:27 host env[2827]: `, then Intel MPI `-l`'s `[3] `, srun
# `--label`'s `3: `, pdsh's `host: ` (a host-shaped name only, as prefixes.HOST_SHAPE), then torchrun `--tee` /
# `[rankN]:`, Open MPI / horovod `[1,3]<stderr>:`, Ray `(RayTrainWorker pid=1193, ip=10.244.4.193) `.
_CARRY_OUTER = (
    r"(?:\s*\| )?(?:[A-Z]+ )?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})(?: \| |[ \t])"
    r"|[A-Za-z0-9][\w.-]* +\| "
    r"|(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} [\w.-]+ [^\s:\[\]]+(?:\[\d+\])?"
    r"|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2}) [\w.-]+ (?:kernel|[^\s:\[\]]+\[\d+\])): "
)
_CARRY_LABEL = r"\[\d{1,6}\] | *\d{1,5}: |(?:\d{1,3}(?:\.\d{1,3}){3}|[A-Za-z][\w.]*-[\w.-]*\d[\w.-]*): "
_CARRY_RANK = (
    r"\[(?:default|rank)\d+\]: ?"
    r"|(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})?\[(?:[\w.-]+@)?\d+(?:,[^\]]*)?\]<std(?:out|err)>: ?"
    r"|\((?:[\w.:-]+ )*(?:rank=\d+ )?pid=\d+(?:, ip=[^)\s]+)?\) "
)
CARRY_PREFIX = rf"^(?:{_CARRY_OUTER})*(?:{_CARRY_LABEL})*(?:{_CARRY_RANK})*"


@dataclass
class ReadStats:
    """What was odd about the bytes of one file."""

    invalid_utf8: int = 0
    nul_bytes: int = 0
    long_lines: int = 0
    over_budget: int = 0  # lines longer than the per-line byte budget, cut there
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
        if self.over_budget:
            out.append(f"{self.over_budget} line(s) longer than the per-line budget "
                       f"({max_line_bytes() / 1024**2:g} MiB, FORENSICS_MAX_LINE_MB): the rest of each was not read")
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


def _to_series(block: bytes, stats: ReadStats) -> pl.Series:
    """The chunk as a one-element String series; valid UTF-8 without NULs never becomes a Python str."""
    if b"\x00" not in block:
        try:
            # Arrow validates the UTF-8 in native code: no Python-level decode of a 32 MB string.
            return pl.Series("text", [block], dtype=pl.Binary).cast(pl.String)
        except (pl.exceptions.ComputeError, pl.exceptions.InvalidOperationError):
            pass
    return pl.Series("text", [_decode(block, stats)], dtype=pl.String)


def _frame(block: bytes, first_line: int, stats: ReadStats) -> tuple[pl.DataFrame, int]:
    """Split one chunk (whole lines only) into a cleaned frame; also returns its number of physical lines."""
    lines = _to_series(block, stats).str.split("\n").explode()
    n_lines = lines.len()
    df = pl.DataFrame({"text": lines}).with_row_index("line", offset=first_line).with_columns(
        pl.col("line").cast(pl.Int64)
    )
    if b"\x1b" in block:
        df = df.with_columns(pl.col("text").str.replace_all(ANSI_RE, ""))
    redrawn = None
    if b"\r" in block:
        # CRLF endings first (a Windows log has nothing else), then tqdm-style redraws.
        df = df.with_columns(pl.col("text").str.strip_suffix("\r"))
        redrawn = df.get_column("text").str.contains("\r", literal=True)
    if redrawn is not None and redrawn.any():
        # Every `\r` starts a new segment of the same line. A launcher or collector writes its prefix once per
        # physical line; each segment gets a copy. The prefix is looked for on the redrawn lines only.
        pos = redrawn.arg_true()
        found = df.get_column("text").gather(pos).str.extract(CARRY_PREFIX, 0)
        pre = pl.Series("_pre", [], pl.String).extend_constant(None, df.height).scatter(pos, found)
        df = df.with_columns(pre.replace("", None), pl.col("text").str.split("\r"))
        df = df.with_columns(pl.int_ranges(0, pl.col("text").list.len(), dtype=pl.Int32).alias("seg")).explode("text", "seg")
        df = df.filter((pl.col("text").str.len_bytes() > 0) | (pl.col("seg") == 0))
        pre = pl.col("_pre")
        add = (pl.col("seg") > 0) & pre.is_not_null() & ~pl.col("text").str.starts_with(pre.fill_null(""))
        df = df.with_columns(pl.when(add).then(pre + pl.col("text")).otherwise(pl.col("text")).alias("text"))
    else:
        df = df.with_columns(pl.lit(0, pl.Int32).alias("seg"))
    lengths = df.get_column("text").str.len_bytes()
    long = lengths > MAX_LINE_CHARS
    n_long = int(long.sum())
    if n_long:
        stats.long_lines += n_long
        # A line within one chunk but over the byte budget counts as cut too (the same whatever the chunk size).
        stats.over_budget += int((lengths > max_line_bytes()).sum())
        df = df.with_columns(pl.col("text").str.slice(0, MAX_LINE_CHARS))
    return df.with_columns(pl.col("text").str.strip_chars_end()).select("line", "seg", "text"), n_lines


def iter_frames(src: Source, chunk_bytes: int | None = None, stats: ReadStats | None = None) -> Iterator[pl.DataFrame]:
    """Yield cleaned line frames covering the whole file, each ending on a line boundary.

    A multi-line block (traceback, launcher report, nvidia-smi table) that starts in the
    last lines of a chunk is held back and starts the next frame, so it is never split.
    The frames cover the same rows, in the same order, whatever the chunk size.
    """
    stats = stats if stats is not None else ReadStats()
    chunk_bytes = chunk_bytes or CHUNK_BYTES  # read at call time, so tests can shrink it
    pending = b""
    next_line = 1
    held: pl.DataFrame | None = None
    budget = max_line_bytes()
    skipping = False  # inside a line already cut at the budget: its bytes are dropped up to its newline
    for block in src.chunks(chunk_bytes):
        # A short read is the end of the stream: nothing follows to hold a block back for.
        last = len(block) < chunk_bytes
        if skipping:
            nl = block.find(b"\n")
            if nl < 0:
                continue
            block, skipping = block[nl:], False
        data = pending + block if pending else block
        cut = data.rfind(b"\n")
        if cut < 0:
            pending = data
            if len(pending) > budget:
                pending, skipping = pending[:budget], True
                stats.over_budget += 1
            continue
        pending = data[cut + 1 :]
        df, n_lines = _frame(data[:cut], next_line, stats)
        next_line += n_lines
        if held is not None:
            df = pl.concat([held, df])
        if last:
            held = df  # goes out below, with the unterminated last line if there is one
            break
        df, held = _hold_back_open_block(df)
        if df.height:
            stats.lines = next_line - 1
            yield df
    tail = [held] if held is not None and held.height else []
    if pending:
        tail.append(_frame(pending, next_line, stats)[0])
        next_line += 1
    stats.lines = next_line - 1
    if tail:
        yield pl.concat(tail)


def _hold_back_open_block(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Split off the frame's tail from the first block opener among its last BLOCK_LOOKAHEAD lines.

    A frame shorter than the look-ahead (small chunks, very long lines) is searched whole; when
    the opener is its first line the whole frame is held and grows with the next chunk, until
    the opener is more than BLOCK_LOOKAHEAD lines from the end (so what is held stays bounded).
    """
    n = df.height
    first = max(0, n - BLOCK_LOOKAHEAD)
    tail = df.slice(first)
    starts = tail.with_row_index("i").filter(pl.col("text").str.contains(BLOCK_START)).get_column("i")
    if starts.len() == 0:
        return df, None
    at = first + int(starts[0])
    return df.slice(0, at), df.slice(at)

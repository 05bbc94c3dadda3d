"""How fast can any polars text-log parser be? A hand-minimal Megatron reader against grep and ours.

Usage: python bench/ingest_floor.py [--size-mb 250] [--repeat 3]

On one Megatron rank log of the ingest bench's generated run folder (bench/ingest_bench.py), in one
process, single-threaded (POLARS_MAX_THREADS=1), CPU seconds, best of --repeat:

1. `grep -E -c -f` with the signature table's regexes in the C locale (as in ingest_bench.py);
2. a hand-minimal reader that knows the file holds only `[defaultN]: [ts] iteration ...` lines: split
   into lines, one anchored capture of rank/stamp/rest, keep the iteration lines, parse the stamp,
   split the ` | ` fields, cast names to categories and values to float64, hand the rows to Arrow.
   It reads nothing else (no signatures, tracebacks, other formats, steps of other lines, tqdm bars);
   it is the lower bound of a columnar parser of this file, not a parser;
3. forensics' own text-log parser (parsers/textlog.parse) on the same file.

It prints both as ratios to grep: the floor shows how much of the 3x budget of issue 2 a polars
pipeline spends before it reads a single signature.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["POLARS_MAX_THREADS"] = "1"

import polars as pl  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import ingest_bench  # noqa: E402

CHUNK = 8 * 1024 * 1024
PREFIX = r"^\[default(?<rank>\d+)\]: \[(?<ts>[^\]]+)\] (?<rest>.*)$"


def minimal_megatron(data: bytes) -> int:
    """Rows (rank, ts, name, value) of every Megatron iteration line: the least work a columnar reader does."""
    rows = 0
    pos = 0
    while pos < len(data):
        end = data.rfind(b"\n", pos, pos + CHUNK) if pos + CHUNK < len(data) else len(data)
        block = data[pos:end]
        pos = end + 1
        lines = pl.Series("text", [block], dtype=pl.Binary).cast(pl.String).str.split("\n").explode()
        df = pl.DataFrame({"text": lines}).with_row_index("line")
        g = df.with_columns(pl.col("text").str.extract_groups(PREFIX).alias("g")).unnest("g")
        it = g.filter(pl.col("rest").str.starts_with("iteration")).with_columns(
            pl.col("ts").str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False), pl.col("rank").cast(pl.Int32))
        kv = it.select("line", "rank", "ts", pl.col("rest").str.split(" | ").alias("kv")).explode("kv")
        kv = kv.with_columns(pl.col("kv").str.splitn(": ", 2).struct.rename_fields(["key", "val"])).unnest("kv")
        kv = kv.with_columns(pl.col("key").cast(pl.Categorical), pl.col("val").str.strip_chars().cast(pl.Float64, strict=False))
        rows += kv.to_arrow().num_rows
    return rows


def ours(path: Path) -> int:
    """forensics' text-log parser on one file; its metric rows."""
    from forensics.parsers import textlog

    from forensics.sources import make_source

    return textlog.parse(make_source(path, path.name), None).tables["metrics"].num_rows


def grep_cpu(path: Path, patterns: list[str]) -> float:
    """CPU seconds of `grep -E -c -f` in the C locale over one file."""
    pfile = ingest_bench.pattern_file(patterns)
    before = os.times()
    subprocess.run(["grep", "-E", "-c", "-f", pfile, str(path)], capture_output=True, env=dict(os.environ, LC_ALL="C"), check=False)
    after = os.times()
    os.unlink(pfile)
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def best_cpu(fn, repeat: int) -> tuple[float, object]:
    """Least CPU seconds of `fn()` in this process over `repeat` calls, and its last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=250, help="size of the generated run folder whose Megatron log is read")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "forensics-bench")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    base = ingest_bench.generate(args.size_mb, args.workdir)
    path = base / "run" / "logs" / "rank2.log"  # a Megatron family rank, not compressed
    data = path.read_bytes()
    mib = len(data) / 2**20
    patterns, _ = ingest_bench.grep_patterns()
    g = min(grep_cpu(path, patterns) for _ in range(args.repeat))
    f_s, f_rows = best_cpu(lambda: minimal_megatron(data), args.repeat)
    o_s, o_rows = best_cpu(lambda: ours(path), args.repeat)
    print(f"{path} ({mib:.0f} MiB, Megatron iteration lines behind [defaultN]:), CPU seconds, best of {args.repeat}")
    print(f"grep -E -c -f (LC_ALL=C)  : {g:6.2f} s  ({mib / g:5.0f} MiB/s)")
    print(f"hand-minimal polars reader: {f_s:6.2f} s  ({mib / f_s:5.0f} MiB/s)  {f_rows} rows  = {f_s / g:.2f}x grep")
    print(f"forensics textlog.parse   : {o_s:6.2f} s  ({mib / o_s:5.0f} MiB/s)  {o_rows} rows  = {o_s / g:.2f}x grep")
    return 0


if __name__ == "__main__":
    sys.exit(main())

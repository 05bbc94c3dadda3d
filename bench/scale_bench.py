"""Scale benchmark: the measures of the scale issue, in one run, at several sizes (250 MB, 1 GB, 10 GB by default).

Usage: python bench/scale_bench.py [--size-mb 250 --size-mb 1000 --size-mb 10000] [--delete-from-mb 5000]

For each size, on the run folder bench/ingest_bench.py generates (8 ranks, mixed trainer formats, some files
gzipped; its decompressed twin beside it for grep), one after the other so all see the same machine load:

1. `grep -E -c -f <signature table>` in the C locale over the decompressed bytes (the baseline: the fastest
   honest scan of the same bytes), its wall and CPU time;
2. `ingest()` in a fresh child interpreter (bench/ingest_bench.run_ingest): wall and CPU time (its workers
   included), so cores used = CPU / wall, and the peak RSS of it and its workers while it ingests;
3. `analyze` on the run's cached Parquet tables in a fresh child (bench/analyze_bench.child): wall time and peak RSS.

It prints one table: ingest/grep (wall and CPU), analyze-cached/ingest, both peak RSS figures and cores used,
with the load average before and after each size. Folders of --delete-from-mb or more are generated on the fly
and deleted after (a 10 GB folder and its twin take about 20 GB of disk). Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import analyze_bench  # noqa: E402 - the cached-analysis child
import ingest_bench  # noqa: E402 - the generator, grep and the ingest child

MB = 1024 * 1024


def measure(size_mb: int, workdir: Path, patterns: list[str]) -> dict:
    """Every figure for one size."""
    base = ingest_bench.generate(size_mb, workdir)
    run, plain = base / "run", base / "plain"
    nbytes = json.loads((base / "params.json").read_text())["decompressed_bytes"]
    load0 = os.getloadavg()[0]
    grep_s, _ = ingest_bench.run_grep(plain, patterns, "C")
    grep_cpu = ingest_bench.GREP_CPU["C"]
    ing = ingest_bench.run_ingest(run)
    cache_dir = base / f"scale-cache-{os.getuid()}"
    analyze_bench.ensure_cache(run, cache_dir)
    ana = analyze_bench.child(REPO, run, cache_dir, "analyze")
    return {"size_mb": size_mb, "mib": nbytes / MB, "grep_s": grep_s, "grep_cpu_s": grep_cpu, "ingest_s": ing["ingest_s"],
            "ingest_cpu_s": ing["cpu_s"], "ingest_rss_mib": ing["rss_tree_kib"] / 1024, "analyze_s": ana["wall_s"],
            "analyze_cpu_s": ana["cpu_s"], "analyze_rss_mib": ana["rss_mib"], "load": (load0, os.getloadavg()[0]),
            "base": base}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, action="append", help="decompressed size of a run folder (repeatable; default 250, 1000, 10000)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "forensics-bench")
    ap.add_argument("--delete-from-mb", type=int, default=5000, help="delete generated folders of this size or more after measuring")
    args = ap.parse_args()
    sizes = sorted(args.size_mb or [250, 1000, 10000])
    args.workdir.mkdir(parents=True, exist_ok=True)
    patterns, _ = ingest_bench.grep_patterns()
    print(f"cores: {os.cpu_count()}  {ingest_bench._uptime()}  grep -E with {len(patterns)} signature patterns, LC_ALL=C")
    rows = []
    for size in sizes:
        r = measure(size, args.workdir, patterns)
        rows.append(r)
        print(f"{size} MB measured (load average {r['load'][0]:.1f} -> {r['load'][1]:.1f})", flush=True)
        if size >= args.delete_from_mb:
            shutil.rmtree(r["base"], ignore_errors=True)
    head = ("size", "MiB", "ingest/grep wall", "ingest/grep CPU", "cores used", "ingest RSS MiB", "analyze/ingest", "analyze RSS MiB", "load")
    print("\n" + " | ".join(head))
    for r in rows:
        print(" | ".join([
            f"{r['size_mb']} MB", f"{r['mib']:.0f}", f"{r['ingest_s'] / r['grep_s']:.1f}x", f"{r['ingest_cpu_s'] / max(r['grep_cpu_s'], 1e-9):.1f}x",
            f"{r['ingest_cpu_s'] / r['ingest_s']:.2f}", f"{r['ingest_rss_mib']:.0f}", f"{r['analyze_s'] / r['ingest_s']:.2f}x",
            f"{r['analyze_rss_mib']:.0f}", f"{r['load'][0]:.1f}-{r['load'][1]:.1f}"]))
    print("targets (issue): ingest/grep <= 3x; cores used >= 1.8 on 2 cores; analyze/ingest <= 0.25x; both RSS <= 1024 MiB at any size")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

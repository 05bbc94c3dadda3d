"""Report benchmark: `forensics report` against `forensics analyze` on a generated run whose tables are cached.

Usage: python bench/report_bench.py [--size-mb 250] [--repeat 1] [--cache-dir DIR]

The run folder and its Parquet cache come from bench/analyze_bench.py (bench/ingest_bench.py's generator,
generated once under /tmp/forensics-bench and ingested once). Each contender runs in a fresh child
interpreter, one after the other, so both see the same machine load:

1. `analyze`: cache.load + Context + engine.analyze + the JSON report (what `forensics analyze` does);
2. `report`: the same analysis, then the postmortem (facts, decimated series, matplotlib SVG) and the HTML page.

It prints wall time, CPU time and peak RSS of each, the ratios report/analyze, and the page size. The issue's
targets: report at most 1.2x analyze, the page under 3 MB, peak RSS within the analyze figure. Not run in CI.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import analyze_bench  # noqa: E402 - the generated run and its cache live there
import ingest_bench  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=250, help="decompressed size of the generated run folder")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "forensics-bench")
    ap.add_argument("--repeat", type=int, default=1, help="run each contender this many times, keep the least CPU")
    ap.add_argument("--cache-dir", type=Path, help="the run's Parquet cache (default: next to the run; ingested once)")
    args = ap.parse_args()
    base = ingest_bench.generate(args.size_mb, args.workdir)
    run = base / "run"
    cache_dir = args.cache_dir or base / f"analyze-cache-{os.getuid()}"
    analyze_bench.ensure_cache(run, cache_dir)
    print(f"run {run}; cache {cache_dir}; cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    ana = analyze_bench.best([analyze_bench.child(REPO, run, cache_dir, "analyze", str(base / "analyze.json")) for _ in range(args.repeat)])
    rep = analyze_bench.best([analyze_bench.child(REPO, run, cache_dir, "report", str(base / "postmortem.html")) for _ in range(args.repeat)])
    ana["bytes"] = (base / "analyze.json").stat().st_size
    rep["bytes"] = (base / "postmortem.html").stat().st_size
    for label, r in (("analyze (json)", ana), ("report (html)", rep)):
        print(f"{label:<16} wall {r['wall_s']:7.2f} s  cpu {r['cpu_s']:7.2f} s  peak RSS {r['rss_mib']:7.0f} MiB  output {r['bytes'] / 1e6:6.2f} MB")
    print(f"RESULT {args.size_mb} MB: report/analyze = {rep['cpu_s'] / ana['cpu_s']:.2f}x CPU, {rep['wall_s'] / ana['wall_s']:.2f}x wall, "
          f"{rep['rss_mib'] / ana['rss_mib']:.2f}x peak RSS; page {rep['bytes'] / 1e6:.2f} MB ({base / 'postmortem.html'})")
    print(f"load average now: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Report benchmark: `forensics report` against `forensics analyze` on a generated run whose tables are cached.

Usage: python bench/report_bench.py [--size-mb 250] [--repeat 1]

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
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import analyze_bench  # noqa: E402 - the generated run and its cache live there
import ingest_bench  # noqa: E402

CHILD = r"""
import json, os, resource, sys, time
repo, run, cache_dir, mode, out = sys.argv[1:6]
sys.path.insert(0, repo)
from pathlib import Path
t0, c0 = time.perf_counter(), os.times()
from forensics import cache
from forensics.contracts.context import Context
from forensics.engine import analyze
r = cache.load(Path(run), Path(cache_dir))
if r is None:
    sys.exit("cache not reused: ingest the run first")
a = analyze(Context(r))
if mode == "analyze":
    from forensics.reports import jsonout
    text = jsonout.render(a)
else:
    from forensics.reports.postmortem import html
    from forensics.reports.postmortem.build import build
    text = html.render(build(a))
c1 = os.times()
Path(out).write_text(text)
res = {"wall_s": time.perf_counter() - t0, "cpu_s": (c1.user - c0.user) + (c1.system - c0.system),
       "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "bytes": len(text.encode())}
print("RESULT " + json.dumps(res))
"""


def child(run: Path, cache_dir: Path, mode: str, out: Path) -> dict:
    """One contender in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", CHILD, str(REPO), str(run), str(cache_dir), mode, str(out)],
                          capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{proc.stderr}")
    return json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT "):])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=250, help="decompressed size of the generated run folder")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "forensics-bench")
    ap.add_argument("--repeat", type=int, default=1, help="run each contender this many times, keep the least CPU")
    args = ap.parse_args()
    base = ingest_bench.generate(args.size_mb, args.workdir)
    run = base / "run"
    cache_dir = base / f"analyze-cache-{os.getuid()}"
    analyze_bench.ensure_cache(run, cache_dir)
    print(f"run {run}; cache {cache_dir}; cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    ana = analyze_bench.best([child(run, cache_dir, "analyze", base / "analyze.json") for _ in range(args.repeat)])
    rep = analyze_bench.best([child(run, cache_dir, "report", base / "postmortem.html") for _ in range(args.repeat)])
    for label, r in (("analyze (json)", ana), ("report (html)", rep)):
        print(f"{label:<16} wall {r['wall_s']:7.2f} s  cpu {r['cpu_s']:7.2f} s  peak RSS {r['rss_mib']:7.0f} MiB  output {r['bytes'] / 1e6:6.2f} MB")
    print(f"RESULT {args.size_mb} MB: report/analyze = {rep['cpu_s'] / ana['cpu_s']:.2f}x CPU, {rep['wall_s'] / ana['wall_s']:.2f}x wall, "
          f"{rep['rss_mib'] / ana['rss_mib']:.2f}x peak RSS; page {rep['bytes'] / 1e6:.2f} MB ({base / 'postmortem.html'})")
    print(f"load average now: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

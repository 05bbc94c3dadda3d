"""Analyze benchmark: `forensics analyze` on a generated run whose tables are already cached (ingest excluded).

Usage: python bench/analyze_bench.py [--size-mb 250] [--baseline-repo DIR] [--repeat 1]

The run folder comes from bench/ingest_bench.py's generator (imported, not copied; generated once
under /tmp/forensics-bench and reused) and is ingested once into a Parquet cache next to it. Each
contender then runs in a fresh child interpreter, one after the other in this process, so they see
the same machine load:

1. `read`: a bare read of the cached tables (cache.load plus a polars frame of every table): the
   floor any analysis pays;
2. `analyze`: cache.load + Context + engine.analyze + the JSON report, with this checkout's code;
3. with --baseline-repo DIR (a checkout of older code, e.g. `git worktree add /tmp/old main~3`),
   the same with that code, and the two JSON reports are compared (they must be identical).

For each it prints wall time, CPU time (user + system: steadier than wall on a shared machine)
and peak RSS (ru_maxrss of the child), and the ratios analyze/read and baseline/analyze.
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

import ingest_bench  # noqa: E402 - the generator lives there

# A child's first lines: the package of the checkout `repo` (a variable the child sets first) imported.
IMPORT_CHECKOUT = r"""
sys.path.insert(0, repo)
import importlib.util
import forensics
# pyproject maps forensics.parsers -> parsers/ and forensics.playbooks -> playbooks/: import both from this checkout,
# or an editable install of another one (its finder answers for names missing under forensics/) would serve them.
for sub in ("parsers", "playbooks"):
    spec = importlib.util.spec_from_file_location(f"forensics.{sub}", os.path.join(repo, sub, "__init__.py"),
                                                  submodule_search_locations=[os.path.join(repo, sub)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    setattr(forensics, sub, module)
"""

CHILD = r"""
import json, os, resource, sys, time
repo, run, cache_dir, mode, out = sys.argv[1:6]
""" + IMPORT_CHECKOUT + r"""
from pathlib import Path
t0, c0 = time.perf_counter(), os.times()
from forensics import cache
r = cache.load(Path(run), Path(cache_dir))
if r is None:
    sys.exit("cache not reused: ingest the run first")
if mode == "read":
    import polars as pl
    from forensics.contracts import tables as T
    frames = [pl.from_arrow(r.table(name)) for name in T.SCHEMAS]
    text = ""
else:
    from forensics.contracts.context import Context
    from forensics.engine import analyze
    a = analyze(Context(r))
    if mode == "report":  # the postmortem page on top of the same analysis (bench/report_bench.py)
        from forensics.reports.postmortem import html
        from forensics.reports.postmortem.build import build
        text = html.render(build(a))
    else:
        from forensics.reports import jsonout
        text = jsonout.render(a)
c1 = os.times()
res = {"wall_s": time.perf_counter() - t0, "cpu_s": (c1.user - c0.user) + (c1.system - c0.system),
       "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
if out != "-":
    Path(out).write_text(text)
print("RESULT " + json.dumps(res))
"""


def child(repo: Path, run: Path, cache_dir: Path, mode: str, out: str = "-") -> dict:
    """One contender in a fresh interpreter; its wall time, CPU time and peak RSS."""
    proc = subprocess.run([sys.executable, "-c", CHILD, str(repo), str(run), str(cache_dir), mode, out],
                          capture_output=True, text=True, cwd=repo)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} with {repo} failed:\n{proc.stderr}")
    return json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT "):])


def ensure_cache(run: Path, cache_dir: Path) -> None:
    """Ingest once; later runs reuse the cache while the inputs and parser code are unchanged."""
    sys.path.insert(0, str(REPO))
    from forensics import cache

    manifest = cache_dir / cache.MANIFEST
    # The fingerprint only (cache.load would read every table into this process for nothing).
    if manifest.is_file() and json.loads(manifest.read_text()).get("fingerprint") == cache.fingerprint(run):
        return
    print(f"ingesting {run} into {cache_dir} (once)")
    subprocess.run([sys.executable, "-m", "forensics", "ingest", str(run), "-o", str(cache_dir), "-q"], check=True, cwd=REPO)


def best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["cpu_s"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=int, default=250, help="decompressed size of the generated run folder")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "forensics-bench")
    ap.add_argument("--baseline-repo", type=Path, help="a checkout of other (older) code to compare with")
    ap.add_argument("--cache-dir", type=Path, help="the run's Parquet cache (default: next to the run; ingested once)")
    ap.add_argument("--repeat", type=int, default=1, help="run each contender this many times, keep the least CPU")
    args = ap.parse_args()
    base = ingest_bench.generate(args.size_mb, args.workdir)
    run = base / "run"
    cache_dir = args.cache_dir or base / f"analyze-cache-{os.getuid()}"
    ensure_cache(run, cache_dir)
    print(f"run {run}; cache {cache_dir}; cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    out_new = str(base / "analyze-new.json")
    read = best([child(REPO, run, cache_dir, "read") for _ in range(args.repeat)])
    new = best([child(REPO, run, cache_dir, "analyze", out_new) for _ in range(args.repeat)])
    rows = [("read tables", read), ("analyze", new)]
    old = None
    if args.baseline_repo:
        out_old = str(base / "analyze-baseline.json")
        old = best([child(args.baseline_repo.resolve(), run, cache_dir, "analyze", out_old) for _ in range(args.repeat)])
        rows.append(("analyze (baseline code)", old))
    for label, r in rows:
        print(f"{label:<24} wall {r['wall_s']:7.2f} s  cpu {r['cpu_s']:7.2f} s  peak RSS {r['rss_mib']:7.0f} MiB")
    print(f"RESULT {args.size_mb} MB: analyze/read = {new['cpu_s'] / read['cpu_s']:.2f}x CPU, "
          f"{new['rss_mib'] / read['rss_mib']:.2f}x peak RSS")
    if old is not None:
        same = Path(out_old).read_bytes() == Path(out_new).read_bytes()
        print(f"RESULT {args.size_mb} MB: baseline/analyze = {old['cpu_s'] / new['cpu_s']:.2f}x CPU, "
              f"{old['wall_s'] / new['wall_s']:.2f}x wall, {old['rss_mib'] / new['rss_mib']:.2f}x peak RSS; "
              f"reports {'identical' if same else 'DIFFER'}")
        if not same:
            return 1
    print(f"load average now: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

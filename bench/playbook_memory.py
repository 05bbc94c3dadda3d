"""Per-playbook memory of `analyze` on a cached run: which detector sets the peak, and how much each adds.

Usage: python bench/playbook_memory.py RUN CACHE_DIR [--repo DIR] [--any-code] [--json OUT] [--top 15]

One fresh child interpreter (the code of --repo, default this checkout) loads the cache, builds the Context
and runs engine.analyze; a thread samples the resident memory (/proc/self/statm) every few milliseconds and
each playbook's detectors are wrapped so the samples are charged to the playbook running. It prints, per
playbook, the RSS when it started, its peak and its wall time, the heaviest first, then the whole peak
(ru_maxrss), wall and CPU time and the load average. --any-code reads a cache written by other code (the
cache's fingerprint includes the code): the tables' schemas are still checked, so old and new code can be
compared on the same tables. --json writes the JSON report, to compare two checkouts byte for byte.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import analyze_bench  # noqa: E402 - the child's import of a checkout

CHILD = r"""
import json, os, resource, sys, threading, time
repo, run, cache_dir, any_code, out, by_detector = sys.argv[1:7]
""" + analyze_bench.IMPORT_CHECKOUT + r"""
from pathlib import Path
from forensics import cache
if any_code == "1":
    manifest = json.loads((Path(cache_dir) / cache.MANIFEST).read_text())
    cache.fingerprint = lambda root: manifest["fingerprint"]
PAGE = os.sysconf("SC_PAGE_SIZE")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20
current = ["load"]
stats = {}
def charge(v):
    s = stats.setdefault(current[0], {"start": v, "peak": v, "s": 0.0})
    s["peak"] = max(s["peak"], v)
stop = threading.Event()
def sample():
    while not stop.is_set():
        charge(rss())
        time.sleep(0.005)
threading.Thread(target=sample, daemon=True).start()
t0, c0 = time.perf_counter(), os.times()
r = cache.load(Path(run), Path(cache_dir))
if r is None:
    sys.exit("cache not reused (stale or damaged): ingest the run first, or pass --any-code")
from forensics.contracts.context import Context
from forensics.playbooks.base import registry
def wrap(pid, fn):
    def run_one(ctx, th):
        current[0] = pid
        charge(rss())
        t = time.perf_counter()
        try:
            return fn(ctx, th)
        finally:
            charge(rss())
            stats[pid]["s"] += time.perf_counter() - t
            current[0] = "engine"
    return run_one
for pid, pb in registry().items():
    # With --detectors, each detector function is charged on its own (module.function), else its playbook.
    name = lambda fn: f"{pid}:{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}" if by_detector == "1" else pid
    object.__setattr__(pb, "detectors", tuple((wrap(name(fn), fn), tabs) for fn, tabs in pb.detectors))
from forensics.engine import analyze
ctx = Context(r)
current[0] = "engine"
a = analyze(ctx)
from forensics.reports import jsonout
text = jsonout.render(a)
stop.set()
c1 = os.times()
res = {"wall_s": time.perf_counter() - t0, "cpu_s": (c1.user - c0.user) + (c1.system - c0.system),
       "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "playbooks": stats}
if out != "-":
    Path(out).write_text(text)
print("RESULT " + json.dumps(res))
"""


def child(repo: Path, run: Path, cache_dir: Path, any_code: bool, out: str = "-", by_detector: bool = False) -> dict:
    """One analysis in a fresh interpreter: whole peak RSS, wall and CPU time, and per-playbook figures."""
    proc = subprocess.run([sys.executable, "-c", CHILD, str(repo), str(run), str(cache_dir), "1" if any_code else "0", out,
                           "1" if by_detector else "0"],
                          capture_output=True, text=True, cwd=repo)
    if proc.returncode != 0:
        raise RuntimeError(f"analyze with {repo} failed:\n{proc.stderr}")
    return json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT "):])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("cache_dir", type=Path)
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose code analyzes (default: this one)")
    ap.add_argument("--any-code", action="store_true", help="read a cache another code version wrote")
    ap.add_argument("--json", default="-", help="write the JSON report here")
    ap.add_argument("--top", type=int, default=15, help="playbooks to list, by peak")
    ap.add_argument("--detectors", action="store_true", help="one line per detector function, not per playbook")
    ap.add_argument("--in-order", action="store_true", help="list every playbook in the order they ran")
    args = ap.parse_args()
    load0 = os.getloadavg()[0]
    r = child(args.repo.resolve(), args.run.resolve(), args.cache_dir.resolve(), args.any_code, args.json, args.detectors)
    rows = list(r["playbooks"].items())
    if not args.in_order:
        rows = sorted(rows, key=lambda kv: -kv[1]["peak"])[:args.top]
    print(f"{'playbook':<50} {'start MiB':>10} {'peak MiB':>9} {'adds':>6} {'wall s':>7}")
    for pid, s in rows:
        print(f"{pid:<50} {s['start']:10.0f} {s['peak']:9.0f} {s['peak'] - s['start']:6.0f} {s['s']:7.2f}")
    print(f"peak RSS {r['rss_mib']:.0f} MiB, wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s; "
          f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

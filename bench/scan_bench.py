"""Scan benchmark: throughput of `forensics scan` with 1 and 2 workers (and Ray), against a shell loop of `forensics analyze`.

Usage: python bench/scan_bench.py [--runs 1000] [--loop-runs 40] [--ray]

The archive is ROOT/job-NNNN copies of the sample_logs/ run folders (round robin), generated once under
/tmp/forensics-scan-bench and reused. Each contender runs as a child process from a fresh output folder:

1. `scan -j1`, 2. `scan -j2`, 3. with --ray, `scan -j2 --executor ray` (a local Ray with 2 CPUs),
4. `rescan`: `scan -j2` again over the finished output (everything unchanged: the resume path),
5. `analyze loop`: `forensics analyze --no-cache --format json` once per run for the first --loop-runs runs
   (what a shell loop over the archive does), its rate extrapolated.

Prints runs/min, wall seconds, the peak RSS of the whole process tree (summed over the scan and its
workers, sampled every 0.1 s) and the ratios the issue asks for. Not run in CI.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_logs"
BASE = Path("/tmp/forensics-scan-bench")


def make_archive(n: int) -> Path:
    """ROOT with n run folders copied from the samples (reused when already complete)."""
    root = BASE / f"archive-{n}"
    marker = root / ".complete"
    if marker.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    samples = sorted(p.parent for p in SAMPLES.glob("*/*/expect.toml"))  # sample_logs/<playbook-id>/<case>/
    for i in range(n):
        shutil.copytree(samples[i % len(samples)], root / f"job-{i:04d}")
    marker.write_text("")
    return root


def _tree_rss_mib(pid: int) -> float:
    """Resident memory of a process and all its descendants, in MiB."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/statm") as fh:
                rss[int(entry)] = int(fh.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total * os.sysconf("SC_PAGE_SIZE") / 2**20


def timed(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak tree RSS (MiB) and CPU seconds (of the command and the workers it waited for)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_mib(proc.pid))
        time.sleep(0.1)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return time.perf_counter() - t0, peak, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--loop-runs", type=int, default=40, help="runs analysed one by one for the shell-loop rate")
    ap.add_argument("--ray", action="store_true", help="also time --executor ray (needs the ray extra)")
    args = ap.parse_args()
    root = make_archive(args.runs)
    forensics = [sys.executable, "-m", "forensics"]
    results: dict[str, tuple[float, float, int]] = {}

    def scan(name: str, jobs: int, *extra: str, fresh: bool = True) -> None:
        out = BASE / f"out-{name}"
        if fresh:
            shutil.rmtree(out, ignore_errors=True)
        wall, rss, cpu = timed([*forensics, "scan", str(root), "-o", str(out), "--jobs", str(jobs), "--format", "json", *extra])
        results[name] = (wall, rss, args.runs)
        # CPU per run does not depend on the machine's load (Ray's workers are not our children: not counted).
        print(f"{name:<14} {args.runs:>6} runs {wall:>8.1f} s {args.runs / wall * 60:>8.0f} runs/min  peak RSS {rss:>6.0f} MiB"
              f"  CPU {cpu / args.runs * 1000:>5.0f} ms/run", flush=True)

    scan("scan -j1", 1)
    scan("scan -j2", 2)
    if args.ray:
        scan("scan ray -j2", 2, "--executor", "ray")
    out = BASE / "out-scan -j2"
    wall, rss, _ = timed([*forensics, "scan", str(root), "-o", str(out), "--jobs", "2", "--format", "json"])
    results["rescan"] = (wall, rss, args.runs)
    print(f"{'rescan':<14} {args.runs:>6} runs {wall:>8.1f} s (everything unchanged)  peak RSS {rss:>6.0f} MiB", flush=True)

    runs = sorted(p for p in root.iterdir() if p.is_dir())[: args.loop_runs]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    for run in runs:
        subprocess.run([*forensics, "analyze", str(run), "--no-cache", "--format", "json"], stdout=subprocess.DEVNULL, check=False)
    loop = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    print(f"{'analyze loop':<14} {len(runs):>6} runs {loop:>8.1f} s {len(runs) / loop * 60:>8.0f} runs/min"
          f"                     CPU {cpu / len(runs) * 1000:>5.0f} ms/run", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (others' work skews every rate)")

    rate = {k: v[2] / v[0] * 60 for k, v in results.items()}
    loop_rate = len(runs) / loop * 60
    print()
    print(f"scan -j2 / scan -j1 rate:       {rate['scan -j2'] / rate['scan -j1']:.2f}x  (issue: >= 1.8x)")
    print(f"scan -j2 runs/min:              {rate['scan -j2']:.0f}  (issue: >= 300)")
    print(f"scan -j1 / analyze loop rate:   {rate['scan -j1'] / loop_rate:.2f}x")
    print(f"scan -j2 / analyze loop rate:   {rate['scan -j2'] / loop_rate:.2f}x")
    if "scan ray -j2" in results:
        print(f"ray time / local time (-j2):    {results['scan ray -j2'][0] / results['scan -j2'][0]:.2f}x  (issue: <= 1.5x)")
    print(f"rescan of {args.runs} unchanged runs: {results['rescan'][0]:.1f} s  (issue: < 10 s)")
    print(f"peak RSS (tree): {max(v[1] for v in results.values()):.0f} MiB  (issue: < 2048)")


if __name__ == "__main__":
    main()

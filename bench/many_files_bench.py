"""Many tiny files: ingest and analyze of a folder of N small rank logs, timed phase by phase.

Usage: python bench/many_files_bench.py [--files 20000] [--layout shared|per-rank] [--profile ingest|analyze]

Generates (in a temporary folder, removed afterwards) N tiny text logs in one folder, each a few
lines a trainer writes (a step line, a warning), one of them ending in a CUDA OOM: with `--layout shared`
(the default) the step lines name one of 8 ranks (`[rank3]: step ...`); with `per-rank` every file is
a rank of its own (`rank123.log` with bare step lines), so every metric is N one-point series. Then, in this
process: discovery alone, sniffing alone, `ingest()`, and `analyze()` of the ingested run, each
timed; the baseline printed first is reading every file's bytes once (the floor any ingest pays),
and every phase is printed as a ratio to it. Target (issue 17): ingest and analyze each < 60 s for
20,000 files on the development machine.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.10 GiB of which 1.06 GiB is free.")


def generate(root: Path, n: int, layout: str = "shared") -> None:
    for i in range(n):
        step = f"step {i} loss 2.{i % 97:02d} lr 0.0001"
        lines = [f"[rank{i % 8}]: {step}" if layout == "shared" else step, "UserWarning: TypedStorage is deprecated."]
        if i == n - 1:
            lines.append(OOM)
        name = f"worker-{i:06d}.log" if layout == "shared" else f"rank{i}.log"
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def timed(label: str, fn, base: float | None = None):
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    ratio = f"  ({dt / base:.1f}x baseline)" if base else ""
    print(f"{label:<28} {dt:8.2f} s{ratio}", flush=True)
    return out, dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--layout", choices=["shared", "per-rank"], default="shared")
    ap.add_argument("--profile", choices=["ingest", "analyze"])
    args = ap.parse_args()
    from forensics.contracts.context import Context
    from forensics.discover import discover
    from forensics.engine import analyze
    from forensics.ingest import ingest
    from forensics.sniff import sniff_source

    with tempfile.TemporaryDirectory(prefix="forensics-many-") as tmp:
        root = Path(tmp)
        timed(f"generate {args.files} files", lambda: generate(root, args.files, args.layout))

        def read_all() -> int:
            total = 0
            for name in os.listdir(root):
                with open(root / name, "rb") as fh:
                    total += len(fh.read())
            return total

        _, base = timed("baseline: read every file", read_all)
        (sources, _), _ = timed("discover", lambda: discover(root), base)
        timed("sniff every file", lambda: [sniff_source(s) for s in sources], base)
        prof = cProfile.Profile() if args.profile else None
        if prof and args.profile == "ingest":
            prof.enable()
        run, _ = timed("ingest", lambda: ingest(root), base)
        if prof and args.profile == "ingest":
            prof.disable()
        if prof and args.profile == "analyze":
            prof.enable()
        result, _ = timed("analyze (ingested run)", lambda: analyze(Context(run)), base)
        if prof and args.profile == "analyze":
            prof.disable()
        print("findings:", [f.id for f in result.findings][:5])
        print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB (this process)")
        if prof:
            pstats.Stats(prof).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()

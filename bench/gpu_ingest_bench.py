"""Ingest speed and peak memory of `nvidia-smi --query-gpu` CSVs at 1M and 5M rows (8 GPUs).

Usage: python bench/gpu_ingest_bench.py [--sizes 1000000,5000000] [--dir /tmp/gpu_bench]
       [--code OTHER_CHECKOUT --python OTHER_VENV/bin/python]   (adds that checkout's ingest as a baseline row)

Each size is written once (the format of `nvidia-smi --query-gpu=… --format=csv -lms 100`,
one row per GPU per sample), then measured in a fresh child process so that peak RSS belongs
to that size alone: the forensics ingest of the file, and in the same child a bare
`polars.read_csv` of the same file as the baseline (the floor: parsing CSV text into columns
with no unit stripping, no timestamps, no validation). A second child runs the baseline
alone for its own peak RSS. The ingest counts rows without assembling the table (what a consumer
does with it is the consumer's memory, not ingest's).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

HEADER = ("timestamp, index, pci.bus_id, pstate, utilization.gpu [%], utilization.memory [%], memory.used [MiB], "
          "memory.total [MiB], temperature.gpu, power.draw [W], clocks.current.sm [MHz], clocks_event_reasons.active")
GPUS = 8


def write_csv(path: Path, rows: int, seed: int = 0) -> None:
    """A query-gpu capture of `rows` rows (rows / 8 samples), written in blocks with vectorised string ops."""
    rng = np.random.default_rng(seed)
    start = np.datetime64("2025-03-01T00:00:00.000")
    block = 1_000_000
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(HEADER + "\n")
        for lo in range(0, rows, block):
            n = min(block, rows - lo)
            idx = np.arange(lo, lo + n)
            gpu = idx % GPUS
            tick = idx // GPUS
            ms = tick * 100 + rng.integers(0, 4, n) + gpu  # 100 ms sampling, a few ms of jitter per GPU
            util = np.clip(rng.normal(92, 6, n), 0, 100).round().astype(int)
            df = pl.DataFrame({
                "ts": (start + ms.astype("timedelta64[ms]")),
                "gpu": gpu, "util": util, "mem": (util * 0.4).astype(int),
                "used": 61000 + rng.integers(0, 400, n), "temp": 60 + rng.integers(0, 15, n),
                "pwr": np.round(rng.normal(640, 30, n), 2), "clk": np.where(rng.random(n) < 0.02, 1410, 1980),
            })
            lines = df.select(pl.concat_str([
                pl.col("ts").dt.strftime("%Y/%m/%d %H:%M:%S%.3f"), pl.lit(", "), pl.col("gpu").cast(pl.String),
                pl.lit(", 00000000:"), (pl.col("gpu") * 16 + 0x18).map_elements(lambda v: f"{v:02X}", return_dtype=pl.String),
                pl.lit(":00.0, P0, "), pl.col("util").cast(pl.String), pl.lit(" %, "), pl.col("mem").cast(pl.String),
                pl.lit(" %, "), pl.col("used").cast(pl.String), pl.lit(" MiB, 81559 MiB, "), pl.col("temp").cast(pl.String),
                pl.lit(", "), pl.col("pwr").cast(pl.String), pl.lit(" W, "), pl.col("clk").cast(pl.String),
                pl.lit(" MHz, "), pl.when(pl.col("clk") < 1980).then(pl.lit("0x0000000000000004")).otherwise(pl.lit("0x0000000000000000")),
            ]).alias("l"))
            fh.write("\n".join(lines.get_column("l").to_list()))
            fh.write("\n")


def _peak_mib() -> float:
    """This process's peak RSS since it started (VmHWM; ru_maxrss would also count the parent's pages it
    shared between fork and exec, i.e. the generator's memory)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(path: str, mode: str) -> None:
    """Run in a fresh process: print one JSON line with the timings and this process's peak RSS."""
    out: dict = {}
    if mode in ("ingest", "both"):
        from forensics.parsers.base import registry

        from forensics.ingest import ingest

        registry()  # import every parser module before timing: a one-time start-up cost, not ingest speed
        root = Path(path).parent
        t = time.perf_counter()
        run = ingest(root)
        out["ingest_s"] = time.perf_counter() - t
        out["rows"] = run.num_rows("gpu") if hasattr(run, "num_rows") else run.table("gpu").num_rows
        out["status"] = run.table("files").column("status").to_pylist()
        out["rss_after_ingest_mib"] = _peak_mib()
        del run
    if mode in ("baseline", "both"):
        t = time.perf_counter()
        df = pl.read_csv(path)
        out["baseline_s"] = time.perf_counter() - t
        out["baseline_rows"] = df.height
        del df
    out["peak_rss_mib"] = _peak_mib()
    print(json.dumps(out))


def measure(path: Path, mode: str, code: Path | None = None, python: str | None = None) -> dict:
    """One child (this script's child mode): this checkout's ingest, or `code`'s imported by `python` (its venv)."""
    here = Path(__file__).resolve()
    root = code or here.parent.parent
    res = subprocess.run([python or sys.executable, str(here), "--child", str(path), mode],
                         capture_output=True, text=True, check=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,5000000")
    ap.add_argument("--code", type=Path, default=None, help="another checkout (e.g. main) whose ingest is the baseline")
    ap.add_argument("--python", default=None, help="the interpreter of --code (its venv)")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    base = Path(args.dir or tempfile.mkdtemp(prefix="gpu_bench_"))
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'rows':>9} {'MB':>6} {'ingest s':>9} {'rows/s':>11} {'peak RSS MiB':>13} {'read_csv s':>11} {'read_csv RSS':>13} {'ratio':>6}"
          + (f" {'baseline RSS':>13} {'RSS ratio':>9}" if args.code else ""))
    for size in (int(s) for s in args.sizes.split(",")):
        folder = base / f"run_{size}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "gpu_query.csv"
        if not path.exists():
            write_csv(path, size)
        both = measure(path, "both")
        ours = measure(path, "ingest")
        floor = measure(path, "baseline")
        assert both["rows"] == size and both["status"] == ["parsed"], both
        mb = path.stat().st_size / 1e6
        line = (f"{size:>9} {mb:>6.0f} {ours['ingest_s']:>9.2f} {size / ours['ingest_s']:>11,.0f} {ours['peak_rss_mib']:>13,.0f} "
                f"{both['baseline_s']:>11.2f} {floor['peak_rss_mib']:>13,.0f} {ours['ingest_s'] / both['baseline_s']:>6.1f}")
        if args.code:
            old = measure(path, "ingest", args.code, args.python)
            line += f" {old['peak_rss_mib']:>13,.0f} {ours['peak_rss_mib'] / old['peak_rss_mib']:>9.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()

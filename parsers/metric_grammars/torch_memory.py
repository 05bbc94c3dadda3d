"""PyTorch memory and profiler printouts that hold numbers (formats.md §4).

`torch.cuda.memory_summary()` (§4.2): the `Cur Usage` and `Peak Usage` columns of the memory rows,
in any of its units (`KiB`/`MiB`/`GiB`, older `KB`/`MB`/`GB`), and the `CUDA OOMs` / `cudaMalloc
retries` counters:
`| Allocated memory      | 184648 KiB | 192833 KiB | 258378 KiB |  73729 KiB |` -> mem_allocated_mib,
mem_max_mib; `GPU reserved memory` -> mem_reserved_mib, mem_max_reserved_mib; `Non-releasable memory`
-> mem_non_releasable_mib, ...; `from large/small pool` and count rows are not read.
`prof.key_averages().table()` footers (§4.1): `Self CPU time total: 12.345ms` -> profiler_self_cpu_ms
(`Self CUDA time total` -> profiler_self_cuda_ms, likewise XPU, ...).
The step is carried from the nearest step line above.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import (
    MEM_TO_MIB,
    NUM,
    TIME_TO_MS,
    Grammar,
    empty_rows,
    num,
    scale_by_unit,
    shape,
    wide_to_rows,
)

SUMMARY = (
    r"^\|\s*(?P<row>Allocated memory|Active memory|Requested memory|GPU reserved memory|Non-releasable memory)\s*\|"
    r"\s*(?P<cur>\d+) (?P<cu>[KMGTP]?i?B)\s*\|\s*(?P<peak>\d+) (?P<pu>[KMGTP]?i?B)\s*\|"
)
COUNTERS = r"CUDA OOMs: (?P<ooms>\d+)\s*\|\s*cudaMalloc retries: (?P<retries>\d+)"
FOOTER = rf"^Self (?P<dev>[A-Z0-9_]+) time total: (?P<t>{NUM})(?P<u>us|ms|s)$"
MATCH = "|".join([SUMMARY, COUNTERS, FOOTER])
ROW_NAMES = {"Allocated memory": ("mem_allocated_mib", "mem_max_mib"),
             "Active memory": ("mem_active_mib", "mem_max_active_mib"),
             "Requested memory": ("mem_requested_mib", "mem_max_requested_mib"),
             "GPU reserved memory": ("mem_reserved_mib", "mem_max_reserved_mib"),
             "Non-releasable memory": ("mem_non_releasable_mib", "mem_max_non_releasable_mib")}
# memory_summary's B/KB/MB/GB are binary units like its newer KiB/MiB/GiB.
UNITS = {**MEM_TO_MIB, "pb": 1024.0**3, "pib": 1024.0**3}


def _summary(df: pl.DataFrame) -> pl.DataFrame:
    g = pl.col("msg").str.extract_groups(SUMMARY)
    base = df.with_columns(g.alias("_g")).unnest("_g")
    cur = base.select("_i", pl.lit(None, pl.Int64).alias("step"),
                      pl.col("row").replace_strict({k: v[0] for k, v in ROW_NAMES.items()}).alias("name"),
                      scale_by_unit(num(pl.col("cur")), pl.col("cu"), UNITS).alias("value"))
    peak = base.select("_i", pl.lit(None, pl.Int64).alias("step"),
                       pl.col("row").replace_strict({k: v[1] for k, v in ROW_NAMES.items()}).alias("name"),
                       scale_by_unit(num(pl.col("peak")), pl.col("pu"), UNITS).alias("value"))
    return shape(pl.concat([cur, peak]).sort("_i", maintain_order=True), "memory_summary")


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Summary rows, allocator counters and profiler footers."""
    parts = []
    summ = df.filter(pl.col("msg").str.contains(SUMMARY))
    if summ.height:
        parts.append(_summary(summ))
    cnt = df.filter(pl.col("msg").str.contains(COUNTERS))
    if cnt.height:
        g = pl.col("msg").str.extract_groups(COUNTERS)
        parts.append(wide_to_rows(cnt, {"cuda_ooms": num(g.struct.field("ooms")), "alloc_retries": num(g.struct.field("retries"))},
                                  pl.lit(None, pl.Int64), "memory_summary"))
    foot = df.filter(pl.col("msg").str.contains(FOOTER))
    if foot.height:
        g = pl.col("msg").str.extract_groups(FOOTER)
        rows = foot.select("_i", pl.lit(None, pl.Int64).alias("step"),
                           (pl.lit("profiler_self_") + g.struct.field("dev").str.to_lowercase() + "_ms").alias("name"),
                           scale_by_unit(num(g.struct.field("t")), g.struct.field("u"), TIME_TO_MS).alias("value"))
        parts.append(shape(rows, "profiler_table"))
    return pl.concat(parts) if parts else empty_rows()


GRAMMAR = Grammar("torch_memory", ("Allocated memory", "reserved memory", "Active memory", "Requested memory",
                                   "Non-releasable memory", "cudaMalloc retries", "time total:"), MATCH, extract)

"""DeepSpeed progress, throughput, wall-clock, memory and pipeline lines (formats.md §1.3).

`step=2000, skipped=1995, lr=[0.001, 0.001], mom=[...]` -> step, `skipped_steps_total` (DeepSpeed's
cumulative count of overflow-skipped steps) and `lr` (first param group);
timer `epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=.., CurrSamplesPerSec=..,
MemAllocated=..GB, MaxMemAllocated=..GB` and its older `0/2000, SamplesPerSec=..` forms;
`time (ms) | fwd: .. | bwd: ..` -> `time_<name>_ms`; `see_memory_usage` (`MA .. GB  Max_MA .. GB
CA .. GB  Max_CA .. GB`, `CPU Virtual Memory:  used = .. GB, percent = ..%`);
pipeline `steps: 100 loss: 2.3456 iter time (s): 1.234 samples/sec: 207.456`.
DeepSpeed's GB are GiB (`/ 1024**3`), converted to MiB.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import (
    NUM,
    Grammar,
    empty_rows,
    groups,
    num,
    pairs,
    shape,
    split_pairs,
    wide_to_rows,
)

STEP = r"\bstep=(?P<step>\d+), skipped=(?P<skipped>\d+), lr=\[(?P<lr>[^\],]*)"
TIMER = (
    r"(?:epoch=\d+/micro_step=\d+/global_step=(?P<gstep>\d+)|\b\d+/(?P<ostep>\d+)), "
    rf"(?:RunningAvgSamplesPerSec=(?P<avg>{NUM}), CurrSamplesPerSec=(?P<cur>{NUM})|SamplesPerSec=(?P<sps>{NUM}))"
    rf"(?:, MemAllocated=(?P<ma>{NUM})GB, MaxMemAllocated=(?P<mma>{NUM})GB)?"
)
VM = rf"global_step=(?P<vstep>\d+), vm %: (?P<vm>{NUM}), swap %: (?P<swap>{NUM})"
WALL = r"(?:^|\] )time \(ms\) \| "
SEE_MEM = rf"\bMA (?P<ma>{NUM}) GB\s+Max_MA (?P<mma>{NUM}) GB\s+CA (?P<ca>{NUM}) GB\s+Max_CA (?P<mca>{NUM}) GB"
CPU_MEM = rf"CPU Virtual Memory:\s+used = (?P<used>{NUM}) GB, percent = (?P<pct>{NUM})%"
PIPE = rf"\bsteps: (?P<step>\d+) loss: (?P<loss>{NUM}) (?P<extra>.*?)iter time \(s\): (?P<it>{NUM}) samples/sec: (?P<sps>{NUM})"
WALL_MEM = {"mem_allocated": "mem_allocated_mib", "max_mem_allocated": "mem_max_mib",
            "cache_allocated": "mem_reserved_mib", "max_cache_allocated": "mem_max_reserved_mib"}
MATCH = "|".join([STEP, TIMER, VM, WALL, SEE_MEM, CPU_MEM, PIPE])


def _int(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.Int64, strict=False)


def _step(df: pl.DataFrame) -> pl.DataFrame:
    g = groups(df, STEP)
    return wide_to_rows(g, {"skipped_steps_total": num(pl.col("skipped")), "lr": num(pl.col("lr"))}, _int("step"), "deepspeed")


def _timer(df: pl.DataFrame) -> pl.DataFrame:
    g = groups(df, TIMER)
    cols = {
        "samples_per_s": num(pl.coalesce("cur", "sps")),
        "samples_per_s_avg": num(pl.col("avg")),
        "mem_allocated_mib": num(pl.col("ma")) * 1024,
        "mem_max_mib": num(pl.col("mma")) * 1024,
    }
    return wide_to_rows(g, cols, pl.coalesce("gstep", "ostep").cast(pl.Int64, strict=False), "deepspeed_timer")


def _vm(df: pl.DataFrame) -> pl.DataFrame:
    g = groups(df, VM)
    return wide_to_rows(g, {"host_mem_pct": num(pl.col("vm")), "swap_pct": num(pl.col("swap"))}, _int("vstep"), "deepspeed_timer")


def _wall(df: pl.DataFrame) -> pl.DataFrame:
    # ` | name: 12.34` items (the first item is `time (ms)`); memory items end in ` GB`.
    kv = split_pairs(df, pl.col("msg"), " | ", ": ")
    gb = pl.col("val").str.ends_with(" GB")
    keys = kv.get_column("key").unique().drop_nulls().to_list()
    time_names = {k: f"time_{k.lower()}_ms" for k in keys}
    mem_names = {k: WALL_MEM.get(k.lower(), f"{k.lower()}_mib") for k in keys}
    name = pl.when(gb).then(pl.col("key").replace_strict(mem_names)).otherwise(pl.col("key").replace_strict(time_names))
    raw = num(pl.col("val").str.strip_suffix(" GB"))
    value = pl.when(gb).then(raw * 1024).otherwise(raw)
    rows = kv.select("_i", pl.lit(None, pl.Int64).alias("step"), name.alias("name"), value.alias("value"))
    return shape(rows, "deepspeed_wall_clock")


def _see_mem(df: pl.DataFrame) -> pl.DataFrame:
    g = groups(df, SEE_MEM)
    cols = {
        "mem_allocated_mib": num(pl.col("ma")) * 1024,
        "mem_max_mib": num(pl.col("mma")) * 1024,
        "mem_reserved_mib": num(pl.col("ca")) * 1024,
        "mem_max_reserved_mib": num(pl.col("mca")) * 1024,
    }
    return wide_to_rows(g, cols, pl.lit(None, pl.Int64), "deepspeed_memory")


def _cpu_mem(df: pl.DataFrame) -> pl.DataFrame:
    g = groups(df, CPU_MEM)
    cols = {"host_mem_used_mib": num(pl.col("used")) * 1024, "host_mem_pct": num(pl.col("pct"))}
    return wide_to_rows(g, cols, pl.lit(None, pl.Int64), "deepspeed_memory")


def _pipe(df: pl.DataFrame) -> pl.DataFrame:
    g = groups(df, PIPE).with_columns(_int("step").alias("step"))
    cols = {
        "loss": num(pl.col("loss")),
        "step_time_ms": num(pl.col("it")) * 1000,
        "samples_per_s": num(pl.col("sps")),
    }
    main = wide_to_rows(g, cols, pl.col("step"), "deepspeed_pipe")
    # Optional extra losses between the loss and the timing: `{loss_name}: {value:0.4f} `.
    with_extra = g.filter(pl.col("extra").str.len_bytes() > 0).drop("loss", "it", "sps")
    if with_extra.height == 0:
        return main
    extra = pairs(with_extra, rf"(?P<key>[\w./-]+): (?P<val>{NUM}) ", pl.col("extra") + " ")
    extra_rows = extra.select("_i", "step", pl.col("key").str.to_lowercase().alias("name"), num(pl.col("val")).alias("value"))
    return pl.concat([main, shape(extra_rows, "deepspeed_pipe")])


FORMS = ((STEP, _step), (TIMER, _timer), (VM, _vm), (WALL, _wall), (SEE_MEM, _see_mem), (CPU_MEM, _cpu_mem), (PIPE, _pipe))


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Each claimed line goes to the first sub-form it matches."""
    parts = []
    rest = df
    for pattern, fn in FORMS:
        hit = rest.get_column("msg").str.contains(pattern)
        sub = rest.filter(hit)
        if sub.height:
            parts.append(fn(sub))
            rest = rest.filter(~hit)
    return pl.concat(parts) if parts else empty_rows()


GRAMMAR = Grammar(
    "deepspeed",
    ("skipped=", "SamplesPerSec", "vm %:", "time (ms) |", "Max_MA", "CPU Virtual Memory", "iter time (s)"),
    MATCH,
    extract,
)

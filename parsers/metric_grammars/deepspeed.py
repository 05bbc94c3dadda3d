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

from parsers.metric_grammars.common import NUM, Grammar, empty_rows, num, pairs, shape, wide_to_rows

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


def _g(pattern: str, name: str) -> pl.Expr:
    return pl.col("msg").str.extract_groups(pattern).struct.field(name)


def _step(df: pl.DataFrame) -> pl.DataFrame:
    return wide_to_rows(df, {"skipped_steps_total": num(_g(STEP, "skipped")), "lr": num(_g(STEP, "lr"))},
                        _g(STEP, "step").cast(pl.Int64, strict=False), "deepspeed")


def _timer(df: pl.DataFrame) -> pl.DataFrame:
    cols = {
        "samples_per_s": num(pl.coalesce(_g(TIMER, "cur"), _g(TIMER, "sps"))),
        "samples_per_s_avg": num(_g(TIMER, "avg")),
        "mem_allocated_mib": num(_g(TIMER, "ma")) * 1024,
        "mem_max_mib": num(_g(TIMER, "mma")) * 1024,
    }
    step = pl.coalesce(_g(TIMER, "gstep"), _g(TIMER, "ostep")).cast(pl.Int64, strict=False)
    return wide_to_rows(df, cols, step, "deepspeed_timer")


def _vm(df: pl.DataFrame) -> pl.DataFrame:
    return wide_to_rows(df, {"host_mem_pct": num(_g(VM, "vm")), "swap_pct": num(_g(VM, "swap"))},
                        _g(VM, "vstep").cast(pl.Int64, strict=False), "deepspeed_timer")


def _wall(df: pl.DataFrame) -> pl.DataFrame:
    kv = pairs(df, rf"(?P<key>\w[\w.]*): (?P<val>{NUM})(?P<unit> GB)?")
    mem = pl.col("key").str.to_lowercase().replace(WALL_MEM)
    name = pl.when(pl.col("unit").is_not_null()).then(mem).otherwise(
        pl.lit("time_") + pl.col("key").str.to_lowercase() + "_ms")
    value = pl.when(pl.col("unit").is_not_null()).then(num(pl.col("val")) * 1024).otherwise(num(pl.col("val")))
    rows = kv.select("_i", pl.lit(None, pl.Int64).alias("step"), name.alias("name"), value.alias("value"))
    return shape(rows, "deepspeed_wall_clock")


def _see_mem(df: pl.DataFrame) -> pl.DataFrame:
    cols = {
        "mem_allocated_mib": num(_g(SEE_MEM, "ma")) * 1024,
        "mem_max_mib": num(_g(SEE_MEM, "mma")) * 1024,
        "mem_reserved_mib": num(_g(SEE_MEM, "ca")) * 1024,
        "mem_max_reserved_mib": num(_g(SEE_MEM, "mca")) * 1024,
    }
    return wide_to_rows(df, cols, pl.lit(None, pl.Int64), "deepspeed_memory")


def _cpu_mem(df: pl.DataFrame) -> pl.DataFrame:
    cols = {"host_mem_used_mib": num(_g(CPU_MEM, "used")) * 1024, "host_mem_pct": num(_g(CPU_MEM, "pct"))}
    return wide_to_rows(df, cols, pl.lit(None, pl.Int64), "deepspeed_memory")


def _pipe(df: pl.DataFrame) -> pl.DataFrame:
    cols = {
        "loss": num(_g(PIPE, "loss")),
        "step_time_ms": num(_g(PIPE, "it")) * 1000,
        "samples_per_s": num(_g(PIPE, "sps")),
    }
    main = wide_to_rows(df, cols, _g(PIPE, "step").cast(pl.Int64, strict=False), "deepspeed_pipe")
    # Optional extra losses between the loss and the timing: `{loss_name}: {value:0.4f} `.
    extra = pairs(df.with_columns(_g(PIPE, "step").cast(pl.Int64, strict=False).alias("step")),
                  rf"(?P<key>[\w./-]+): (?P<val>{NUM}) ", _g(PIPE, "extra") + " ")
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

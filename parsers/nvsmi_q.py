"""`nvidia-smi -q` text reports into `gpu` / `gpu_procs` (one sample per GPU per `NVSMI LOG`).

formats.md §3.5 and the corpus captures (driver 535 and 590): `Key  : value` lines indented
4 spaces per level under `GPU 00000000:2F:00.0` blocks. Each line gets its path of section
names (`ECC Errors/Volatile/DRAM Uncorrectable`) with one forward fill per indent level, and
a table of path patterns maps paths to columns; then one pivot per file chunk. Old and new
section names are both accepted (`Clocks Throttle Reasons` / `Clocks Event Reasons`, `Power
Readings` / `GPU Power Readings`, pre-Ampere `Single Bit` / `Double Bit` ECC).

Excerpts pasted without the banner and the GPU line (one GPU's sections, e.g. `Clocks Throttle
Reasons` ... `Clocks` at column 0 in l4rz/reverse-engineering-dell-idrac-to-get-rid-of-gpu-throttling's
README, or `nvidia-smi -q | grep -A8 'Clocks Throttle'` in kubeflow/kubeflow#68) are read as one
sample of one unnamed GPU: their shallowest indent is taken as the level under the GPU line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import polars as pl
from forensics.parsers import nvsmi_fields as F
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.lines import ReadStats, iter_frames
from forensics.parsers.nvsmi_csv import sink_result

MAX_DEPTH = 7
LOG_HEADER = "==============NVSMI LOG=============="
GPU_HEADER = r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$"
# Section names that open a banner-less excerpt (the per-GPU sections people paste or grep for).
EXCERPT_SECTIONS = r"^(?:Clocks (?:Event|Throttle) Reasons|Clocks|Max Clocks|Temperature|(?:GPU )?Power Readings|Utilization|FB Memory Usage)$"
KEY_VALUE = r"^\s*\S.*?\s+: \S"
COMMAND = r"^\s*\$ .*nvidia-smi"
# A note typed after a value in a hand-made excerpt (`382 MHz   ← should be ~1530 MHz`, `<-- note`).
HAND_NOTE = r"\s{2,}(?:←|<-+|#)\s.*$"

# (regex on the path below the GPU line, column, converter, priority; "sum" adds every match).
RULES: list[tuple[str, str, str, int]] = [
    (r"^Product Name$", "name", "text", 0),
    (r"^GPU UUID$", "uuid", "text", 0),
    (r"^PCI/Bus Id$", "bus_id", "bus", 0),
    (r"^MIG Mode/Current$", "mig_mode", "text", 0),
    (r"^Fan Speed$", "fan_pct", "num", 0),
    (r"^Performance State$", "pstate", "pstate", 0),
    (r"^FB Memory Usage/Total$", "memory_total_mib", "num", 0),
    (r"^FB Memory Usage/Used$", "memory_used_mib", "num", 0),
    (r"^FB Memory Usage/Free$", "memory_free_mib", "num", 0),
    (r"^Compute Mode$", "compute_mode", "compute_mode", 0),
    (r"^Utilization/G[Pp][Uu]$", "utilization_gpu_pct", "num", 0),
    (r"^Utilization/Memory$", "utilization_mem_pct", "num", 0),
    # Ampere+: SRAM/DRAM Correctable / Uncorrectable (550+: Uncorrectable Parity / SEC-DED).
    (r"^ECC Errors/Volatile/(?:SRAM|DRAM) Uncorrectable(?: Parity| SEC-DED)?$", "ecc_uncorrected_volatile", "sum", 0),
    (r"^ECC Errors/Volatile/(?:SRAM|DRAM) Correctable$", "ecc_corrected_volatile", "sum", 0),
    (r"^ECC Errors/Aggregate/(?:SRAM|DRAM) Uncorrectable(?: Parity| SEC-DED)?$", "ecc_uncorrected_aggregate", "sum", 0),
    (r"^ECC Errors/Aggregate/(?:SRAM|DRAM) Correctable$", "ecc_corrected_aggregate", "sum", 0),
    # Pre-Ampere: Single Bit / Double Bit with a Total line.
    (r"^ECC Errors/Volatile/Double Bit/Total$", "ecc_uncorrected_volatile", "sum", 0),
    (r"^ECC Errors/Volatile/Single Bit/Total$", "ecc_corrected_volatile", "sum", 0),
    (r"^ECC Errors/Aggregate/Double Bit/Total$", "ecc_uncorrected_aggregate", "sum", 0),
    (r"^ECC Errors/Aggregate/Single Bit/Total$", "ecc_corrected_aggregate", "sum", 0),
    (r"^Retired Pages/Single Bit ECC$", "retired_pages_sbe", "int", 0),
    (r"^Retired Pages/Double Bit ECC$", "retired_pages_dbe", "int", 0),
    (r"^Retired Pages/Pending(?: Page Blacklist| Page Retirement)?$", "retired_pages_pending", "bool", 0),
    (r"^Remapped Rows/Uncorrectable Error$", "remapped_rows_uncorrectable", "int", 0),
    (r"^Remapped Rows/Pending$", "remapped_rows_pending", "bool", 0),
    (r"^Temperature/GPU Current Temp$", "temperature_c", "num", 0),
    (r"^Temperature/Memory Current Temp$", "memory_temperature_c", "num", 0),
    (r"^(?:GPU )?Power Readings/Power Draw$", "power_w", "num", 0),
    (r"^(?:GPU )?Power Readings/Average Power Draw$", "power_w", "num", 1),
    (r"^(?:GPU )?Power Readings/Instantaneous Power Draw$", "power_w", "num", 2),
    (r"^(?:GPU )?Power Readings/Current Power Limit$", "power_limit_w", "num", 0),
    (r"^(?:GPU )?Power Readings/Enforced Power Limit$", "power_limit_w", "num", 1),
    (r"^(?:GPU )?Power Readings/Power Limit$", "power_limit_w", "num", 2),
    (r"^Clocks/SM$", "sm_clock_mhz", "num", 0),
    (r"^Clocks/Graphics$", "sm_clock_mhz", "num", 1),
    (r"^Clocks/Memory$", "mem_clock_mhz", "num", 0),
    (r"^Max Clocks/SM$", "sm_clock_max_mhz", "num", 0),
    (r"^Max Clocks/Graphics$", "sm_clock_max_mhz", "num", 1),
    (r"^PCI/GPU Link Info/PCIe Generation/(?:Device )?Current$", "pcie_link_gen", "int", 0),
    (r"^PCI/GPU Link Info/Link Width/Current$", "pcie_link_width", "int", 0),
    (r"^PCI/Rx Throughput$", "pcie_rx_mb_per_s", "kbps", 0),
    (r"^PCI/Tx Throughput$", "pcie_tx_mb_per_s", "kbps", 0),
]
REASON_SECTION = r"^Clocks (?:Event|Throttle) Reasons/(?:.*/)?([^/]+)$"
PROC_KEYS = {"GPU instance ID": "gpu_instance_id", "Compute instance ID": "compute_instance_id", "Process ID": "pid",
             "Type": "type", "Name": "process", "Used GPU Memory": "used_memory_mib"}


def keyed_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """Indent level, key, value and the path of section names for every line."""
    df = frame.filter(pl.col("text").str.strip_chars() != "").select("line", "text")
    body = pl.col("text").str.strip_chars_start(" ")
    df = df.with_columns(
        ((pl.col("text").str.len_chars() - body.str.len_chars()) // 4).cast(pl.Int32).alias("lvl"),
        body.str.extract(r"^(.*?)\s+:(?:\s(.*))?$", 1).alias("_k"),
        body.str.extract(r"^(.*?)\s+:(?:\s(.*))?$", 2).alias("value"),
        body.alias("_b"),
    ).with_columns(pl.coalesce("_k", pl.col("_b").str.strip_chars()).alias("key")).drop("_k", "_b")
    levels = []
    for k in range(MAX_DEPTH):
        levels.append(
            pl.when(pl.col("lvl") == k).then(pl.col("key")).when(pl.col("lvl") < k).then(pl.lit("")).otherwise(None)
            .forward_fill().fill_null("").alias(f"_h{k}")
        )
    df = df.with_columns(levels)
    # Path below the level-0 line (the GPU line): levels 1..lvl.
    comps = pl.concat_list([pl.col(f"_h{k}") for k in range(1, MAX_DEPTH)])
    df = df.with_columns(comps.list.head(pl.col("lvl").clip(0, MAX_DEPTH - 1)).list.join("/").alias("path"))
    return df.drop([f"_h{k}" for k in range(MAX_DEPTH)])


def _value(kind: str) -> pl.Expr:
    v = pl.col("value")
    if kind == "kbps":
        return F.num(v.str.replace(r"\s*KB/s$", "")) / 1000.0
    if kind in ("num", "sum"):
        return F.num(v)
    if kind == "int":
        return F.integer(v).cast(pl.Float64)
    if kind == "bool":
        return F.yes_no(v).cast(pl.Float64)
    return pl.lit(None, pl.Float64)


def _text_value(kind: str) -> pl.Expr:
    v = pl.col("value")
    return {"text": F.text, "bus": F.bus_id, "pstate": F.pstate, "compute_mode": F.compute_mode}.get(kind, lambda e: pl.lit(None, pl.String))(v)


def _as_gpu_block(frame: pl.DataFrame) -> pl.DataFrame:
    """A banner-less excerpt re-indented one level under a GPU line: its shallowest indent becomes level 1."""
    body = frame.filter((pl.col("text").str.strip_chars() != "") & ~pl.col("text").str.contains(COMMAND))
    indent = body.get_column("text").str.len_chars() - body.get_column("text").str.strip_chars_start(" ").str.len_chars()
    cut = int(indent.min() or 0)
    return body.with_columns((pl.lit("    ") + pl.col("text").str.slice(cut).str.replace(HAND_NOTE, "")).alias("text"))


def parse_lines(frame: pl.DataFrame, seq0: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Lines of one or more complete `-q` reports (or one banner-less excerpt) into gpu and gpu_procs frames."""
    texts = frame.get_column("text").str.strip_chars_end()
    excerpt = not (texts.str.contains(GPU_HEADER).any() or texts.str.contains(LOG_HEADER, literal=True).any())
    df = keyed_lines(_as_gpu_block(frame) if excerpt else frame)
    if df.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    is_log = pl.col("text").str.contains(LOG_HEADER, literal=True)
    is_gpu = (pl.col("lvl") == 0) & pl.col("key").str.contains(GPU_HEADER)
    df = df.with_columns(
        is_log.cast(pl.Int64).cum_sum().alias("_log"),
        is_gpu.cast(pl.Int64).cum_sum().alias("_blk"),
        pl.when((pl.col("lvl") == 0) & (pl.col("key") == "Timestamp")).then(F.timestamp(pl.col("value"))).otherwise(None).alias("_ts"),
    ).with_columns(pl.col("_ts").forward_fill().over("_log"))
    if excerpt:
        # One unnamed GPU: every line is in its block, quoted from the excerpt's first line.
        df = df.with_columns(pl.lit(1, pl.Int64).alias("_blk"))
        is_gpu = pl.int_range(pl.len()) == 0
    gpus = df.filter(is_gpu).select(
        "_blk", "_log", pl.col("line"), (pl.lit(None, pl.String) if excerpt else F.bus_id(pl.col("key").str.slice(4))).alias("_bus"), pl.col("_ts").alias("ts"),
    ).with_columns(
        (pl.int_range(pl.len()).over("_log")).cast(pl.Int32).alias("gpu"),
        (pl.col("_log") - pl.col("_log").min() + seq0).cast(pl.Int64).alias("seq"),
    )
    if gpus.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    body = df.filter((pl.col("_blk") > 0) & (pl.col("lvl") > 0))
    long_parts = []
    for pattern, col, kind, prio in RULES:
        hit = body.filter(pl.col("path").str.contains(pattern))
        if hit.height:
            long_parts.append(hit.select("_blk", pl.lit(col).alias("col"), pl.lit(kind).alias("kind"), pl.lit(prio).alias("prio"),
                                         _value(kind).alias("num"), _text_value(kind).alias("str")))
    rea = body.filter(pl.col("path").str.contains(REASON_SECTION))
    wide = gpus
    if long_parts:
        long = pl.concat(long_parts).filter(pl.col("num").is_not_null() | pl.col("str").is_not_null())
        sums = long.filter(pl.col("kind") == "sum").group_by("_blk", "col").agg(pl.col("num").sum())
        firsts = long.filter(pl.col("kind") != "sum").sort("prio").group_by("_blk", "col").agg(pl.col("num").first(), pl.col("str").first())
        nums = pl.concat([sums, firsts.select("_blk", "col", "num")]).filter(pl.col("num").is_not_null())
        if nums.height:
            wide = wide.join(nums.pivot(on="col", index="_blk", values="num"), on="_blk", how="left")
        strs = firsts.filter(pl.col("str").is_not_null())
        if strs.height:
            wide = wide.join(strs.pivot(on="col", index="_blk", values="str"), on="_blk", how="left")
    if rea.height:
        rea = rea.with_columns(pl.col("path").str.extract(REASON_SECTION, 1).alias("label"))
        # Reason names per distinct label (a handful), not per line.
        names = {lab: F.reason_name(lab) for lab in rea.get_column("label").unique().drop_nulls().to_list()}
        rea = rea.with_columns(pl.col("label").replace_strict(names, default=None, return_dtype=pl.String).alias("reason"))
        rea = rea.filter(pl.col("reason").is_not_null()).with_columns(
            pl.when(F.yes_no(pl.col("value"))).then(pl.col("reason").replace_strict(F.REASON_BITS, return_dtype=pl.UInt64)).otherwise(pl.lit(0, pl.UInt64)).alias("bit"),
            F.yes_no(pl.col("value")).alias("known"),
        )
        masks = rea.filter(pl.col("known").is_not_null()).group_by("_blk").agg(pl.col("bit").bitwise_or().alias("throttle_mask"))
        wide = wide.join(masks, on="_blk", how="left")
    wide = wide.with_columns(pl.coalesce(*( [pl.col("bus_id")] if "bus_id" in wide.columns else []), pl.col("_bus")).alias("bus_id"))
    for col, dtype in (("pcie_link_gen", pl.Int32), ("pcie_link_width", pl.Int32), ("ecc_corrected_volatile", pl.Int64),
                       ("ecc_uncorrected_volatile", pl.Int64), ("ecc_corrected_aggregate", pl.Int64), ("ecc_uncorrected_aggregate", pl.Int64),
                       ("retired_pages_sbe", pl.Int64), ("retired_pages_dbe", pl.Int64), ("remapped_rows_uncorrectable", pl.Int64),
                       ("retired_pages_pending", pl.Boolean), ("remapped_rows_pending", pl.Boolean)):
        if col in wide.columns:
            wide = wide.with_columns(pl.col(col).cast(dtype))
    procs = _processes(body, wide)
    gpu = wide.drop("_blk", "_log", "_bus").with_columns(pl.lit("nvsmi_q").alias("source"))
    return gpu, procs


def _processes(body: pl.DataFrame, gpus: pl.DataFrame) -> pl.DataFrame:
    """Entries of the `Processes` section: each starts at `GPU instance ID` (or `Process ID`)."""
    pr = body.filter(pl.col("path").str.starts_with("Processes/") & pl.col("key").is_in(list(PROC_KEYS)))
    if pr.height == 0:
        return pl.DataFrame()
    # Old drivers start an entry at `Process ID`; new ones print the instance ids first.
    starts = (pl.col("key") == "GPU instance ID") | ((pl.col("key") == "Process ID") & (pl.col("key").shift(1) != "Compute instance ID"))
    pr = pr.sort("line").with_columns(starts.cast(pl.Int64).cum_sum().alias("_p"), pl.col("key").replace_strict(PROC_KEYS).alias("col"))
    wide = pr.pivot(on="col", index=["_blk", "_p"], values="value", aggregate_function="first")
    first_line = pr.filter(pl.col("key") == "Process ID").select("_blk", "_p", "line")
    wide = wide.join(first_line, on=["_blk", "_p"], how="inner")
    exprs = []
    for col, conv in (("pid", F.integer), ("process", F.text), ("type", F.text), ("used_memory_mib", F.num),
                      ("gpu_instance_id", F.integer), ("compute_instance_id", F.integer)):
        if col in wide.columns:
            exprs.append(conv(pl.col(col)).alias(col))
    ids = [c for c in ("uuid",) if c in gpus.columns]
    out = wide.select("_blk", "line", *exprs).join(gpus.select("_blk", "gpu", "seq", "ts", "bus_id", *ids), on="_blk")
    for col in ("gpu_instance_id", "compute_instance_id"):
        if col in out.columns:
            out = out.with_columns(pl.col(col).cast(pl.Int32))
    return out.drop("_blk").with_columns(pl.lit("nvsmi_q").alias("source"))


def whole_reports(frames: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """Regroup line frames so that every frame ends before a `NVSMI LOG` header (reports are never split)."""
    carry: pl.DataFrame | None = None
    for frame in frames:
        if carry is not None:
            frame = pl.concat([carry, frame])
            carry = None
        starts = frame.with_row_index("_i").filter(pl.col("text").str.contains(LOG_HEADER, literal=True)).get_column("_i")
        if starts.len() == 0 or int(starts[-1]) == 0:
            carry = frame
            continue
        cut = int(starts[-1])
        yield frame.slice(0, cut)
        carry = frame.slice(cut)
    if carry is not None and carry.height:
        yield carry


def parse(src, sn: Sniffed) -> ParseResult:
    """Parse one file of `nvidia-smi -q` reports."""
    stats = ReadStats()
    sink = F.TelemetrySink(src.rel)
    seq = 0
    for frame in whole_reports(iter_frames(src, stats=stats)):
        g, p = parse_lines(frame, seq)
        if g.height:
            seq = int(g.get_column("seq").max()) + 1
        sink.add(g, p)
    return sink_result(src, sink, stats.problems(), stats)


def sniff(sn: Sniffed) -> int:
    """The `==============NVSMI LOG==============` banner opens the file."""
    lines = F.first_lines(sn.text, 3)
    if lines and lines[0].strip() == LOG_HEADER:
        return 85
    if any(re.match(r"^Timestamp\s+: ", ln) for ln in lines) and LOG_HEADER in sn.text[:2000]:
        return 80
    return 70 if _is_excerpt(F.first_lines(sn.text, 40)) else 0


def _is_excerpt(lines: list[str]) -> bool:
    """A banner-less excerpt: (after an optional `$ nvidia-smi ...` command) a known section name, then
    nothing but `Key : value` lines and section names."""
    body = [ln for ln in lines if ln.strip()]
    if body and re.match(COMMAND, body[0]):
        body = body[1:]
    if len(body) < 3 or not re.match(EXCERPT_SECTIONS, body[0].strip()):
        return False
    keyed = sum(bool(re.match(KEY_VALUE, ln)) for ln in body)
    named = sum(bool(re.match(EXCERPT_SECTIONS, ln.strip())) for ln in body)
    return keyed >= 2 and keyed + named == len(body)


PARSER = Parser(kind="nvsmi_query_text", quotable=True, sniff=sniff, parse=parse, description="nvidia-smi -q text report")

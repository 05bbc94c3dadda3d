"""DCGM `dcgmi dmon` output into `gpu`.

Format [SRC NVIDIA/DCGM dcgmi/DeviceMonitor.cpp @72fa3fe; OBS formats.md §3.6]: a header
`#Entity` + the fields' short names, a units line starting with `ID`, then one row per entity
per tick (`GPU 0`, `GPU-I 1`, `GPU-CI 2`, `Switch 0`), values `N/A` when blank; the header is
printed again every 14 ticks. Short names and units are those of `dcgmlib/src/dcgm_fields.cpp`
(`TMPTR`, `POWER`, `GPUTL`, `FBUSD`, `SMACT`, …). Rows of one tick are not in index order, so a
sample ends when an entity repeats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl
from forensics.parsers import nvsmi_fields as F
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.lines import ReadStats, iter_frames
from forensics.parsers.nvsmi_csv import sink_result

# DCGM short name -> (gpu column, converter) [SRC dcgm_fields.cpp].
SHORT_NAMES: dict[str, tuple[str, str]] = {
    "GPUTL": ("utilization_gpu_pct", "num"),
    "MCUTL": ("utilization_mem_pct", "num"),
    "FBUSD": ("memory_used_mib", "num"),
    "FBTTL": ("memory_total_mib", "num"),
    "FBFRE": ("memory_free_mib", "num"),
    "TMPTR": ("temperature_c", "num"),
    "MMTMP": ("memory_temperature_c", "num"),
    "POWER": ("power_w", "num"),
    "EPLMT": ("power_limit_w", "num"),
    "FANSP": ("fan_pct", "num"),
    "SMCLK": ("sm_clock_mhz", "num"),
    "MMCLK": ("mem_clock_mhz", "num"),
    "SMMAX": ("sm_clock_max_mhz", "num"),
    "PSTAT": ("pstate", "pstate"),
    "CMMOD": ("compute_mode", "compute_mode"),
    "DVCCTR": ("throttle_mask", "mask"),
    "ESVTL": ("ecc_corrected_volatile", "int"),
    "EDVTL": ("ecc_uncorrected_volatile", "int"),
    "ESATL": ("ecc_corrected_aggregate", "int"),
    "EDATL": ("ecc_uncorrected_aggregate", "int"),
    "RPSBE": ("retired_pages_sbe", "int"),
    "RPDBE": ("retired_pages_dbe", "int"),
    "RPPEN": ("retired_pages_pending", "bool"),
    "URMPS": ("remapped_rows_uncorrectable", "int"),
    "RRP": ("remapped_rows_pending", "bool"),
    "GRACT": ("gr_active_ratio", "num"),
    "SMACT": ("sm_active_ratio", "num"),
    "SMOCC": ("sm_occupancy_ratio", "num"),
    "TENSO": ("tensor_active_ratio", "num"),
    "DRAMA": ("dram_active_ratio", "num"),
    # PCIe bytes per second -> MB/s.
    "PCITX": ("pcie_tx_mb_per_s", "bytes"),
    "PCIRX": ("pcie_rx_mb_per_s", "bytes"),
}
ENTITY = r"^(GPU|GPU-I|GPU-CI|vGPU|Switch)\s+(\d+)\b"


@dataclass
class DcgmState:
    """Header and sample numbering carried across chunks."""

    header: list[str] | None = None
    tick: int = 0
    # Rows seen so far per entity (`GPU 0`).
    counts: dict[str, int] = field(default_factory=dict)
    headers_seen: int = 0
    bad_lines: int = 0


def _conv(expr: pl.Expr, kind: str) -> pl.Expr:
    if kind == "bytes":
        return F.num(expr) / 1e6
    return {"num": F.num, "int": F.integer, "bool": F.yes_no, "mask": F.hex_mask, "pstate": F.pstate,
            "compute_mode": F.compute_mode}[kind](expr)


def _ticks(df: pl.DataFrame, state: DcgmState) -> pl.DataFrame:
    """Sample numbers: the k-th row of an entity belongs to tick k or later (rows of one tick are
    not in index order, and an entity missing from a tick must not shift the others)."""
    key = pl.concat_str([pl.col("_etype"), pl.col("_eid").cast(pl.String)], separator=" ")
    df = df.with_columns(key.alias("_key"))
    prior = pl.col("_key").replace_strict(state.counts, default=0, return_dtype=pl.Int64)
    occ = pl.int_range(pl.len()).over("_key").cast(pl.Int64) + prior
    df = df.with_columns(pl.max_horizontal(occ.cum_max(), pl.lit(state.tick, pl.Int64)).alias("seq"))
    for k, n in df.group_by("_key").len().iter_rows():
        state.counts[k] = state.counts.get(k, 0) + n
    state.tick = int(df.get_column("seq").max())
    return df.drop("_key")


def parse_lines(frame: pl.DataFrame, state: DcgmState) -> pl.DataFrame:
    """One chunk of `dcgmi dmon` lines into a gpu frame."""
    lines = frame.filter(pl.col("text").str.strip_chars() != "").select("line", "text")
    heads = lines.filter(pl.col("text").str.starts_with("#Entity"))
    specs: list[list[str] | None] = [state.header]
    by_text: dict[str, int] = {}
    hl, hs = [], []
    for ln, t in heads.iter_rows():
        if t not in by_text:
            specs.append(t.split()[1:])
            by_text[t] = len(specs) - 1
        hl.append(ln)
        hs.append(by_text[t])
    hdr = pl.DataFrame({"line": hl, "_hs": hs}, schema={"line": pl.Int64, "_hs": pl.Int64})
    lines = lines.join(hdr, on="line", how="left").sort("line").with_columns(pl.col("_hs").forward_fill().fill_null(0).alias("_spec"))
    data = lines.filter(pl.col("text").str.contains(ENTITY))
    parts = []
    for spec_i in data.get_column("_spec").unique().to_list():
        names = specs[spec_i]
        rows = data.filter(pl.col("_spec") == spec_i)
        if names is None:
            state.bad_lines += rows.height
            continue
        cells = pl.col("text").str.strip_chars().str.replace_all(r"\s+", " ").str.split(" ")
        rows = rows.with_columns(cells.alias("_c")).filter(pl.col("_c").list.len() == len(names) + 2)
        exprs = []
        for i, name in enumerate(names):
            if name in SHORT_NAMES:
                col, kind = SHORT_NAMES[name]
                exprs.append(_conv(pl.col("_c").list.get(i + 2), kind).alias(col))
        parts.append(rows.select(
            "line", pl.col("_c").list.get(0).alias("_etype"), pl.col("_c").list.get(1).cast(pl.Int64).alias("_eid"), *exprs
        ))
    if hl:
        state.header = specs[hs[-1]]
    df = F.stack(parts)
    if df.height == 0:
        return df
    df = _ticks(df.sort("line"), state)
    return df.with_columns(
        pl.when(pl.col("_etype") == "GPU").then(pl.col("_eid")).otherwise(None).cast(pl.Int32).alias("gpu"),
        # MIG entities keep their DCGM entity id; their parent GPU is not printed.
        pl.when(pl.col("_etype").is_in(["GPU-I", "GPU-CI"])).then(pl.col("_eid")).otherwise(None).cast(pl.Int32).alias("mig_device"),
        pl.lit("dcgm_dmon").alias("source"),
    ).filter(pl.col("_etype") != "Switch").drop("_etype", "_eid")


def parse(src, sn: Sniffed) -> ParseResult:
    """Parse one `dcgmi dmon` capture."""
    stats = ReadStats()
    state = DcgmState()
    sink = F.TelemetrySink(src.rel)
    for frame in iter_frames(src, stats=stats):
        sink.add(parse_lines(frame, state))
    notes = [f"{state.bad_lines} entity row(s) before any #Entity header were skipped"] if state.bad_lines else []
    return sink_result(src, sink, notes + stats.problems(), stats)


def sniff(sn: Sniffed) -> int:
    """`#Entity` header followed by the `ID` units line."""
    lines = F.first_lines(sn.text, 4)
    for i, ln in enumerate(lines[:-1]):
        if ln.startswith("#Entity") and re.match(r"^ID\b", lines[i + 1]):
            return 85
    return 0


PARSER = Parser(kind="dcgm_dmon", quotable=True, sniff=sniff, parse=parse, description="DCGM dcgmi dmon")

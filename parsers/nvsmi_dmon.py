"""`nvidia-smi dmon` (per device) and `nvidia-smi pmon` (per process) output into `gpu` / `gpu_procs`.

formats.md §3.3 and the corpus captures: a `#` header of column names and a `#` units line
(`# gpu pwr gtemp …` / `# Idx W C …`), any selection of metric groups (`-s pucvmet`), the
old and new column sets, optional `#Date`/`Time` columns (`-o DT`), `-` for a missing value,
and pmon's idle rows of `-` (no process: dropped). Headers may repeat; a new sample starts
where the GPU index (pmon: GPU index and pid) stops increasing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl
from forensics.parsers import nvsmi_fields as F
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.lines import ReadStats, iter_frames
from forensics.parsers.nvsmi_csv import sink_result

# dmon column -> (gpu column, converter).
DMON_COLUMNS: dict[str, tuple[str, str]] = {
    "gpu": ("gpu", "int"),
    "pwr": ("power_w", "num"),
    "gtemp": ("temperature_c", "num"),
    "temp": ("temperature_c", "num"),
    "mtemp": ("memory_temperature_c", "num"),
    "sm": ("utilization_gpu_pct", "num"),
    "mem": ("utilization_mem_pct", "num"),
    "mclk": ("mem_clock_mhz", "num"),
    "pclk": ("sm_clock_mhz", "num"),
    "pviol": ("power_violation_pct", "num"),
    "tviol": ("thermal_violation", "num"),
    "fb": ("memory_used_mib", "num"),
    "sbecc": ("ecc_corrected_volatile", "int"),
    "dbecc": ("ecc_uncorrected_volatile", "int"),
    "rxpci": ("pcie_rx_mb_per_s", "num"),
    "txpci": ("pcie_tx_mb_per_s", "num"),
}
# pmon column -> (gpu_procs column, converter).
PMON_COLUMNS: dict[str, tuple[str, str]] = {
    "gpu": ("gpu", "int"),
    "pid": ("pid", "int"),
    "type": ("type", "text"),
    "sm": ("sm_pct", "num"),
    "mem": ("mem_pct", "num"),
    "fb": ("used_memory_mib", "num"),
    "command": ("process", "text"),
}


@dataclass
class DmonState:
    """Header and sample numbering carried across chunks."""

    header: list[str] | None = None
    tick: int = -1
    last_key: tuple[int, int] | None = None
    headers_seen: int = 0
    notes: list[str] = field(default_factory=list)
    bad_lines: int = 0


def header_tokens(line: str) -> list[str] | None:
    """Column names of a `# gpu pwr …` / `#Date Time gpu …` header line (None for the units line)."""
    body = line.strip().lstrip("#").strip()
    tokens = body.split()
    if "gpu" not in tokens or "Idx" in tokens:
        return None
    return tokens


def _conv(expr: pl.Expr, kind: str) -> pl.Expr:
    return {"int": F.integer, "num": F.num, "text": F.text}[kind](expr)


def _convert(rows: pl.DataFrame, tokens: list[str]) -> tuple[pl.DataFrame, str]:
    """Split one header's data rows and convert their columns; returns the frame and `gpu`/`procs`."""
    is_pmon = "pid" in tokens
    mapping = PMON_COLUMNS if is_pmon else DMON_COLUMNS
    n = len(tokens)
    cells = pl.col("text").str.strip_chars().str.replace_all(r"\s+", " ").str.split(" ")
    rows = rows.with_columns(cells.alias("_c"))
    if is_pmon and tokens[-1] == "command":
        # Command names may hold spaces: the tail of the row is the command.
        rows = rows.filter(pl.col("_c").list.len() >= n).with_columns(
            pl.concat_list(pl.col("_c").list.head(n - 1), pl.col("_c").list.slice(n - 1).list.join(" ")).alias("_c")
        )
    else:
        rows = rows.filter(pl.col("_c").list.len() == n)
    exprs = []
    for i, tok in enumerate(tokens):
        if tok in mapping:
            col, kind = mapping[tok]
            exprs.append(_conv(pl.col("_c").list.get(i, null_on_oob=True), kind).alias(col))
    if "Date" in tokens and "Time" in tokens:
        d = pl.col("_c").list.get(tokens.index("Date"), null_on_oob=True)
        t = pl.col("_c").list.get(tokens.index("Time"), null_on_oob=True)
        iso = d.str.slice(0, 4) + pl.lit("-") + d.str.slice(4, 2) + pl.lit("-") + d.str.slice(6, 2) + pl.lit(" ") + t
        exprs.append(F.timestamp(iso).alias("ts"))
    out = rows.select(pl.col("line"), pl.col("_seg"), *exprs)
    if is_pmon:
        # pmon prints a row of `-` for a GPU without processes.
        out = out.filter(pl.col("pid").is_not_null())
    return out, ("procs" if is_pmon else "gpu")


def _ticks(df: pl.DataFrame, state: DmonState, kind: str) -> pl.DataFrame:
    """`seq`: a header, or a (gpu[, pid]) key that does not increase, starts a new sample."""
    if df.height == 0:
        return df
    df = df.sort("line")
    g = pl.col("gpu").cast(pl.Int64).fill_null(-1)
    # dmon: one row per GPU per sample; pmon: one row per process, by GPU then pid.
    p = pl.col("pid").fill_null(-1) if kind == "procs" else pl.col("gpu").cast(pl.Int64).fill_null(-1) * 0
    last_g, last_p = state.last_key if state.last_key is not None else (-(2**62), -(2**62))
    pg, pp = g.shift(1, fill_value=last_g), p.shift(1, fill_value=last_p)
    new = (g < pg) | ((g == pg) & (p <= pp)) | (pl.col("_seg") != pl.col("_seg").shift(1, fill_value=-1))
    if state.tick < 0:
        new = new | (pl.int_range(pl.len()) == 0)
    df = df.with_columns((pl.lit(state.tick, pl.Int64) + new.cast(pl.Int64).cum_sum()).alias("seq"))
    state.tick = int(df.get_column("seq").max())
    last = df.select(g.alias("g"), p.alias("p")).row(-1)
    state.last_key = (int(last[0]), int(last[1]))
    return df


def parse_lines(frame: pl.DataFrame, state: DmonState) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One chunk of dmon / pmon lines (`line`, `text`) into gpu and gpu_procs frames."""
    lines = frame.filter(pl.col("text").str.strip_chars() != "").select("line", "text")
    if lines.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    faults = F.device_faults(lines, "dmon")
    comment = pl.col("text").str.contains(r"^\s*#")
    heads = lines.filter(comment & pl.col("text").str.contains(r"\bgpu\b"))
    specs: list[list[str] | None] = [state.header]
    by_text: dict[str, int] = {}
    seg_of = []
    keep_lines = []
    for ln, t in heads.select("line", "text").iter_rows():
        toks = header_tokens(t)
        if toks is None:
            continue
        if t not in by_text:
            specs.append(toks)
            by_text[t] = len(specs) - 1
        seg_of.append(by_text[t])
        keep_lines.append(ln)
    hdr = pl.DataFrame({"line": keep_lines, "_hs": seg_of}, schema={"line": pl.Int64, "_hs": pl.Int64})
    lines = lines.join(hdr, on="line", how="left").sort("line").with_columns(
        pl.col("_hs").forward_fill().fill_null(0).alias("_spec"),
        (pl.col("_hs").is_not_null().cast(pl.Int64).cum_sum() + state.headers_seen).alias("_seg"),
    )
    state.headers_seen += len(keep_lines)
    data = lines.filter(~pl.col("text").str.contains(r"^\s*#") & ~pl.col("text").str.contains("Unable to determine", literal=True))
    gpu_parts, proc_parts = [], []
    for spec_i in data.get_column("_spec").unique().to_list():
        toks = specs[spec_i]
        rows = data.filter(pl.col("_spec") == spec_i)
        if toks is None:
            state.bad_lines += rows.height
            continue
        out, kind = _convert(rows, toks)
        state.bad_lines += rows.height - out.height if kind == "gpu" else 0
        (proc_parts if kind == "procs" else gpu_parts).append(out)
    if keep_lines:
        state.header = specs[seg_of[-1]]
    gpu = F.stack(gpu_parts)
    if gpu.height:
        gpu = _ticks(gpu, state, "gpu").drop("_seg").with_columns(pl.lit("dmon").alias("source"))
    if faults.height:
        gpu = F.stack([gpu, F.place_faults(faults, pl.DataFrame(), max(state.tick, 0), {})]).sort("line")
    procs = F.stack(proc_parts)
    if procs.height:
        procs = _ticks(procs, state, "procs").drop("_seg").with_columns(pl.lit("pmon").alias("source"))
    return gpu, procs


def parse(src, sn: Sniffed) -> ParseResult:
    """Parse one dmon / pmon capture."""
    stats = ReadStats()
    state = DmonState()
    sink = F.TelemetrySink(src.rel)
    for frame in iter_frames(src, stats=stats):
        sink.add(*parse_lines(frame, state))
    notes = list(state.notes)
    if state.bad_lines:
        notes.append(f"{state.bad_lines} line(s) that do not fit the dmon/pmon header were skipped")
    return sink_result(src, sink, notes + stats.problems(), stats)


HEADER_RE = re.compile(r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu\s+(?:pwr|pid|sm|fb|mclk|pclk|temp|gtemp|pviol|sbecc|rxpci)\b")


def sniff(sn: Sniffed) -> int:
    """A `# gpu …` header followed by its `# Idx …` units line."""
    lines = F.first_lines(sn.text, 6)
    for i, ln in enumerate(lines[:-1]):
        if HEADER_RE.match(ln.strip()) and re.match(r"^#\s*(?:YYYYMMDD\s+)?(?:HH:MM:SS\s+)?Idx\b", lines[i + 1].strip()):
            return 85
    return 0


PARSER = Parser(kind="nvsmi_dmon", quotable=True, sniff=sniff, parse=parse, description="nvidia-smi dmon / pmon")

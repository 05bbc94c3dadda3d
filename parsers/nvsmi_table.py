"""The default `nvidia-smi` table into `gpu` / `gpu_procs`, standalone or pasted inside a training log.

Layouts of formats.md §3.4 and the corpus captures: driver ≤ 470 (79 columns), 535 (89), 550+
and 590 (wider Bus-Id cell), old drivers with `MB` units and `TCC/WDDM`, `ERR!` cells, the
Processes section with and without the `GI`/`CI` columns. Several snapshots in one file are
several samples (`seq` = snapshot order; `ts` from the ctime line printed above each table).

`parse_table_lines(lines)` is the hook for the text-log pipeline: it takes a frame of raw
lines (`line`, `text`, optionally `ts`) and returns (gpu, gpu_procs) frames; log prefixes
before the `|` borders are ignored because no pattern is anchored at the line start.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import polars as pl
from forensics.parsers import nvsmi_fields as F
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.lines import ReadStats, iter_frames
from forensics.parsers.nvsmi_csv import result_of

# Needle for the text-log prefilter: every table has this header line.
NEEDLES = ["NVIDIA-SMI "]
HEADER = r"\|\s*NVIDIA-SMI \d"
# The longest table we expect after its header (GPU rows + a Processes section), in lines.
MAX_TABLE_LINES = 600

_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
ROW1 = rf"\|\s*(\d+)\s+(.+?)\s+(On|Off|WDDM|TCC)\s*\|\s*({_BUS})\s+(On|Off|N/A)\s*\|\s*([^|]*?)\s*\|"
_V = r"N/A|ERR!"
ROW2 = (
    rf"\|\s*(\d+%|{_V})\s+(\d+C|{_V})\s+(P\d+|{_V})\s+(\d+W|{_V})\s*/\s*(\d+W|{_V})\s*\|"
    rf"\s*(\d+)(?:MiB|MB)\s*/\s*(\d+)(?:MiB|MB)\s*\|\s*(\d+%|{_V})\s+(.+?)\s*\|"
)
ROW3 = r"^\W*\|\s+\|\s+\|\s+(Disabled|Enabled|N/A)\s+\|"
PROC_NEW = r"\|\s*(\d+)\s+(N/A|\d+)\s+(N/A|\d+)\s+(\d+)\s+(C\+G|C|G|M\+C|M)\s+(.+?)\s+(\d+)MiB\s*\|"
PROC_OLD = r"\|\s*(\d+)\s+(\d+)\s+(C\+G|C|G|M\+C|M)\s+(.+?)\s+(\d+)MiB\s*\|"


def _extract(col: str, pattern: str, names: list[str]) -> list[pl.Expr]:
    return [pl.col(col).str.extract(pattern, i + 1).alias(n) for i, n in enumerate(names)]


def parse_table_lines(lines: pl.DataFrame, seq0: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every nvidia-smi table in a frame of raw lines (`line`, `text`[, `ts`]) into gpu and procs frames."""
    empty = (pl.DataFrame(), pl.DataFrame())
    if lines.height == 0:
        return empty
    heads = lines.filter(pl.col("text").str.contains("NVIDIA-SMI", literal=True) & pl.col("text").str.contains(HEADER))
    if heads.height == 0:
        return empty
    heads = heads.select("line", *(["ts"] if "ts" in lines.columns else [])).with_row_index("_snap").with_columns(
        (pl.col("_snap").cast(pl.Int64) + seq0).alias("_snap"), pl.col("line").alias("_hline")
    )
    # Lines near a header: from the ctime line above it to the end of its Processes section.
    near = lines.select("line", "text").sort("line").join_asof(
        heads.select("line", "_snap", "_hline").sort("line"), on="line", strategy="forward", tolerance=3
    )
    near = near.with_columns(pl.col("_snap").alias("_next"), pl.col("_hline").alias("_nh")).drop("_snap", "_hline").join_asof(
        heads.select("line", "_snap", "_hline").sort("line"), on="line", strategy="backward"
    )
    near = near.filter(
        (pl.col("_snap").is_not_null() & (pl.col("line") - pl.col("_hline") <= MAX_TABLE_LINES)) | pl.col("_next").is_not_null()
    )
    # Section of each line: GPU rows, Processes, MIG devices, or past the end of the table.
    table_line = pl.col("text").str.contains(r"[|+]")
    near = near.with_columns(
        pl.when(pl.col("text").str.contains(HEADER)).then(pl.lit("gpu"))
        .when(pl.col("text").str.contains(r"\|\s*Processes:")).then(pl.lit("procs"))
        .when(pl.col("text").str.contains(r"\|\s*MIG devices:")).then(pl.lit("mig"))
        .when(~table_line & (pl.col("text").str.strip_chars() != "")).then(pl.lit("none"))
        .otherwise(None).forward_fill().alias("_sec")
    )
    # The ctime line printed above each table.
    dates = near.filter(pl.col("_next").is_not_null() & pl.col("text").str.contains(F.CTIME_RE)).select(
        pl.col("_next").alias("_snap"), F.timestamp(pl.col("text").str.extract(f"({F.CTIME_RE})", 1)).alias("_cts")
    ).unique("_snap", keep="last")
    snaps = heads.join(dates, on="_snap", how="left")
    ts_expr = pl.coalesce("_cts", "ts") if "ts" in snaps.columns else pl.col("_cts")
    snaps = snaps.select("_snap", ts_expr.alias("ts"))
    gpu = _gpu_rows(near.filter(pl.col("_sec") == "gpu"), snaps)
    procs = _proc_rows(near.filter(pl.col("_sec") == "procs"), snaps)
    return gpu, procs


def _gpu_rows(sec: pl.DataFrame, snaps: pl.DataFrame) -> pl.DataFrame:
    r1 = sec.filter(pl.col("text").str.contains(ROW1)).select(
        "line", "_snap", *_extract("text", ROW1, ["_idx", "_name", "_persist", "_bus", "_disp", "_ecc"])
    )
    if r1.height == 0:
        return pl.DataFrame()
    r2 = sec.filter(pl.col("text").str.contains(ROW2)).select(
        (pl.col("line") - 1).alias("line"),
        *_extract("text", ROW2, ["_fan", "_temp", "_perf", "_pwr", "_cap", "_used", "_total", "_util", "_cm"]),
    )
    r3 = sec.filter(pl.col("text").str.contains(ROW3)).select(
        (pl.col("line") - 2).alias("line"), pl.col("text").str.extract(ROW3, 1).alias("_mig")
    )
    df = r1.join(r2, on="line", how="left").join(r3, on="line", how="left").join(snaps, on="_snap", how="left")
    cells = ["_fan", "_temp", "_perf", "_pwr", "_cap", "_util", "_ecc"]
    fault = pl.any_horizontal([pl.col(c) == "ERR!" for c in cells]).fill_null(False)
    return df.select(
        pl.col("line"),
        pl.col("ts"),
        pl.col("_snap").cast(pl.Int64).alias("seq"),
        pl.col("_idx").cast(pl.Int32).alias("gpu"),
        F.text(pl.col("_name")).alias("name"),
        F.bus_id(pl.col("_bus")).alias("bus_id"),
        pl.when(fault).then(pl.lit("ERR!")).otherwise(None).alias("fault"),
        F.num(pl.col("_fan")).alias("fan_pct"),
        F.num(pl.col("_temp").str.strip_suffix("C")).alias("temperature_c"),
        F.pstate(pl.col("_perf")).alias("pstate"),
        F.num(pl.col("_pwr").str.strip_suffix("W")).alias("power_w"),
        F.num(pl.col("_cap").str.strip_suffix("W")).alias("power_limit_w"),
        F.num(pl.col("_used")).alias("memory_used_mib"),
        F.num(pl.col("_total")).alias("memory_total_mib"),
        F.num(pl.col("_util")).alias("utilization_gpu_pct"),
        F.compute_mode(pl.col("_cm")).alias("compute_mode"),
        # The `Volatile Uncorr. ECC` cell: a count, or Off / N/A / On (MIG).
        F.integer(pl.col("_ecc")).alias("ecc_uncorrected_volatile"),
        F.text(pl.col("_mig")).alias("mig_mode"),
        pl.lit("nvsmi_table").alias("source"),
    )


def _proc_rows(sec: pl.DataFrame, snaps: pl.DataFrame) -> pl.DataFrame:
    new = sec.filter(pl.col("text").str.contains(PROC_NEW)).select(
        "line", "_snap", *_extract("text", PROC_NEW, ["_gpu", "_gi", "_ci", "_pid", "_type", "_name", "_mem"])
    )
    old = sec.filter(~pl.col("text").str.contains(PROC_NEW) & pl.col("text").str.contains(PROC_OLD)).select(
        "line", "_snap", *_extract("text", PROC_OLD, ["_gpu", "_pid", "_type", "_name", "_mem"])
    )
    df = F.stack([new, old])
    if df.height == 0:
        return df
    for c in ("_gi", "_ci"):
        if c not in df.columns:
            df = df.with_columns(pl.lit(None, pl.String).alias(c))
    return df.join(snaps, on="_snap", how="left").select(
        pl.col("line"),
        pl.col("ts"),
        pl.col("_snap").cast(pl.Int64).alias("seq"),
        pl.col("_gpu").cast(pl.Int32).alias("gpu"),
        F.integer(pl.col("_gi")).cast(pl.Int32).alias("gpu_instance_id"),
        F.integer(pl.col("_ci")).cast(pl.Int32).alias("compute_instance_id"),
        pl.col("_pid").cast(pl.Int64).alias("pid"),
        pl.col("_type").alias("type"),
        pl.col("_name").str.strip_chars().alias("process"),
        F.num(pl.col("_mem")).alias("used_memory_mib"),
        pl.lit("nvsmi_table").alias("source"),
    ).sort("line")


def whole_tables(frames: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """Regroup line frames so that no table (with the two lines above its header) is split."""
    carry: pl.DataFrame | None = None
    for frame in frames:
        if carry is not None:
            frame = pl.concat([carry, frame])
            carry = None
        starts = frame.with_row_index("_i").filter(pl.col("text").str.contains(HEADER)).get_column("_i")
        cut = max(int(starts[-1]) - 2, 0) if starts.len() else frame.height
        if cut == 0:
            carry = frame
            continue
        yield frame.slice(0, cut)
        carry = frame.slice(cut) if cut < frame.height else None
    if carry is not None and carry.height:
        yield carry


def parse(src, sn: Sniffed) -> ParseResult:
    """Parse a file of one or more nvidia-smi tables (`nvidia-smi -l`, `watch nvidia-smi` captures)."""
    stats = ReadStats()
    gpu_parts, proc_parts, seq = [], [], 0
    buses: dict[str, int] = {}
    for frame in whole_tables(iter_frames(src, stats=stats)):
        g, p = parse_table_lines(frame, seq)
        faults = F.device_faults(frame.select("line", "text"), "nvsmi_table")
        if g.height:
            gpu_parts.append(g)
            seq = int(g.get_column("seq").max()) + 1
        if faults.height:
            gpu_parts.append(F.place_faults(faults, g, max(seq - 1, 0), buses))
        if p.height:
            proc_parts.append(p)
    return result_of(src, gpu_parts, proc_parts, stats.problems(), stats)


def sniff(sn: Sniffed) -> int:
    """A file that starts with an nvidia-smi table (optionally its ctime line or a `watch` banner)."""
    lines = F.first_lines(sn.text, 4)
    if not lines:
        return 0
    opener = lines[0].strip()
    starts = opener.startswith("+---") or re.search(F.CTIME_RE, opener) or opener.startswith("Every ")
    if starts and any(re.search(HEADER, ln) for ln in lines):
        return 85
    return 0


PARSER = Parser(kind="nvsmi_table", quotable=True, sniff=sniff, parse=parse, description="default nvidia-smi table (one or more snapshots)")


def from_log(frame: pl.DataFrame, cand: pl.DataFrame, state: dict) -> None:
    """Text-log hook: collect the tables of one frame into `state["nvsmi"]` (cheap when there are none).

    `cand` holds the prefilter survivors with `ts` split off their log prefix; a table without its
    own ctime line takes the time of its header line's log record.
    """
    if cand.height == 0 or not cand.get_column("text").str.contains("NVIDIA-SMI", literal=True).any():
        return
    acc = state.setdefault("nvsmi", {"gpu": [], "procs": [], "seq": 0})
    lines = frame.select("line", "text")
    if "ts" in cand.columns:
        stamps = cand.filter(pl.col("text").str.contains(HEADER)).select("line", "ts").unique("line")
        lines = lines.join(stamps, on="line", how="left")
    g, p = parse_table_lines(lines, acc["seq"])
    if g.height:
        acc["gpu"].append(g)
        acc["seq"] = int(g.get_column("seq").max()) + 1
    if p.height:
        acc["procs"].append(p)


def log_tables(state: dict, rel: str) -> dict:
    """The gpu / gpu_procs tables collected by `from_log` for one text log (empty dict when none)."""
    acc = state.get("nvsmi")
    if not acc:
        return {}
    out = {}
    gpu, procs = F.stack(acc["gpu"]), F.stack(acc["procs"])
    if gpu.height:
        out["gpu"] = F.gpu_table(gpu, rel)
    if procs.height:
        out["gpu_procs"] = F.procs_table(procs, rel)
    return out

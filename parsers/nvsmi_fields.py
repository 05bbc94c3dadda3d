"""Shared vocabulary of the nvidia-smi / DCGM parsers: value conversion, reason bits, output frames.

Every parser of the family builds polars frames whose columns are those of the `gpu` and
`gpu_procs` schemas (forensics/tables.py) and hands them to `gpu_table` / `procs_table`.
Values are converted with the expressions below (vectorised, never per line).
"""

from __future__ import annotations

import re

import polars as pl
import pyarrow as pa
from forensics.parsers import spool
from forensics.parsers.prefixes import parse_iso

from forensics.contracts.tables import SCHEMAS, conform

# Values nvidia-smi prints where it has no number (formats.md §3.1, §3.5; corpus captures).
NULL_TOKENS = [
    "",
    "N/A",
    "[N/A]",
    "[Not Supported]",
    "Not Supported",
    "[Unknown Error]",
    "Unknown Error",
    "[Requested functionality has been deprecated]",
    "Requested functionality has been deprecated",
    "[Insufficient Permissions]",
    "[GPU requires reset]",
    "[GPU is lost]",
    "[Not Found]",
    "ERR!",
    "-",
    "None",
]

# NVML clocks-event (throttle) reason bits [formats.md §3.1, SRC NVML docs R510/R550].
REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
    # nvmlClocksThrottleReasonUnknown (older drivers' `clocks_throttle_reasons.unknown`).
    "unknown": 0x8000000000000000,
}
# Spellings of the reasons in -q text, -q -x XML and the query fields.
REASON_ALIASES: dict[str, str] = {
    "idle": "gpu_idle",
    "gpu_idle": "gpu_idle",
    "applications_clocks_setting": "applications_clocks_setting",
    "sw_power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "hw_thermal_slowdown": "hw_thermal_slowdown",
    "hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "sync_boost": "sync_boost",
    "sw_thermal_slowdown": "sw_thermal_slowdown",
    "display_clock_setting": "display_clock_setting",
    "display_clocks_setting": "display_clock_setting",
    "unknown": "unknown",
}

# The table abbreviates compute modes ("E. Process"); DCGM prints the NVML enum number.
COMPUTE_MODES = {
    "Default": "Default",
    "E. Process": "Exclusive_Process",
    "E. Thread": "Exclusive_Thread",
    "Prohibited": "Prohibited",
    "Exclusive_Process": "Exclusive_Process",
    "Exclusive_Thread": "Exclusive_Thread",
    "0": "Default",
    "1": "Exclusive_Thread",
    "2": "Prohibited",
    "3": "Exclusive_Process",
}

# `Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system ...`
# and `... for GPU0000:07:00.0: Unknown Error` [OBS JosephKJ/OWOD#81, pdbear/syno_nvidia_gpu_driver#22].
DEVICE_HANDLE_ERROR = r"Unable to determine the device handle for (?:GPU|gpu) ?([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]):\s*([^.]+)"

CTIME_RE = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d{2}:\d{2}:\d{2} \d{4}"


def clean(expr: pl.Expr) -> pl.Expr:
    """Strip a raw value; the tool's placeholders for missing values become null."""
    s = expr.str.strip_chars()
    return pl.when(s.is_in(NULL_TOKENS)).then(None).otherwise(s)


# Characters of the unit suffixes nvidia-smi prints (`%`, `MiB`, `MB`, `W`, `MHz`, `C`, `us`, `ms`,
# `16x`, `KB/s`, `bank(s)`): stripping them leaves the number; anything else fails the cast -> null.
UNIT_CHARS = " \t%MiBGWHzCusmxKB/()bank"


def num(expr: pl.Expr) -> pl.Expr:
    """A number with an optional unit suffix (`41 C`, `69.85 W`, `100 %`, `81559 MiB`, `16x`) as Float64.

    Placeholders (`[N/A]`, `N/A`, `-`, `[Not Supported]`) do not parse as numbers and become null.
    """
    return expr.str.strip_chars(UNIT_CHARS).cast(pl.Float64, strict=False)


def integer(expr: pl.Expr) -> pl.Expr:
    """A count as Int64 (null when not a whole number)."""
    return num(expr).cast(pl.Int64, strict=False)


def yes_no(expr: pl.Expr) -> pl.Expr:
    """`Yes`/`No` (also `Active`/`Not Active`, `Enabled`/`Disabled`, 1/0) as a boolean."""
    s = clean(expr).str.to_lowercase()
    return (
        pl.when(s.is_in(["yes", "active", "enabled", "1", "true"]))
        .then(True)
        .when(s.is_in(["no", "not active", "disabled", "0", "false"]))
        .then(False)
        .otherwise(None)
    )


def hex_mask(expr: pl.Expr) -> pl.Expr:
    """A `0x...` bit mask as UInt64 (decimal accepted too: DCGM prints the mask as an integer)."""
    s = clean(expr)
    return (
        pl.when(s.str.starts_with("0x") | s.str.starts_with("0X"))
        .then(s.str.slice(2).str.to_integer(base=16, dtype=pl.UInt64, strict=False))
        .otherwise(s.str.to_integer(base=10, dtype=pl.UInt64, strict=False))
    )


def text(expr: pl.Expr) -> pl.Expr:
    """A string value, null for placeholders."""
    return clean(expr)


def bus_id(expr: pl.Expr) -> pl.Expr:
    """PCI bus id in nvidia-smi's full form `00000000:4F:00.0` (messages print `0000:4f:00.0`)."""
    s = clean(expr).str.to_uppercase()
    dom = s.str.extract(r"^([0-9A-F]+):", 1)
    return pl.when(dom.is_not_null()).then(dom.str.zfill(8) + s.str.replace(r"^[0-9A-F]+", "")).otherwise(s)


def compute_mode(expr: pl.Expr) -> pl.Expr:
    """Canonical compute mode names (`E. Process` and DCGM's `3` become `Exclusive_Process`)."""
    s = clean(expr)
    return s.replace(COMPUTE_MODES)


def pstate(expr: pl.Expr) -> pl.Expr:
    """`P0`..`P15` (DCGM prints the bare number)."""
    s = clean(expr)
    return pl.when(s.str.contains(r"^\d+$")).then(pl.lit("P") + s).otherwise(s)


def timestamp(expr: pl.Expr) -> pl.Expr:
    """nvidia-smi `2024/01/16 14:44:16.977`, ISO 8601 (`...T03:48:33.493Z`) or ctime, to UTC.

    nvidia-smi prints local time without a zone; it is taken as UTC.
    """
    s = clean(expr)
    iso = s.str.replace(r"^(\d{4})/(\d{2})/(\d{2})", "$1-$2-$3").str.replace("T", " ")
    ctime = s.str.replace_all(r"\s+", " ").str.to_datetime("%a %b %d %H:%M:%S %Y", strict=False, time_unit="us")
    return pl.coalesce(parse_iso(iso), ctime.dt.replace_time_zone("UTC"))


NVSMI_TS = re.compile(r"^\s*\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d+\s*$")
ISO_Z_TS = re.compile(r"^\s*\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d+Z\s*$")

EXPRS = {
    "int": lambda e: integer(e),
    "num": lambda e: num(e),
    "text": lambda e: text(e),
    "bool": lambda e: yes_no(e),
    "mask": lambda e: hex_mask(e),
    "pstate": lambda e: pstate(e),
    "compute_mode": lambda e: compute_mode(e),
    "bus": lambda e: bus_id(e),
    "ts": lambda e: timestamp(e),
}
# Kinds whose values repeat (names, ids, modes, masks): converted once per distinct value.
LOW_CARDINALITY = {"text", "bool", "mask", "pstate", "compute_mode", "bus"}


def convert(s: pl.Series, kind: str) -> pl.Series:
    """Convert a column of raw cells: the hot path of big files (one expression per column,
    distinct values only for repeating kinds, a fixed-format parse for nvidia-smi timestamps)."""
    if kind == "ts":
        first = s.drop_nulls().head(1).to_list()
        fast = None
        if first and NVSMI_TS.match(first[0]):
            fast = s.str.strip_chars().str.to_datetime("%Y/%m/%d %H:%M:%S%.f", strict=False, time_unit="us")
        elif first and ISO_Z_TS.match(first[0]):
            fast = s.str.strip_chars().str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", strict=False, time_unit="us")
        if fast is not None:
            fast = fast.dt.replace_time_zone("UTC")
            # Cells in another format (a stray header cell, an offset) go through the general parser alone.
            bad = (fast.is_null() & s.is_not_null()).arg_true()
            if bad.len():
                fixed = s.gather(bad).to_frame("v").select(timestamp(pl.col("v"))).to_series()
                fast = fast.scatter(bad, fixed)
            return fast
        return s.to_frame("v").select(timestamp(pl.col("v"))).to_series()
    if kind in LOW_CARDINALITY:
        uniq = s.drop_nulls().unique()
        if uniq.len() * 8 < s.len():
            mapped = uniq.to_frame("v").select(EXPRS[kind](pl.col("v"))).to_series()
            return s.replace_strict(uniq, mapped, default=None, return_dtype=mapped.dtype)
    return s.to_frame("v").select(EXPRS[kind](pl.col("v"))).to_series()


def reasons_from_mask(mask: pl.Expr) -> pl.Expr:
    """Comma-separated names of the reason bits set in `mask` ("" when none, null when unknown)."""
    parts = [
        pl.when((mask & pl.lit(bit, pl.UInt64)) != 0).then(pl.lit(name)).otherwise(None)
        for name, bit in REASON_BITS.items()
    ]
    joined = pl.concat_str(parts, separator=",", ignore_nulls=True)
    return pl.when(mask.is_null()).then(None).otherwise(joined)


def mask_from_flags(flags: dict[str, pl.Expr]) -> pl.Expr:
    """OR the bits of named Active/Not Active fields into a mask (null when no field was printed)."""
    if not flags:
        return pl.lit(None, pl.UInt64)
    bits = [
        pl.when(yes_no(expr)).then(pl.lit(REASON_BITS[name], pl.UInt64)).otherwise(pl.lit(0, pl.UInt64))
        for name, expr in flags.items()
    ]
    any_known = pl.any_horizontal([yes_no(expr).is_not_null() for expr in flags.values()])
    total = bits[0]
    for b in bits[1:]:
        total = total | b
    return pl.when(any_known).then(total).otherwise(None)


def reason_name(label: str) -> str | None:
    """Canonical reason name for a label such as `HW Thermal Slowdown` or `clocks_event_reason_sw_power_cap`."""
    key = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")
    for prefix in ("clocks_event_reasons_", "clocks_throttle_reasons_", "clocks_event_reason_", "clocks_throttle_reason_"):
        if key.startswith(prefix):
            key = key[len(prefix):]
    return REASON_ALIASES.get(key)


def add_reasons(df: pl.DataFrame) -> pl.DataFrame:
    """Fill `throttle_reasons` from `throttle_mask`."""
    if "throttle_mask" not in df.columns:
        return df
    return df.with_columns(reasons_from_mask(pl.col("throttle_mask")).alias("throttle_reasons"))


def _categorical(df: pl.DataFrame, name: str) -> pl.DataFrame:
    """Dictionary-typed schema columns as polars Categoricals: Arrow then casts only the dictionary
    (a handful of values), not a million strings."""
    schema = SCHEMAS[name]
    cats = [f.name for f in schema if pa.types.is_dictionary(f.type) and f.name in df.columns and df.schema[f.name] == pl.String]
    return df.with_columns([pl.col(c).cast(pl.Categorical) for c in cats])


def gpu_table(df: pl.DataFrame, file: str) -> pa.Table:
    """Conform a frame of gpu columns to the `gpu` schema, stamping the file."""
    df = add_reasons(df).with_columns(pl.lit(file).alias("file"))
    return conform("gpu", _categorical(df, "gpu").to_arrow())


def procs_table(df: pl.DataFrame, file: str) -> pa.Table:
    """Conform a frame of gpu_procs columns to the `gpu_procs` schema, stamping the file."""
    df = df.with_columns(pl.lit(file).alias("file"))
    return conform("gpu_procs", _categorical(df, "gpu_procs").to_arrow())


class TelemetrySink:
    """The gpu / gpu_procs rows of one file, conformed chunk by chunk into sinks that spill to the run's spool:
    a capture of any length costs one chunk of memory (the rows of a whole file would cost ~520 MiB per million)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.gpu = spool.TableSink(SCHEMAS["gpu"])
        self.procs = spool.TableSink(SCHEMAS["gpu_procs"])

    def add(self, gpu: pl.DataFrame | None = None, procs: pl.DataFrame | None = None) -> None:
        """One chunk's rows (each row is converted on its own, so chunking never changes a value)."""
        if gpu is not None and gpu.height:
            self.gpu.add(gpu_table(gpu, self.file))
        if procs is not None and procs.height:
            self.procs.add(procs_table(procs, self.file))


def device_faults(lines: pl.DataFrame, source: str) -> pl.DataFrame:
    """gpu rows for `Unable to determine the device handle for GPU <bus>: <reason>` lines."""
    hits = lines.filter(pl.col("text").str.contains("Unable to determine the device handle", literal=True))
    if hits.height == 0:
        return pl.DataFrame()
    return hits.select(
        pl.col("line"),
        bus_id(pl.col("text").str.extract(DEVICE_HANDLE_ERROR, 1)).alias("bus_id"),
        pl.col("text").str.extract(DEVICE_HANDLE_ERROR, 2).str.strip_chars().alias("fault"),
        pl.lit(source).alias("source"),
    )


def place_faults(faults: pl.DataFrame, rows: pl.DataFrame, seq: int, known: dict[str, int]) -> pl.DataFrame:
    """Give fault rows the current sample number and the GPU index their bus id had (`known` is updated)."""
    if rows.height and "bus_id" in rows.columns and "gpu" in rows.columns:
        for b, g in rows.select("bus_id", "gpu").drop_nulls().unique().iter_rows():
            known[b] = int(g)
    return faults.with_columns(
        pl.lit(seq, pl.Int64).alias("seq"),
        pl.col("bus_id").replace_strict(known, default=None, return_dtype=pl.Int32).alias("gpu"),
    )


def stack(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Concatenate frames with different column subsets (missing columns become null)."""
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame()
    return pl.concat(frames, how="diagonal_relaxed")


def renumber(df: pl.DataFrame, offset: int) -> tuple[pl.DataFrame, int]:
    """Shift `seq` by `offset`; return the frame and the next free seq number."""
    if df.height == 0 or "seq" not in df.columns:
        return df, offset
    df = df.with_columns((pl.col("seq").cast(pl.Int64) + offset).alias("seq"))
    top = df.get_column("seq").max()
    return df, (int(top) + 1 if top is not None else offset)


def first_lines(text: str, n: int = 40) -> list[str]:
    """The first `n` non-blank lines of a sniffed head."""
    out = []
    for ln in text.splitlines():
        if ln.strip():
            out.append(ln.rstrip("\r"))
            if len(out) >= n:
                break
    return out

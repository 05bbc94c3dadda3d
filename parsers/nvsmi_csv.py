"""`nvidia-smi --query-gpu=… --format=csv` and `--query-compute-apps=…` output into `gpu` / `gpu_procs`.

Handles (formats.md §3.1, §3.2 and the corpus files): header with or without units, any field
order and subset, aliases (`gpu_name`, `clocks.gr`, `clocks_throttle_reasons.*`), the header
repeated by shell loops, `noheader` files (fields from a `--query-gpu=` command line in the file,
else inferred from the units of the values), `nounits`, `[N/A]` / `[Not Supported]` / `N/A`
placeholders, hex reason masks and named Active/Not Active reason fields, the timestamps
nvidia-smi prints (`2024/01/16 14:44:16.977`, local time taken as UTC) and ISO ones written by
wrapper loops, and `Unable to determine the device handle for GPU …` lines (a lost GPU).

Work is per chunk of lines: header lines are found with one `is_in` over the first field,
each distinct header is parsed once, the data lines of a header are split with one
`str.split` and converted with polars expressions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl
from forensics.parsers import nvsmi_fields as F
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.lines import ReadStats, iter_frames

# Canonical query field -> (gpu column, converter, priority: lower wins when two fields fill one column).
GPU_FIELDS: dict[str, tuple[str, str, int]] = {
    "timestamp": ("ts", "ts", 0),
    "index": ("gpu", "int", 0),
    "name": ("name", "text", 0),
    "uuid": ("uuid", "text", 0),
    "pci.bus_id": ("bus_id", "bus", 0),
    "utilization.gpu": ("utilization_gpu_pct", "num", 0),
    "utilization.memory": ("utilization_mem_pct", "num", 0),
    "memory.used": ("memory_used_mib", "num", 0),
    "memory.total": ("memory_total_mib", "num", 0),
    "memory.free": ("memory_free_mib", "num", 0),
    "temperature.gpu": ("temperature_c", "num", 0),
    "temperature.memory": ("memory_temperature_c", "num", 0),
    "power.draw": ("power_w", "num", 0),
    "power.draw.average": ("power_w", "num", 1),
    "power.draw.instant": ("power_w", "num", 2),
    "enforced.power.limit": ("power_limit_w", "num", 0),
    "power.limit": ("power_limit_w", "num", 1),
    "fan.speed": ("fan_pct", "num", 0),
    "clocks.current.sm": ("sm_clock_mhz", "num", 0),
    "clocks.current.graphics": ("sm_clock_mhz", "num", 1),
    "clocks.max.sm": ("sm_clock_max_mhz", "num", 0),
    "clocks.max.graphics": ("sm_clock_max_mhz", "num", 1),
    "clocks.current.memory": ("mem_clock_mhz", "num", 0),
    "pstate": ("pstate", "pstate", 0),
    "compute_mode": ("compute_mode", "compute_mode", 0),
    "mig.mode.current": ("mig_mode", "text", 0),
    "clocks_event_reasons.active": ("throttle_mask", "mask", 0),
    "ecc.errors.corrected.volatile.total": ("ecc_corrected_volatile", "int", 0),
    "ecc.errors.uncorrected.volatile.total": ("ecc_uncorrected_volatile", "int", 0),
    "ecc.errors.corrected.aggregate.total": ("ecc_corrected_aggregate", "int", 0),
    "ecc.errors.uncorrected.aggregate.total": ("ecc_uncorrected_aggregate", "int", 0),
    "retired_pages.single_bit_ecc.count": ("retired_pages_sbe", "int", 0),
    "retired_pages.double_bit.count": ("retired_pages_dbe", "int", 0),
    "retired_pages.pending": ("retired_pages_pending", "bool", 0),
    "remapped_rows.uncorrectable": ("remapped_rows_uncorrectable", "int", 0),
    "remapped_rows.pending": ("remapped_rows_pending", "bool", 0),
    "pcie.link.gen.gpucurrent": ("pcie_link_gen", "int", 0),
    "pcie.link.gen.current": ("pcie_link_gen", "int", 1),
    "pcie.link.width.current": ("pcie_link_width", "int", 0),
}
PROC_FIELDS: dict[str, tuple[str, str, int]] = {
    "timestamp": ("ts", "ts", 0),
    "name": ("gpu_name", "text", 0),
    "pci.bus_id": ("bus_id", "bus", 0),
    "uuid": ("uuid", "text", 0),
    "pid": ("pid", "int", 0),
    "process_name": ("process", "text", 0),
    "used_gpu_memory": ("used_memory_mib", "num", 0),
}
REASON_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")

# Aliases nvidia-smi accepts in requests (it prints the canonical name in the header), the
# pre-R535 spelling of the reasons, and names written by wrapper loops (nanoGPT PR #643).
ALIASES: dict[str, str] = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "gpu_serial": "serial",
    "clocks.gr": "clocks.current.graphics",
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.video": "clocks.current.video",
    "clocks.max.gr": "clocks.max.graphics",
    "clocks.max.mem": "clocks.max.memory",
    "used_memory": "used_gpu_memory",
    "retired_pages.sbe": "retired_pages.single_bit_ecc.count",
    "retired_pages.dbe": "retired_pages.double_bit.count",
    "gpu_index": "index",
    "gpu": "index",
    "temperature": "temperature.gpu",
    "temp": "temperature.gpu",
    "utilization_gpu": "utilization.gpu",
    "gpu_util": "utilization.gpu",
    "utilization_memory": "utilization.memory",
    "mem_util": "utilization.memory",
    "power": "power.draw",
    "power_draw": "power.draw",
    "memory_used": "memory.used",
    "memory_total": "memory.total",
    "memory_free": "memory.free",
}
# Every header first field we accept: canonical names of the help text plus the aliases.
KNOWN = set(GPU_FIELDS) | set(PROC_FIELDS) | set(ALIASES) | {
    "driver_version", "count", "serial", "pci.domain", "pci.bus", "pci.device", "pci.device_id",
    "pci.sub_device_id", "display_mode", "display_active", "persistence_mode", "vbios_version",
    "gpu_bus_id", "gpu_uuid", "gpu_serial", "process_name", "used_gpu_memory", "pid",
}
# Fields that make a header a compute-apps header (per-process rows).
PROC_MARKERS = {"pid", "process_name", "used_gpu_memory"}
# Per-process query kinds whose rows are not a current process list (skipped, with a note).
SKIP_MARKERS = {"gpu_utilization", "max_memory_usage", "time", "retired_pages.address", "retired_pages.cause"}

UNIT_SUFFIX = re.compile(r"_(?:percent|pct|c|w|mib|mb|mhz)$")


def _drop_unit(key: str) -> str:
    """`name [unit]` -> `name`: what `re.sub(r"\\s*\\[[^\\]]*\\]\\s*$", "", key)` does to a stripped key, in linear time
    (the regex rescans the rest of the cell from every `[` of one that never closes)."""
    if not key.endswith("]"):
        return key
    cut = key.find("[", key.rfind("]", 0, len(key) - 1) + 1)
    return key[:cut] if cut >= 0 else key


def canon(raw: str) -> str:
    """Canonical query field name of one header cell (`clocks.gr [MHz]` -> `clocks.current.graphics`)."""
    key = _drop_unit(raw.strip()).strip().lower()
    for prefix in REASON_PREFIXES:
        if key.startswith(prefix):
            return "clocks_event_reasons." + key[len(prefix):]
    if key in GPU_FIELDS or key in PROC_FIELDS or key in KNOWN - set(ALIASES):
        return key
    if key in ALIASES:
        return ALIASES[key]
    bare = UNIT_SUFFIX.sub("", key)
    for cand in (bare, bare.replace("_", ".")):
        if cand in GPU_FIELDS or cand in PROC_FIELDS:
            return cand
        if cand in ALIASES:
            return ALIASES[cand]
    return key


def _norm_first(expr: pl.Expr) -> pl.Expr:
    """The first CSV cell of a line, lower-cased without its `[unit]`: compared against KNOWN."""
    first = expr.str.extract(r"^\s*([^,]*)", 1).str.replace(r"\s*\[[^\]]*\]\s*$", "").str.strip_chars().str.to_lowercase()
    return first


def _known_first() -> list[str]:
    names = set(KNOWN)
    for prefix in REASON_PREFIXES:
        names |= {prefix + r for r in F.REASON_ALIASES} | {prefix + "active", prefix + "supported"}
    return sorted(names)


KNOWN_FIRST = _known_first()


@dataclass
class Spec:
    """One header: the canonical field of every position and what the rows are."""

    fields: list[str]
    kind: str  # gpu | procs | skip
    inferred: bool = False


@dataclass
class CsvState:
    """What carries from one chunk to the next."""

    spec: Spec | None = None
    tick: int = -1
    last_key: int | None = None
    last_ts: object = None
    last_seg: int = -1
    headers_seen: int = 0
    ids: dict[str, int] = field(default_factory=dict)
    buses: dict[str, int] = field(default_factory=dict)
    # Lines of the file that may hold the `--query-gpu=...` command (for header-less files).
    context: str = ""
    noheader: Spec | None = None
    notes: list[str] = field(default_factory=list)
    bad_lines: int = 0
    skipped_kinds: set[str] = field(default_factory=set)


def spec_of(header: str) -> Spec:
    """Parse one header line."""
    fields = [canon(c) for c in header.split(",")]
    names = set(fields)
    if names & SKIP_MARKERS:
        return Spec(fields, "skip")
    if names & PROC_MARKERS:
        return Spec(fields, "procs")
    return Spec(fields, "gpu")


def spec_from_command(text: str) -> Spec | None:
    """Fields of a `--query-gpu=a,b,c` / `--query-compute-apps a,b` command line found in the text."""
    m = re.search(r"--query-(gpu|compute-apps)[= ]([\w.,]+)", text)
    if not m:
        return None
    spec = spec_of(m.group(2))
    if m.group(1) == "compute-apps":
        spec.kind = "procs"
    return spec


# Value shapes that name a field when the file has no header (nounits files stay unknown).
_SHAPES: list[tuple[str, str]] = [
    (r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d+$", "timestamp"),
    (r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}", "timestamp"),
    (r"^GPU-[0-9a-fA-F-]{36}$", "uuid"),
    (r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$", "pci.bus_id"),
    (r"^P\d{1,2}$", "pstate"),
    (r"^(?:Default|Exclusive_Process|Exclusive_Thread|Prohibited)$", "compute_mode"),
    (r"^0x[0-9A-Fa-f]+$", "clocks_event_reasons.active"),
]
_UNIT_ORDER = {
    "%": ["utilization.gpu", "utilization.memory"],
    "W": ["power.draw", "power.limit"],
    "MHz": ["clocks.current.sm", "clocks.current.memory"],
}


def infer_spec(rows: list[str]) -> Spec | None:
    """Guess the fields of a header-less file from the units and shapes of its first rows."""
    if not rows:
        return None
    cells = [c.strip() for c in rows[0].split(",")]
    fields: list[str] = []
    seen_units: dict[str, int] = {}
    mib_positions = []
    for i, cell in enumerate(cells):
        name = f"_unknown{i}"
        for pattern, fname in _SHAPES:
            if re.match(pattern, cell):
                name = fname
                break
        else:
            m = re.match(r"^[-+]?\d+(?:\.\d+)? (%|W|MHz|MiB)$", cell)
            if m:
                unit = m.group(1)
                if unit == "MiB":
                    mib_positions.append(i)
                else:
                    k = seen_units.get(unit, 0)
                    order = _UNIT_ORDER[unit]
                    if k < len(order):
                        name = order[k]
                    seen_units[unit] = k + 1
            elif i == 0 and re.match(r"^\d{1,2}$", cell) and len(rows) > 1:
                name = "index"
            elif re.match(r"^[A-Za-z].*[A-Za-z0-9]$", cell) and "name" not in fields:
                name = "name"
        fields.append(name)
    # MiB fields: the largest first value is the total; a single one is memory.used.
    if len(mib_positions) == 1:
        fields[mib_positions[0]] = "memory.used"
    elif len(mib_positions) == 2:
        vals = [float(cells[i].split()[0]) for i in mib_positions]
        total = mib_positions[vals.index(max(vals))]
        other = [i for i in mib_positions if i != total][0]
        fields[total], fields[other] = "memory.total", "memory.used"
    # Without a measured field (units), a guess from timestamps and names would be noise.
    if not set(fields) & set(GPU_FIELDS) - {"timestamp", "name", "index", "uuid", "pci.bus_id"}:
        return None
    return Spec(fields, "gpu", inferred=True)


def _plan(spec: Spec) -> tuple[dict[str, tuple[int, str]], dict[str, int]]:
    """Which cell fills which column (the best-priority field wins), and the named reason fields."""
    table = PROC_FIELDS if spec.kind == "procs" else GPU_FIELDS
    best: dict[str, tuple[int, int, str]] = {}
    flags: dict[str, int] = {}
    for i, name in enumerate(spec.fields):
        if spec.kind == "gpu" and name.startswith("clocks_event_reasons.") and name != "clocks_event_reasons.active":
            reason = F.reason_name(name.split(".", 1)[1])
            if reason:
                flags[reason] = i
            continue
        if name not in table:
            continue
        col, conv, prio = table[name]
        if col not in best or prio < best[col][0]:
            best[col] = (prio, i, conv)
    return {col: (i, conv) for col, (_p, i, conv) in best.items()}, flags


def _rows(frame: pl.DataFrame, spec: Spec) -> tuple[pl.DataFrame, int]:
    """Convert the data lines of one header; also return how many had the wrong number of cells."""
    n = len(spec.fields)
    split = frame.select("line", pl.col("_hn").alias("_seg"), pl.col("text").str.split(",").alias("_c"))
    ok = split.filter(pl.col("_c").list.len() == n)
    cols, flags = _plan(spec)
    cell = {i: pl.col("_c").list.get(i) for i in {i for i, _k in cols.values()} | set(flags.values())}
    raw = ok.select("line", "_seg", *[e.alias(f"_r{i}") for i, e in cell.items()])
    out = raw.select("line", "_seg").with_columns(
        [F.convert(raw.get_column(f"_r{i}"), conv).alias(col) for col, (i, conv) in cols.items()]
    )
    if flags and "throttle_mask" not in cols:
        out = out.with_columns(raw.select(F.mask_from_flags({r: pl.col(f"_r{i}") for r, i in flags.items()})).to_series().alias("throttle_mask"))
    return out, split.height - ok.height


def _ticks(df: pl.DataFrame, state: CsvState, kind: str) -> pl.DataFrame:
    """Number the samples (`seq`): a header line starts one, and so does a GPU index that does not
    increase (gpu rows: one row per GPU per sample) or a new timestamp (process rows)."""
    if df.height == 0:
        return df
    df = df.sort("line")
    seg = pl.col("_seg")
    new = seg != seg.shift(1, fill_value=state.last_seg)
    if kind == "gpu":
        key = pl.col("_key")
        new = new | key.is_null() | (key <= key.shift(1, fill_value=state.last_key if state.last_key is not None else -1))
    elif "ts" in df.columns:
        ts = pl.col("ts")
        prev = ts.shift(1)
        if state.last_ts is not None:
            prev = prev.fill_null(pl.lit(state.last_ts, dtype=df.schema["ts"]))
        new = new | (ts != prev).fill_null(False)
    if state.tick < 0:
        new = new | (pl.int_range(pl.len()) == 0)
    df = df.with_columns((pl.lit(state.tick, pl.Int64) + new.cast(pl.Int64).cum_sum()).alias("seq"))
    state.tick = int(df.get_column("seq").max())
    state.last_seg = int(df.get_column("_seg")[-1])
    if kind == "gpu":
        last = df.get_column("_key")[-1]
        state.last_key = None if last is None else int(last)
    elif "ts" in df.columns:
        state.last_ts = df.get_column("ts")[-1]
    return df


def _gpu_keys(df: pl.DataFrame, state: CsvState) -> pl.DataFrame:
    """`gpu` from the index column, else from uuid / bus id in order of first appearance."""
    if "gpu" in df.columns:
        df = df.with_columns(pl.col("gpu").cast(pl.Int32))
    for idcol in ("uuid", "bus_id"):
        if "gpu" in df.columns and df.get_column("gpu").null_count() == 0:
            break
        if idcol not in df.columns:
            continue
        for value in df.get_column(idcol).unique(maintain_order=True).drop_nulls().to_list():
            state.ids.setdefault(value, len(state.ids))
        mapped = pl.col(idcol).replace_strict(state.ids, default=None, return_dtype=pl.Int32)
        df = df.with_columns((pl.coalesce(pl.col("gpu"), mapped) if "gpu" in df.columns else mapped).alias("gpu"))
    if "gpu" not in df.columns:
        df = df.with_columns(pl.lit(None, pl.Int32).alias("gpu"))
    return df.with_columns(pl.col("gpu").alias("_key"))


def parse_lines(frame: pl.DataFrame, state: CsvState) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One chunk of lines (`line`, `text`) of CSV output into gpu and gpu_procs frames."""
    lines = frame.filter(pl.col("text").str.len_bytes() > 0).select("line", "text")
    if lines.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    faults = F.device_faults(lines, "query_gpu")
    if faults.height:
        lines = lines.filter(~pl.col("text").str.contains("Unable to determine the device handle", literal=True))
    # Headers start with a field name: only lines that start with a letter are looked at closely.
    cand = lines.filter(pl.col("text").str.contains(r"^\s*[A-Za-z_]"))
    head_lines = cand.filter(_norm_first(pl.col("text")).is_in(KNOWN_FIRST)).get_column("line")
    lines = lines.with_columns(pl.col("line").is_in(head_lines.implode()).alias("_h"))
    headers = lines.filter(pl.col("_h"))
    # Specs by distinct header text: parsed once each, never per line.
    specs: list[Spec | None] = [state.spec]
    texts = headers.get_column("text").to_list()
    by_text: dict[str, int] = {}
    seg_of_header = []
    for t in texts:
        if t not in by_text:
            specs.append(spec_of(t))
            by_text[t] = len(specs) - 1
        seg_of_header.append(by_text[t])
    lines = lines.join(
        headers.select("line").with_columns(pl.Series("_hs", seg_of_header, dtype=pl.Int64)), on="line", how="left"
    ).sort("line")
    lines = lines.with_columns(pl.col("_hs").forward_fill().fill_null(0).alias("_seg"))
    # Each header row starts a new segment even when its text repeats (a new sample).
    lines = lines.with_columns((pl.col("_h").cast(pl.Int64).cum_sum() + state.headers_seen).alias("_hn"))
    state.headers_seen += headers.height
    data = lines.filter(~pl.col("_h"))
    if specs[0] is None and data.filter(pl.col("_seg") == 0).height:
        if state.noheader is None:
            head = data.filter(pl.col("_seg") == 0).head(5).get_column("text").to_list()
            state.noheader = spec_from_command(state.context) or infer_spec(head)
            if state.noheader is not None:
                state.notes.append("no CSV header: fields " + ("inferred from the units of the values" if state.noheader.inferred else "taken from the command line"))
            else:
                state.notes.append("CSV without a header and without units: the field order cannot be known "
                                   "(keep the header: drop `noheader` from --format)")
        specs[0] = state.noheader
    gpu_parts, proc_parts = [], []
    for seg in data.get_column("_seg").unique().to_list():
        spec = specs[seg]
        rows = data.filter(pl.col("_seg") == seg)
        if spec is None:
            state.bad_lines += rows.height
            continue
        if spec.kind == "skip":
            state.skipped_kinds.add(",".join(spec.fields[:3]))
            continue
        out, bad = _rows(rows, spec)
        state.bad_lines += bad
        (proc_parts if spec.kind == "procs" else gpu_parts).append(out)
    if headers.height:
        state.spec = specs[by_text[texts[-1]]]
    gpu = F.stack(gpu_parts)
    if gpu.height:
        gpu = _ticks(_gpu_keys(gpu, state), state, "gpu").drop("_key", "_seg")
        gpu = gpu.with_columns(pl.lit("query_gpu").alias("source"))
    if faults.height:
        # A lost GPU belongs to the sample being printed when nvidia-smi failed to reach it.
        gpu = F.stack([gpu, F.place_faults(faults, gpu, max(state.tick, 0), state.buses)]).sort("line")
    procs = F.stack(proc_parts)
    if procs.height:
        procs = _ticks(procs, state, "procs").drop("_seg")
        procs = procs.with_columns(pl.lit("query_compute_apps").alias("source"))
    return gpu, procs


def finish_notes(state: CsvState) -> list[str]:
    """User-facing notes about what was not read."""
    notes = list(state.notes)
    if state.bad_lines:
        notes.append(f"{state.bad_lines} line(s) that are not rows of the CSV header were skipped")
    if state.skipped_kinds:
        notes.append("accounted-apps / retired-pages queries are not sample data; skipped")
    return notes


def parse(src, sn: Sniffed) -> ParseResult:
    """Parse one query-gpu / query-compute-apps CSV file."""
    stats = ReadStats()
    state = CsvState()
    state.context = "\n".join(ln for ln in F.first_lines(sn.text, 200) if "--query-" in ln)
    sink = F.TelemetrySink(src.rel)
    for frame in iter_frames(src, stats=stats):
        sink.add(*parse_lines(frame, state))
    return sink_result(src, sink, finish_notes(state) + stats.problems(), stats)


def result_of(src, gpu_parts, proc_parts, notes, stats: ReadStats | None = None) -> ParseResult:
    """A ParseResult from gpu / procs frames held in memory (a small file's), with a status that says what was read."""
    sink = F.TelemetrySink(src.rel)
    sink.add(F.stack(gpu_parts), F.stack(proc_parts))
    return sink_result(src, sink, notes, stats)


def sink_result(src, sink: F.TelemetrySink, notes, stats: ReadStats | None = None) -> ParseResult:
    """A ParseResult from the rows a streaming parser put in `sink`, with a status that says what was read."""
    res = ParseResult()
    res.tables["gpu"] = sink.gpu.table()
    res.tables["gpu_procs"] = sink.procs.table()
    problems = notes + list(src.problems)
    if sink.gpu.rows == 0 and sink.procs.rows == 0 and any("cannot be known" in n for n in notes):
        res.status = "unrecognized"
        res.error = "; ".join(problems) or "no nvidia-smi samples found"
        return res
    if problems:
        res.error = "; ".join(problems)
    if src.truncated or (stats is not None and (stats.invalid_utf8 or stats.nul_bytes)):
        res.status = "partial"
    return res


def sniff(sn: Sniffed) -> int:
    """A header of known query fields, or rows with nvidia-smi timestamps and units, say CSV."""
    lines = F.first_lines(sn.text, 30)
    if not lines:
        return 0
    first = lines[0]
    cells = [canon(c) for c in first.split(",")]
    known = [c for c in cells if c in GPU_FIELDS or c in PROC_FIELDS or c.startswith("clocks_event_reasons.") or c in KNOWN]
    if len(cells) >= 1 and len(known) >= max(1, int(0.6 * len(cells))) and (len(cells) >= 2 or cells[0] in GPU_FIELDS):
        return 80
    rows = [ln for ln in lines if ln.count(",") >= 2]
    if len(rows) >= max(1, int(0.8 * len(lines))):
        if sum(bool(re.match(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d{3}, ", ln)) for ln in rows) >= 0.8 * len(rows):
            return 60
        if infer_spec(rows[:3]) is not None and all(re.search(r", [-\d.]+ (?:%|MiB|W|MHz)(?:,|$)", ln) for ln in rows[:5]):
            return 55
    return 0


PARSER = Parser(kind="nvsmi_query_csv", quotable=True, sniff=sniff, parse=parse, description="nvidia-smi --query-gpu / --query-compute-apps CSV")

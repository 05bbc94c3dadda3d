"""Arrow schemas of the evidence tables: the contract between parsers and playbooks."""

from __future__ import annotations

import pyarrow as pa

# Dictionary-encoded string: names, codes and kinds repeat a lot.
DICT_STR = pa.dictionary(pa.int32(), pa.string())
TS = pa.timestamp("us", tz="UTC")

FILES = pa.schema(
    [
        ("file", pa.string()),
        ("kind", DICT_STR),
        ("bytes", pa.int64()),
        ("compression", DICT_STR),
        ("parser", DICT_STR),
        ("status", DICT_STR),
        ("error", pa.string()),
        ("rows", pa.int64()),
        ("rank", pa.int32()),
    ]
)

EVENTS = pa.schema(
    [
        ("file", DICT_STR),
        ("line", pa.int64()),
        ("end_line", pa.int64()),
        ("ts", TS),
        ("rank", pa.int32()),
        ("step", pa.int64()),
        ("code", DICT_STR),
        ("severity", DICT_STR),
        ("message", pa.string()),
        ("text", pa.string()),
        # Named captures of the signature as a JSON object of strings.
        ("fields", pa.string()),
        # How many events of its file and code this row stands for, when a parser's budget counted repeats
        # instead of keeping them (parsers/repeats.py); null (one) on every other row.
        ("repeats", pa.int64()),
    ]
)

METRICS = pa.schema(
    [
        ("file", DICT_STR),
        ("line", pa.int64()),
        ("ts", TS),
        ("rank", pa.int32()),
        ("step", pa.int64()),
        ("name", DICT_STR),
        ("value", pa.float64()),
        # Which metric grammar produced the row (hf_dict, megatron, ...).
        ("source", DICT_STR),
    ]
)

# One nvidia-smi / DCGM sample of one GPU (or one MIG device of it). Units are in the names;
# a value the tool printed as N/A, [Not Supported], `-` ... is null.
GPU = pa.schema(
    [
        ("file", DICT_STR),
        ("line", pa.int64()),
        ("ts", TS),
        # Sample number in file order (0-based): trends work for samples with no time of their own.
        ("seq", pa.int64()),
        # Which printout the row came from: query_gpu, dmon, nvsmi_q, nvsmi_xml, nvsmi_table, dcgm_dmon.
        ("source", DICT_STR),
        ("gpu", pa.int32()),
        # MIG device index under `gpu` (null for the physical GPU's own row).
        ("mig_device", pa.int32()),
        ("uuid", pa.string()),
        ("bus_id", pa.string()),
        ("name", DICT_STR),
        # Set when the tool reported the device itself as failing: "GPU is lost", "Unknown Error", "ERR!".
        ("fault", DICT_STR),
        ("utilization_gpu_pct", pa.float64()),
        ("utilization_mem_pct", pa.float64()),
        ("memory_used_mib", pa.float64()),
        ("memory_total_mib", pa.float64()),
        ("memory_free_mib", pa.float64()),
        ("temperature_c", pa.float64()),
        ("memory_temperature_c", pa.float64()),
        ("power_w", pa.float64()),
        ("power_limit_w", pa.float64()),
        ("fan_pct", pa.float64()),
        ("sm_clock_mhz", pa.float64()),
        ("sm_clock_max_mhz", pa.float64()),
        ("mem_clock_mhz", pa.float64()),
        ("pstate", DICT_STR),
        ("compute_mode", DICT_STR),
        ("mig_mode", DICT_STR),
        # NVML clocks-event (throttle) reason bits (GpuIdle 0x1, SwPowerCap 0x4, HwSlowdown 0x8,
        # SwThermalSlowdown 0x20, HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80, ...) and
        # the active ones by name, comma-separated ("" when none is active).
        ("throttle_mask", pa.uint64()),
        ("throttle_reasons", DICT_STR),
        # nvidia-smi dmon -s v: % of time held back by the power cap, and thermal violation (0/1).
        ("power_violation_pct", pa.float64()),
        ("thermal_violation", pa.float64()),
        ("ecc_corrected_volatile", pa.int64()),
        ("ecc_uncorrected_volatile", pa.int64()),
        ("ecc_corrected_aggregate", pa.int64()),
        ("ecc_uncorrected_aggregate", pa.int64()),
        ("retired_pages_sbe", pa.int64()),
        ("retired_pages_dbe", pa.int64()),
        ("retired_pages_pending", pa.bool_()),
        ("remapped_rows_uncorrectable", pa.int64()),
        ("remapped_rows_pending", pa.bool_()),
        ("pcie_link_gen", pa.int32()),
        ("pcie_link_width", pa.int32()),
        ("pcie_rx_mb_per_s", pa.float64()),
        ("pcie_tx_mb_per_s", pa.float64()),
        # DCGM profiling fractions (0..1): GRACT, SMACT, SMOCC, TENSO, DRAMA.
        ("gr_active_ratio", pa.float64()),
        ("sm_active_ratio", pa.float64()),
        ("sm_occupancy_ratio", pa.float64()),
        ("tensor_active_ratio", pa.float64()),
        ("dram_active_ratio", pa.float64()),
    ]
)

# One process seen on one GPU at one sample (query-compute-apps, pmon, the table's Processes
# section, -q / -q -x process lists). `gpu` is null when the printout names the GPU only by
# uuid or bus id (query-compute-apps): join on those against `gpu`.
GPU_PROCS = pa.schema(
    [
        ("file", DICT_STR),
        ("line", pa.int64()),
        ("ts", TS),
        ("seq", pa.int64()),
        ("source", DICT_STR),
        ("gpu", pa.int32()),
        ("uuid", pa.string()),
        ("bus_id", pa.string()),
        ("pid", pa.int64()),
        ("process", pa.string()),
        ("used_memory_mib", pa.float64()),
        # C (compute), G (graphics), C+G, M (MPS) ...
        ("type", DICT_STR),
        ("gpu_instance_id", pa.int32()),
        ("compute_instance_id", pa.int32()),
        # pmon: SM and memory utilisation of this process, %.
        ("sm_pct", pa.float64()),
        ("mem_pct", pa.float64()),
    ]
)

# One trace event (Kineto op/kernel/runtime call, VizTracer function call, instant marker).
# `line` is the event's index in `traceEvents` (0-based); `ts_us`/`dur_us` are the trace's own
# microsecond clock, `ts` the absolute UTC time where the trace says how (baseTimeNanoseconds,
# epoch-based Kineto timestamps). `kind` is `cat` normalised across writers and eras
# (Operator -> cpu_op, Runtime -> cuda_runtime, FEE/fee -> function, ...). `args` is the
# event's raw JSON args for VizTracer (function arguments and return values, small); Kineto
# args stay in the file (null here: copying them was most of a big trace's load time) and
# `parsers.chrome_trace.args_of(buf, lines)` fetches those of chosen rows by `line`.
SPANS = pa.schema(
    [
        ("file", DICT_STR),
        ("line", pa.int64()),
        ("source", DICT_STR),
        ("rank", pa.int32()),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
        ("thread", DICT_STR),
        ("ph", DICT_STR),
        ("name", DICT_STR),
        ("cat", DICT_STR),
        ("kind", DICT_STR),
        ("ts_us", pa.float64()),
        ("dur_us", pa.float64()),
        ("ts", TS),
        ("stream", pa.int64()),
        ("device", pa.int64()),
        ("correlation", pa.int64()),
        ("external_id", pa.int64()),
        ("step", pa.int64()),
        # VizTracer function names `qualname (file:line)` split apart.
        ("func", DICT_STR),
        ("src_file", DICT_STR),
        ("src_line", pa.int64()),
        ("args", pa.large_string()),
    ]
)

# One sample of a counter: Kineto `[memory]` totals, `C` counter events (VizTracer log_var,
# VizCounter, gc), numeric VizTracer `name = value` instants, memory-timeline exports.
# `name` is the counter, `series` the key inside it (a `C` event's args key, a memory category).
COUNTERS = pa.schema(
    [
        ("file", DICT_STR),
        ("line", pa.int64()),
        ("source", DICT_STR),
        ("rank", pa.int32()),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
        ("name", DICT_STR),
        ("series", DICT_STR),
        ("device", pa.int64()),
        ("ts_us", pa.float64()),
        ("ts", TS),
        ("step", pa.int64()),
        ("value", pa.float64()),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    "files": FILES,
    "events": EVENTS,
    "metrics": METRICS,
    "gpu": GPU,
    "gpu_procs": GPU_PROCS,
    "spans": SPANS,
    "counters": COUNTERS,
}

# The tables parsers produce (files is produced by discovery).
EVIDENCE_TABLES = ("events", "metrics", "gpu", "gpu_procs", "spans", "counters")


def empty(name: str) -> pa.Table:
    """An empty table with the schema of `name`."""
    return SCHEMAS[name].empty_table()


def conform(name: str, table: pa.Table) -> pa.Table:
    """Cast `table` to the schema of `name`: missing columns become nulls, extra ones are dropped."""
    schema = SCHEMAS[name]
    n = table.num_rows
    cols = []
    for field in schema:
        if field.name in table.column_names:
            col = table.column(field.name)
            if pa.types.is_dictionary(col.type) and any(c.dictionary.null_count for c in col.chunks):
                # A null inside the dictionary (not as a null index) cannot be written to Parquet.
                col = col.cast(col.type.value_type)
            if col.type != field.type:
                if pa.types.is_dictionary(field.type) and not pa.types.is_dictionary(col.type):
                    col = col.cast(pa.string()).dictionary_encode().cast(field.type)
                else:
                    col = col.cast(field.type)
            cols.append(col)
        else:
            cols.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(cols, schema=schema)


def concat(name: str, tables: list[pa.Table]) -> pa.Table:
    """Concatenate tables of one kind, unifying dictionaries."""
    parts = [conform(name, t) for t in tables if t is not None and t.num_rows]
    if not parts:
        return empty(name)
    return pa.concat_tables(parts, promote_options="default").unify_dictionaries().combine_chunks()

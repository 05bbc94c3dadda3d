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

GPU = pa.schema(
    [
        ("file", DICT_STR),
        ("line", pa.int64()),
        ("ts", TS),
        ("seq", pa.int64()),
        ("gpu", pa.int32()),
        ("uuid", pa.string()),
        ("name", DICT_STR),
        ("utilization_gpu", pa.float64()),
        ("utilization_mem", pa.float64()),
        ("memory_used_mib", pa.float64()),
        ("memory_total_mib", pa.float64()),
        ("temperature_c", pa.float64()),
        ("power_w", pa.float64()),
        ("power_limit_w", pa.float64()),
        ("sm_clock_mhz", pa.float64()),
        ("mem_clock_mhz", pa.float64()),
        ("throttle_reasons", pa.string()),
        ("compute_mode", DICT_STR),
        ("pstate", DICT_STR),
        ("ecc_uncorrected", pa.float64()),
        ("ecc_corrected", pa.float64()),
        ("retired_pages_pending", pa.string()),
        ("source", DICT_STR),
    ]
)

GPU_PROCS = pa.schema(
    [
        ("file", DICT_STR),
        ("line", pa.int64()),
        ("ts", TS),
        ("gpu", pa.int32()),
        ("uuid", pa.string()),
        ("pid", pa.int64()),
        ("process", pa.string()),
        ("used_memory_mib", pa.float64()),
        ("type", DICT_STR),
    ]
)

SPANS = pa.schema(
    [
        ("file", DICT_STR),
        ("line", pa.int64()),
        ("source", DICT_STR),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
        ("name", DICT_STR),
        ("cat", DICT_STR),
        ("ts_us", pa.float64()),
        ("dur_us", pa.float64()),
        ("stream", pa.int64()),
        ("device", pa.int64()),
        ("correlation", pa.int64()),
        ("step", pa.int64()),
        ("args", pa.string()),
    ]
)

COUNTERS = pa.schema(
    [
        ("file", DICT_STR),
        ("line", pa.int64()),
        ("source", DICT_STR),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
        ("name", DICT_STR),
        ("ts_us", pa.float64()),
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

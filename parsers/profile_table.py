"""`prof.key_averages().table()` printouts found in text logs, as a profile summary in `counters`.

Layout (torch/autograd/profiler_util.py `_build_table`): a dash line (one run of dashes per
column, two spaces apart), the header row, a dash line, one row per op, a dash line, then
`Self CPU time total: X` (and `Self CUDA time total: Y` when device time exists). Columns are
cut at the dash runs' positions. Each cell becomes one counters row: `name` is the measure
(`self_cpu_us`, `cpu_total_us`, `self_device_us`, `calls`, `cpu_mem_bytes`, ...), `series` the
op name, `source` = `key_averages`, `line` the row's line in the log. The totals lines give
`self_cpu_total_us` / `self_device_total_us` (series null).
"""

from __future__ import annotations

import re

import polars as pl

from forensics.contracts import tables as T

SOURCE = "key_averages"
HEADER = "Self CPU %"
_DASHES = re.compile(r"-{3,}")
_TIME = re.compile(r"^(-?[\d.]+)(us|ms|s)$")
_MEM = re.compile(r"^(-?[\d.]+) (B|KB|MB|GB|TB)$")
_UNIT_US = {"us": 1.0, "ms": 1e3, "s": 1e6}
_UNIT_B = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
_TOTAL = re.compile(r"Self (\w+) time total:\s*(\S+)")

# Header title -> measure name (device columns are titled with the device name: CUDA, XPU, ...).
_COLUMNS = {
    "Self CPU %": "self_cpu_pct", "Self CPU": "self_cpu_us", "CPU total %": "cpu_total_pct", "CPU total": "cpu_total_us",
    "CPU time avg": "cpu_avg_us", "CPU Mem": "cpu_mem_bytes", "Self CPU Mem": "self_cpu_mem_bytes", "# of Calls": "calls",
}
# Device columns are titled with the upper-cased device name (CUDA, XPU, ...).
_DEVICE_TITLE = re.compile(r"(Self )?([A-Z][A-Za-z0-9]*)( %| total %| total| time avg| Mem)?")
_DEVICE_MEASURE = {("", True): "self_device_us", ("%", True): "self_device_pct", ("total %", False): "device_total_pct",
                   ("total", False): "device_total_us", ("time avg", False): "device_avg_us", ("Mem", False): "device_mem_bytes",
                   ("Mem", True): "self_device_mem_bytes"}


def _measure(title: str) -> str | None:
    """The measure a column holds, or None for text columns (Name, Input Shapes, Source Location...)."""
    if title in _COLUMNS:
        return _COLUMNS[title]
    m = _DEVICE_TITLE.fullmatch(title)
    if not m or m.group(2) in ("Name", "Input", "Source", "Node", "Overload", "Total"):
        return None
    return _DEVICE_MEASURE.get(((m.group(3) or "").strip(), bool(m.group(1))))


def value_of(cell: str) -> float | None:
    """`426.077ms` -> 426077.0 (µs); `90.00 MB` -> bytes; `21.53%` -> 21.53; `7680` -> 7680."""
    cell = cell.strip()
    if not cell or cell == "--":
        return None
    m = _TIME.match(cell)
    if m:
        return float(m.group(1)) * _UNIT_US[m.group(2)]
    m = _MEM.match(cell)
    if m:
        return float(m.group(1)) * _UNIT_B[m.group(2)]
    if cell.endswith("%"):
        try:
            return float(cell[:-1])
        except ValueError:
            return None
    try:
        return float(cell)
    except ValueError:
        return None


def parse_table(lines: list[tuple[int, str]]) -> list[dict]:
    """Counter rows from one table: `lines` = (line number, text) from the dash line above the header on."""
    first = lines[0][1]
    runs = list(_DASHES.finditer(first))
    if len(runs) < 3:
        return []
    cols = [(m.start(), m.end()) for m in runs]
    # Titles can be wider than their column ("CUDA time avg" in a 12-wide column shifts the rest
    # of the header line), so the header is split on runs of 2+ spaces; rows use the dash runs.
    titles = re.split(r"\s{2,}", lines[1][1].strip())
    if len(titles) != len(cols):
        return []
    measures = [_measure(t) for t in titles]
    out: list[dict] = []
    body = lines[3:]
    for lineno, text in body:
        if text.strip().startswith("---"):
            continue
        tm = _TOTAL.search(text)
        if tm:
            v = value_of(tm.group(2))
            who = "cpu" if tm.group(1) == "CPU" else "device"
            out.append({"line": lineno, "name": f"self_{who}_total_us", "series": None, "value": v})
            continue
        if not text.strip():
            break
        name = text[cols[0][0]:cols[0][1]].strip()
        for (a, b), measure in zip(cols[1:], measures[1:], strict=True):
            if measure is None:
                continue
            v = value_of(text[a:b])
            if v is not None:
                out.append({"line": lineno, "name": measure, "series": name, "value": v})
    return out


def header_rows(frame: pl.DataFrame, is_header: pl.Expr) -> tuple[list[str], list[int], list[int]]:
    """The frame's texts and line numbers as lists, and the positions in them of the rows `is_header` selects
    (empty lists when there is none): the few table headers are found by one vectorised filter, and only the
    rows after each are read in Python."""
    positions = frame.with_row_index("_pos").filter(is_header).get_column("_pos").to_list()
    if not positions:
        return [], [], []
    return frame.get_column("text").to_list(), frame.get_column("line").to_list(), positions


def from_log(frame: pl.DataFrame, state: dict) -> None:
    """Text-log hook: collect key_averages tables of one frame into `state["profile_table"]`."""
    texts, numbers, heads = header_rows(
        frame, pl.col("text").str.contains(HEADER, literal=True) & pl.col("text").str.contains("Name", literal=True))
    if not heads:
        return
    rows = state.setdefault("profile_table", [])
    for i in heads:
        if i == 0 or not texts[i - 1].lstrip().startswith("---"):
            continue
        # The table body ends after the totals lines (at most a few hundred rows).
        end = i + 1
        while end < len(texts) and end - i < 2000:
            if texts[end].lstrip().startswith("Self ") and "time total" in texts[end]:
                end += 1
                if end < len(texts) and "time total" in texts[end]:
                    end += 1
                break
            end += 1
        # Strip a per-line prefix (e.g. `[rank0]:`) by aligning on the dash line's first dash.
        cut = texts[i - 1].index("-")
        lines = [(numbers[k], texts[k][cut:]) for k in range(i - 1, end)]
        rows.extend(parse_table(lines))


def log_tables(state: dict, rel: str, rank: int | None) -> dict:
    """The collected profile rows as a counters table (empty dict when the log had none)."""
    return counters_of(state.get("profile_table"), rel, SOURCE, rank)


def counters_of(rows: list[dict] | None, rel: str, source: str, rank: int | None) -> dict:
    """Summary rows (line, name, series, value) of one log as its counters table; empty dict for none."""
    if not rows:
        return {}
    df = pl.DataFrame(rows, schema={"line": pl.Int64, "name": pl.String, "series": pl.String, "value": pl.Float64})
    df = df.with_columns(pl.lit(rel).alias("file"), pl.lit(source).alias("source"), pl.lit(rank, dtype=pl.Int32).alias("rank"))
    return {"counters": T.conform("counters", df.to_arrow())}

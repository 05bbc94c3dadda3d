"""HuggingFace `trainer_state.json`: every `log_history` entry into metric rows (formats.md §1.1).

The file is `json.dumps(asdict(state), indent=2, sort_keys=True)`: each entry of `log_history` is
`    {` then one `      "key": value,` line per key, so rows are read line by line with polars and
each carries the line of its own key (evidence quotes point at `"loss": NaN`). Python's json writes
non-finite floats as bare `NaN`, `Infinity`, `-Infinity`; they stay NaN/Inf. The entry's `step` key
gives the step. A file laid out otherwise (minified, re-indented) is read with Python's json module
instead (it accepts the bare constants; orjson does not), with the entry's position as its line.
"""

from __future__ import annotations

import json

import polars as pl
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.metric_grammars.common import canonical, num

from forensics.contracts.tables import conform

SOURCE = "trainer_state"
KEY_LINE = r'^      "(?P<key>[^"]+)": (?P<val>.*?),?$'


def sniff(sn: Sniffed) -> int:
    """A JSON object whose head holds the `log_history` key of a TrainerState."""
    head = sn.text.lstrip()
    return 90 if head.startswith("{") and '"log_history": [' in head else 0


def _by_layout(text: str) -> pl.DataFrame | None:
    lines = pl.DataFrame({"text": pl.Series([text]).str.split("\n").explode()}).with_row_index("line", offset=1)
    start = lines.filter(pl.col("text") == '  "log_history": [').get_column("line")
    if start.len() != 1:
        return None
    s = int(start[0])
    end = lines.filter((pl.col("line") > s) & pl.col("text").str.starts_with("  ]")).get_column("line")
    e = int(end[0]) if end.len() else lines.height + 1
    region = lines.filter((pl.col("line") > s) & (pl.col("line") < e))
    region = region.with_columns((pl.col("text") == "    {").cum_sum().alias("entry"))
    kv = region.filter(pl.col("text").str.contains(KEY_LINE)).with_columns(
        pl.col("text").str.extract_groups(KEY_LINE)).unnest("text")
    if kv.height == 0:
        return None
    return kv.select("line", "entry", "key", "val")


def _by_json(text: str) -> pl.DataFrame:
    history = json.loads(text).get("log_history") or []
    rows = [
        {"line": i + 1, "entry": i, "key": str(k), "val": json.dumps(v)}
        for i, entry in enumerate(history) if isinstance(entry, dict)
        for k, v in entry.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    return pl.DataFrame(rows, schema={"line": pl.Int64, "entry": pl.Int64, "key": pl.String, "val": pl.String})


def parse(src, sn: Sniffed) -> ParseResult:
    """Rows (line, step, name, value) for every numeric key of every log_history entry."""
    raw = src.read_all()
    text = raw.decode("utf-8", errors="replace")
    kv = _by_layout(text)
    if kv is None:
        try:
            kv = _by_json(text)
        except (ValueError, AttributeError) as exc:
            return ParseResult(status="failed", error=f"trainer_state.json is not valid JSON: {exc}")
    kv = kv.with_columns(num(pl.col("val")).alias("value"))
    steps = kv.filter(pl.col("key") == "step").select("entry", pl.col("value").cast(pl.Int64, strict=False).alias("step"))
    metrics = (
        kv.filter(pl.col("key") != "step")
        .join(steps, on="entry", how="left", maintain_order="left")
        .filter(pl.col("value").is_not_null())
        .select(
            pl.lit(src.rel).alias("file"),
            pl.col("line").cast(pl.Int64),
            "step",
            canonical(pl.col("key")).alias("name"),
            "value",
            pl.lit(SOURCE).alias("source"),
        )
        .sort("line")
    )
    result = ParseResult()
    result.tables["metrics"] = conform("metrics", metrics.to_arrow())
    if src.problems:
        result.status = "partial" if src.truncated else "parsed"
        result.error = "; ".join(src.problems)
    return result


PARSER = Parser(kind="trainer_state", quotable=True, sniff=sniff, parse=parse, description="HuggingFace trainer_state.json log_history")

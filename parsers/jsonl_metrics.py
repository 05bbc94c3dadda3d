"""JSON-lines metric files (LLaMA-Factory `trainer_log.jsonl`, fairseq/metaseq json logs saved alone,
MAE/DeiT `log.txt`, hand-written `metrics.jsonl`): one JSON object per line -> metric rows.

Recognised by content, whatever the file is called: the first non-empty lines are JSON objects and
one of them has a loss-like or step key (a config dump is not a metric file). The whole file is decoded by one call of
Python's json module (it accepts the bare NaN/Infinity that json.dumps writes; orjson does not);
when one line is broken (a run killed mid-write), lines are decoded one by one and the file is
`partial`; with more broken lines the file is read as a text log instead. Nested objects are flattened with `/` (`{"train": {"loss": 1}}` -> `train/loss`). Names
follow the same canonical table as JSON lines inside text logs (`current_steps` is the step,
`learning_rate` -> `lr`, `vram_allocated` GiB -> `mem_allocated_mib`, ...); numbers printed as strings (fairseq's
`"loss": "3.097"`) are read, strings that are not numbers (`"elapsed_time": "0:01:23"`) and nulls give no row. Metric files are small (one line per
logging step), so the flattening is a plain loop over records, not on the text-log hot path.
"""

from __future__ import annotations

import json
import re

import polars as pl
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.metric_grammars.generic import STEP_KEYS, rows_from_pairs

from forensics.contracts.tables import conform

SOURCE = "jsonl"
_METRIC_KEY = re.compile(r'"(?:[\w/.-]*loss[\w/.-]*|' + "|".join(map(re.escape, STEP_KEYS)) + r')"\s*:')


def sniff(sn: Sniffed) -> int:
    """Every complete non-empty line of the head is a one-line JSON object, one with a loss-like or step key.

    The last line of the head may be cut (the head ends mid-line, or the run died mid-write).
    """
    lines = sn.text.split("\n")
    if not sn.text.endswith("\n") and len(lines) > 1:
        lines = lines[:-1]
    lines = [ln.strip() for ln in lines if ln.strip()]
    if not lines or not all(ln.startswith("{") and ln.endswith("}") for ln in lines):
        return 0
    return 60 if any(_METRIC_KEY.search(ln) for ln in lines[:50]) else 0


def _flatten(obj: dict, prefix: str = ""):
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flatten(value, name + "/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield name, value
        elif isinstance(value, str):
            # A number printed as a string (fairseq's json log: `"loss": "3.097"`, `"clip": "100%"`) is read as the JSON
            # grammar of text logs reads it; mmcv `log.json`'s `"mode": "val"` makes the record's names `eval_`
            # (generic.rows_from_pairs); any other string gives no value there, so no row.
            yield name, value


def _records(text: str) -> tuple[list[tuple[int, dict]], int]:
    """(line number, object) pairs and the count of lines that are not JSON objects."""
    numbered = [(i + 1, ln) for i, ln in enumerate(text.split("\n")) if ln.strip()]
    try:
        objs = json.loads("[" + ",".join(ln for _, ln in numbered) + "]")
        return [(n, o) for (n, _), o in zip(numbered, objs, strict=True) if isinstance(o, dict)], 0
    except ValueError:
        pass
    out, bad = [], 0
    for n, ln in numbered:
        try:
            obj = json.loads(ln)
        except ValueError:
            bad += 1
            continue
        if isinstance(obj, dict):
            out.append((n, obj))
    return out, bad


def parse(src, sn: Sniffed) -> ParseResult:
    """Metric rows of every numeric key of every object."""
    text = src.read_all().decode("utf-8", errors="replace")
    records, bad = _records(text)
    if bad > 1:
        # Not a metrics file after all (a log that began with JSON lines): read it as a text log, which
        # reads JSON metric lines too and keeps the error events the rest may hold.
        from forensics.parsers import textlog

        return textlog.parse(src, sn)
    flat = [(n, k, json.dumps(v)) for n, obj in records for k, v in _flatten(obj)]
    kv = pl.DataFrame(flat, schema={"_i": pl.UInt32, "key": pl.String, "val": pl.String}, orient="row")
    rows = rows_from_pairs(kv, SOURCE)
    # A record with no step key (fairseq's validation record after its training one) takes the step of the record
    # before it, as the text-log parser carries the nearest preceding step line's: a copy pasted into a log reads the same.
    metrics = rows.select(pl.lit(src.rel).alias("file"), pl.col("_i").cast(pl.Int64).alias("line"), "step", "name", "value", "source")
    metrics = metrics.sort("line", maintain_order=True).with_columns(pl.col("step").forward_fill())
    result = ParseResult()
    result.tables["metrics"] = conform("metrics", metrics.to_arrow())
    problems = list(src.problems)
    if bad:
        problems.append(f"{bad} line(s) are not JSON objects (skipped)")
    if problems:
        result.status = "partial" if (bad or src.truncated) else "parsed"
        result.error = "; ".join(problems)
    return result


PARSER = Parser(kind="jsonl_metrics", quotable=True, sniff=sniff, parse=parse, description="JSON-lines metric files (trainer_log.jsonl, ...)")

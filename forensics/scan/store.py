"""The scan's output folder: one atomically committed part per finished run, and the final Parquet tables built from them."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

PARTS = "parts"
TS = pa.timestamp("us", tz="UTC")

RUNS = pa.schema([
    ("path", pa.string()),
    ("kind", pa.string()),
    ("status", pa.string()),  # ok | failed | timeout | skipped
    ("error", pa.string()),
    ("verdict", pa.string()),  # failed | clean | unknown
    ("root_playbook", pa.string()),
    ("severity", pa.string()),
    ("top_cause", pa.string()),
    ("confidence", pa.float64()),
    ("summary", pa.string()),
    ("first_rank", pa.int64()),
    ("first_host", pa.string()),
    ("onset_step", pa.int64()),
    ("onset_time", TS),
    ("onset_file", pa.string()),
    ("onset_line", pa.int64()),
    ("world_size", pa.int64()),
    ("bytes", pa.int64()),
    ("files", pa.int64()),
    ("seconds", pa.float64()),
    ("findings", pa.int64()),
    ("root_causes", pa.int64()),
    ("hosts", pa.list_(pa.string())),
    ("xids", pa.list_(pa.int64())),
    ("xid_hosts", pa.list_(pa.string())),  # "host<TAB>code", host "?" when the logs do not say
    ("input_fingerprint", pa.string()),
    ("failure_fingerprint", pa.string()),
    ("failure_signature", pa.string()),
])

FINDINGS = pa.schema([
    ("path", pa.string()),
    ("rank", pa.int64()),
    ("playbook", pa.string()),
    ("title", pa.string()),
    ("category", pa.string()),
    ("severity", pa.string()),
    ("confidence", pa.float64()),
    ("root_cause", pa.bool_()),
    ("explained_by", pa.list_(pa.string())),
    ("explains", pa.list_(pa.string())),
    ("onset_step", pa.int64()),
    ("onset_time", TS),
    ("onset_rank", pa.int64()),
    ("onset_file", pa.string()),
    ("onset_line", pa.int64()),
    ("summary", pa.string()),
    ("ranks", pa.list_(pa.int64())),
    ("top_cause", pa.string()),
    ("top_cause_likelihood", pa.float64()),
    ("evidence_file", pa.string()),
    ("evidence_line", pa.int64()),
    ("evidence_text", pa.string()),
    ("evidence_count", pa.int64()),
    ("verify", pa.string()),
    ("fix", pa.string()),
    # The nested parts of the analyze JSON, verbatim (DuckDB: json_extract; polars: str.json_decode).
    ("causes_json", pa.string()),
    ("evidence_json", pa.string()),
    ("facts_json", pa.string()),
])


def part_name(rel: str) -> str:
    """The part file of a run: a hash of its path, so that a rerun overwrites and never doubles it."""
    return hashlib.sha256(rel.encode()).hexdigest()[:24] + ".json"


def commit(out: Path, record: dict) -> None:
    """Write one run's record under a temporary name, then rename it into place (atomic on POSIX)."""
    folder = out / PARTS
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(orjson.dumps(record, default=_default))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, folder / part_name(record["row"]["path"]))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _default(v):
    if isinstance(v, dt.datetime):
        return v.isoformat()
    return str(v)


def load(out: Path, rel: str) -> dict | None:
    """The committed record of a run, or None (never committed, or unreadable: then it is scanned again)."""
    try:
        record = orjson.loads((out / PARTS / part_name(rel)).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and record.get("row", {}).get("path") == rel else None


def clean_temp(out: Path) -> None:
    """Remove temporary files a killed scan left behind (their runs have no part and are scanned again)."""
    for tmp in (out / PARTS).glob(".tmp-*"):
        tmp.unlink(missing_ok=True)


def _ts(v) -> dt.datetime | None:
    if v is None or isinstance(v, dt.datetime):
        return v
    try:
        t = dt.datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def _json(v) -> str:
    return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()


def finding_row(path: str, f: dict) -> dict:
    """One finding of the analyze JSON as a flat row."""
    onset = f.get("onset") or {}
    causes = f.get("causes") or []
    ev = f.get("evidence") or []
    return {
        "path": path, "rank": f.get("rank"), "playbook": f.get("playbook"), "title": f.get("title"),
        "category": f.get("category"), "severity": f.get("severity"), "confidence": f.get("confidence"),
        "root_cause": f.get("root_cause"), "explained_by": f.get("explained_by"), "explains": f.get("explains"),
        "onset_step": onset.get("step"), "onset_time": _ts(onset.get("time")), "onset_rank": onset.get("rank"),
        "onset_file": onset.get("file"), "onset_line": onset.get("line"), "summary": f.get("summary"),
        "ranks": f.get("ranks"), "top_cause": causes[0]["cause"] if causes else None,
        "top_cause_likelihood": causes[0]["likelihood"] if causes else None,
        "evidence_file": ev[0]["file"] if ev else None, "evidence_line": ev[0]["line"] if ev else None,
        "evidence_text": ev[0]["text"] if ev else None, "evidence_count": f.get("evidence_count"),
        "verify": f.get("verify"), "fix": f.get("fix"),
        "causes_json": _json(causes), "evidence_json": _json(ev), "facts_json": _json(f.get("facts") or {}),
    }


def _write(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".tmp-{path.name}")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def build(out: Path, records: Iterable[dict], batch: int = 256) -> pa.Table:
    """Write runs.parquet and findings.parquet from this scan's records (given sorted by path); returns the runs table.

    Findings are written in batches: memory stays bounded by the runs rows, whatever the number of findings.
    """
    run_rows: list[dict] = []
    pending: list[dict] = []
    tmp_findings = out / ".tmp-findings.parquet"
    with pq.ParquetWriter(tmp_findings, FINDINGS, compression="zstd") as writer:
        for r in records:
            row = {name: r["row"].get(name) for name in RUNS.names}
            row["onset_time"] = _ts(row["onset_time"])
            run_rows.append(row)
            pending.extend(finding_row(row["path"], f) for f in r.get("findings") or [])
            if len(pending) >= batch:
                writer.write_table(pa.Table.from_pylist(pending, schema=FINDINGS))
                pending = []
        if pending or not run_rows:
            writer.write_table(pa.Table.from_pylist(pending, schema=FINDINGS))
    runs = pa.Table.from_pylist(run_rows, schema=RUNS)
    _write(runs, out / "runs.parquet")
    os.replace(tmp_findings, out / "findings.parquet")
    return runs

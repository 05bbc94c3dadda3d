"""The per-run task: analyse one run exactly as `forensics analyze` does and reduce it to a runs row plus findings."""

from __future__ import annotations

import datetime as dt
import fnmatch
import os
import time
from pathlib import Path

# Text kinds whose lines can name hosts; traces and metric files are skipped (big, and they never do).
_HOST_KINDS = {"text_log", "torchelastic_error", "unknown"}
# Bytes of one file read for host names: its head and its tail (hosts show up at start-up and at the crash).
_HOST_HEAD = _HOST_TAIL = 4 * 1024 * 1024


def init_worker() -> None:
    """Once per worker process: one polars thread (the scan's workers already use every core), playbooks loaded."""
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    # No nested pool of file parsers inside a scan worker.
    os.environ["FORENSICS_WORKERS"] = "1"
    from forensics.playbooks.base import registry

    registry()
    # What the first run would otherwise import: every worker pays it once, not per run.
    import forensics.engine
    import forensics.ingest
    import forensics.reports.jsonout
    import forensics.sniff  # noqa: F401


def _fault(rel: str) -> None:
    """Fault injection for tests of the executors: FORENSICS_SCAN_FAULT="crash:GLOB;hang:GLOB;memory:GLOB"."""
    for spec in os.environ.get("FORENSICS_SCAN_FAULT", "").split(";"):
        what, _, pattern = spec.partition(":")
        if not pattern or not fnmatch.fnmatch(rel, pattern):
            continue
        if what == "crash":
            os._exit(70)  # dies like a segfaulting parser would: no exception, no answer
        if what == "hang":
            time.sleep(3600)
        if what == "memory":
            hog = []
            while True:
                hog.append(bytearray(b"x" * (64 * 1024 * 1024)))  # touched pages: real resident memory


def _read_for_hosts(src) -> bytes:
    try:
        if src.compression is None and not hasattr(src, "member") and src.size > _HOST_HEAD + _HOST_TAIL:
            with open(src.path, "rb") as fh:
                head = fh.read(_HOST_HEAD)
                fh.seek(-_HOST_TAIL, os.SEEK_END)
                return head + b"\n" + fh.read()
        with src.open() as fh:
            return fh.read(_HOST_HEAD + _HOST_TAIL)
    except Exception:  # noqa: BLE001 - a file we cannot reread only loses its host names
        return b""


def _time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _first_host(info, per_file: dict, first: dict) -> str | None:
    """The failing rank's host, else the only host named in the onset's file, else the run's only host."""
    rank = first.get("rank")
    if rank is not None and rank in info.rank_host:
        return info.rank_host[rank]
    named = per_file.get(first.get("file"))
    if named is not None and len(named.hosts) == 1:
        return next(iter(named.hosts))
    return next(iter(info.hosts)) if len(info.hosts) == 1 else None


def error_text(exc: BaseException) -> str:
    """One line naming the exception and where it was raised (the reason column of a failed run)."""
    import traceback

    where = traceback.extract_tb(exc.__traceback__)
    at = f" (in {os.path.basename(where[-1].filename)}:{where[-1].lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}{at}"


def run_task(task: dict) -> tuple[str, object]:
    """("ok", result) or ("error", reason): the same answer whichever executor runs the task."""
    try:
        return "ok", analyze_run(task)
    except MemoryError:
        return "error", "out of memory (MemoryError)"
    except Exception as exc:  # noqa: BLE001 - any failure of one run is that run's row
        return "error", error_text(exc)


def analyze_run(task: dict) -> dict:
    """Analyse one run; returns {"row": runs row, "findings": the analyze JSON's findings}.

    Exceptions propagate: the executor turns them into a `failed` row with the reason.
    """
    import orjson

    from forensics import quote
    from forensics.contracts.context import Context
    from forensics.discover import discover
    from forensics.engine import analyze
    from forensics.ingest import ingest
    from forensics.reports import jsonout
    from forensics.scan import archive, hosts
    from forensics.scan.fingerprint import failure_fingerprint, mask

    _fault(task["rel"])
    t0 = time.perf_counter()
    path = Path(task["path"])
    if task["kind"] == "archive":
        found = archive.members(path)
        by_rel = {s.rel: s for s in found[0]}
        quote.OPENERS[str(path)] = by_rel.get
        try:
            run = ingest(path, found=found)
            result = analyze(Context(run), task.get("config"), {})
            report = jsonout.report_dict(result)
        finally:
            quote.OPENERS.pop(str(path), None)
        source_of = by_rel.get
    else:
        run = ingest(path)
        result = analyze(Context(run), task.get("config"), {})
        report = jsonout.report_dict(result)
        # The files discovery reads, by their shown names: never a FIFO, a folder or a link out of the run (a row's
        # name is not always a path either: bytes that are not UTF-8 are shown as \xNN).
        source_of = {s.rel: s for s in discover(path)[0]}.get
    # Through JSON and back: exactly what `forensics analyze --format json` prints.
    report = orjson.loads(orjson.dumps(report, default=str))

    per_file: dict[str, hosts.HostInfo] = {}
    for f in report["files"]:
        if f["kind"] in _HOST_KINDS and f["status"] != "failed":
            src = source_of(f["file"])
            if src is not None:
                per_file[f["file"]] = hosts.scan_text(_read_for_hosts(src), f.get("rank"))
    info = hosts.HostInfo()
    for one in per_file.values():
        info.merge(one)

    findings = report["findings"]
    top = findings[0] if findings else None
    first = report["run"].get("first_failure") or (top["onset"] if top else None) or {}
    failed = any(f["severity"] in ("critical", "high") for f in findings)
    first_rank = first.get("rank")
    first_host = _first_host(info, per_file, first) if failed else None
    ranks = [f["rank"] for f in report["files"] if f.get("rank") is not None]
    world = report["run"]["meta"].get("world_size") if isinstance(report["run"].get("meta"), dict) else None
    world_size = world if isinstance(world, int) else (max(ranks) + 1 if ranks else None)
    top_cause = top["causes"][0]["cause"] if top and top["causes"] else None
    line = None
    if top:
        line = top["evidence"][0]["text"] if top["evidence"] else top["summary"]
    row = {
        "status": "ok",
        "error": None,
        "verdict": "failed" if failed else "clean",
        "root_playbook": top["playbook"] if top else None,
        "severity": top["severity"] if top else None,
        "top_cause": top_cause,
        "confidence": top["confidence"] if top else None,
        "summary": top["summary"] if top else None,
        "first_rank": first_rank,
        "first_host": first_host,
        "onset_step": first.get("step"),
        "onset_time": _time(first.get("time")),
        "onset_file": first.get("file"),
        "onset_line": first.get("line"),
        "world_size": world_size,
        "findings": len(findings),
        "root_causes": sum(1 for f in findings if f["root_cause"]),
        "hosts": sorted(info.hosts),
        "xids": sorted({code for _, code in info.xids}),
        "xid_hosts": sorted({f"{h or '?'}\t{c}" for h, c in hosts.attribute_xids(info)}),
        "failure_fingerprint": failure_fingerprint(top["playbook"], top_cause, line) if failed and top else None,
        "failure_signature": mask(line or "") if failed and top else None,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return {"row": row, "findings": findings}

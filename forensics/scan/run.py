"""The scan itself: discover runs, skip the unchanged, analyse the rest in workers, commit each, build the tables and summaries."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

import orjson

from forensics.scan import store
from forensics.scan.archive import unsupported
from forensics.scan.discover import RunRef, find_runs
from forensics.scan.fingerprint import InputStat, input_stat
from forensics.scan.progress import Progress


@dataclass
class ScanOptions:
    """What `forensics scan` was asked to do."""

    root: Path
    out: Path
    jobs: int = 1
    executor: str = "local"
    ray_address: str | None = None
    runs_glob: str | None = None
    since: float | None = None
    timeout: float | None = None
    memory_mib: float | None = 4096


def _code_digest() -> str:
    from forensics.cache import _code_digest as digest

    return digest()


def _config_key(config) -> str:
    return hashlib.sha256(orjson.dumps(asdict(config), option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()[:16]


def _base_row(ref: RunRef, st: InputStat) -> dict:
    return {"path": ref.rel, "kind": ref.kind, "bytes": st.bytes, "files": st.files, "input_fingerprint": st.fingerprint}


def _not_scanned(ref: RunRef, st: InputStat, status: str, reason: str) -> dict:
    return {**_base_row(ref, st), "status": status, "error": reason, "verdict": "unknown", "hosts": [], "xids": [],
            "xid_hosts": [], "findings": 0, "root_causes": 0}


def scan(opts: ScanOptions, stderr: TextIO | None = None) -> dict:
    """Run the scan; returns the result the CLI prints (counts, groups, table paths)."""
    from forensics.config import find_config, load_config
    from forensics.scan import summary

    root, out = Path(opts.root).resolve(), Path(opts.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    store.clean_temp(out)
    config = load_config(find_config(Path.cwd()))
    code, cfg_key = _code_digest(), _config_key(config)
    refs = find_runs(root, opts.runs_glob, exclude=out)
    chosen: list[tuple[RunRef, InputStat]] = []
    excluded = 0
    for ref in refs:
        st = input_stat(Path(ref.path))
        if opts.since is not None and st.mtime < opts.since:
            excluded += 1
            continue
        chosen.append((ref, st))

    todo: list[tuple[object, dict]] = []
    stats: dict[str, tuple[RunRef, InputStat]] = {}
    reused = 0
    for ref, st in chosen:
        stats[ref.rel] = (ref, st)
        old = store.load(out, ref.rel)
        if old is not None and old.get("input_fingerprint") == st.fingerprint and old.get("code") == code and old.get("config") == cfg_key:
            reused += 1  # unchanged since its committed result: not analysed again
            continue
        reason = unsupported(Path(ref.path)) if ref.kind == "archive" else None
        if reason:
            store.commit(out, _record(_not_scanned(ref, st, "skipped", reason), [], st, code, cfg_key))
            continue
        todo.append((ref.rel, {"path": ref.path, "rel": ref.rel, "kind": ref.kind, "config": config}))

    bar = Progress(stderr, len(todo), reused)
    if todo:
        if opts.executor == "ray":
            from forensics.scan.executors import run_ray

            results = run_ray(todo, opts.jobs, opts.timeout, opts.memory_mib, opts.ray_address)
        else:
            from forensics.scan.executors import run_local

            results = run_local(todo, opts.jobs, opts.timeout, opts.memory_mib)
        for rel, status, value in results:
            ref, st = stats[rel]
            if status == "ok":
                row = {**_base_row(ref, st), **value["row"]}
                findings = value["findings"]
            else:
                row, findings = _not_scanned(ref, st, status, str(value)), []
            store.commit(out, _record(row, findings, st, code, cfg_key))
            bar.step(status == "ok")
    bar.close()

    runs = store.build(out, _records(out, sorted(stats)))
    rows = runs.to_pylist()
    for name, render in (("summary.md", summary.render_md), ("summary.html", summary.render_html)):
        tmp = out / f".tmp-{name}"
        tmp.write_text(render(str(root), rows, excluded), encoding="utf-8")
        os.replace(tmp, out / name)
    return _result(root, out, rows, len(todo), reused, excluded)


def _record(row: dict, findings: list, st: InputStat, code: str, cfg_key: str) -> dict:
    return {"row": row, "findings": findings, "input_fingerprint": st.fingerprint, "code": code, "config": cfg_key}


def _records(out: Path, rels: list[str]) -> Iterator[dict]:
    for rel in rels:
        rec = store.load(out, rel)
        if rec is not None:
            yield rec


def _result(root: Path, out: Path, rows: list[dict], scanned: int, reused: int, excluded: int) -> dict:
    from forensics.scan import summary

    secs = {s.title: s for s in summary.sections(rows)}
    return {
        "root": str(root),
        "out": str(out),
        "runs": len(rows),
        "scanned": scanned,
        "unchanged": reused,
        "excluded_by_since": excluded,
        "status": dict(sorted(Counter(r["status"] for r in rows).items())),
        "verdict": dict(sorted(Counter(r["verdict"] for r in rows).items())),
        "root_causes": [{"playbook": r[0], "cause": r[1], "runs": int(r[2])} for r in secs["Root causes of failed runs"].rows],
        "groups": [{"fingerprint": r[0], "runs": int(r[1]), "playbook": r[2], "cause": r[3], "signature": r[4]}
                   for r in secs["Recurrence groups (runs that failed the same way)"].rows],
        "hosts": [{"host": r[0], "failed_runs": int(r[1]), "runs": int(r[2]), "xid": r[3]} for r in secs["Hosts that recur"].rows],
        "not_scanned": [{"path": r[0], "status": r[1], "reason": r[2]} for r in secs["Could not be scanned"].rows],
        "tables": {name: str(out / name) for name in ("runs.parquet", "findings.parquet", "summary.md", "summary.html")},
    }


def render_text(res: dict) -> str:
    """The text result on stdout."""
    lines = [f"forensics scan: {res['root']}",
             f"{res['runs']} runs: " + ", ".join(f"{n} {v}" for v, n in res["verdict"].items())
             + f" ({res['scanned']} analysed now, {res['unchanged']} unchanged)"]
    if res["excluded_by_since"]:
        lines.append(f"{res['excluded_by_since']} runs older than --since left out")
    if res["root_causes"]:
        lines.append("root causes:")
        lines += [f"  {c['runs']:>5}  {c['playbook']} / {c['cause']}" for c in res["root_causes"][:10]]
    if res["groups"]:
        lines.append("recurrence groups:")
        lines += [f"  {g['runs']:>5}  {g['fingerprint']}  {g['playbook']}: {g['signature'][:100]}" for g in res["groups"][:10]]
    if res["hosts"]:
        lines.append("hosts:")
        lines += [f"  {h['host']}: failed in {h['failed_runs']} of {h['runs']} runs" + (f"; {h['xid']}" if h["xid"] else "")
                  for h in res["hosts"][:10]]
    if res["not_scanned"]:
        lines.append("not scanned:")
        lines += [f"  {n['status']:<8} {n['path']}: {n['reason']}" for n in res["not_scanned"][:20]]
    lines.append(f"tables: {res['tables']['runs.parquet']}, {res['tables']['findings.parquet']}")
    lines.append(f"summary: {res['tables']['summary.md']}, {res['tables']['summary.html']}")
    return "\n".join(lines) + "\n"

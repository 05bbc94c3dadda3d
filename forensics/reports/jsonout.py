"""The `--format json` output: one object following DESIGN.md's output contract."""

from __future__ import annotations

import datetime as dt
import math

import orjson

from forensics import __version__
from forensics.contracts.model import Evidence, Onset
from forensics.engine import Analysis, Finding

SCHEMA_VERSION = "1.0"


def _time(t: dt.datetime | None) -> str | None:
    return t.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z") if t else None


def _evidence(e: Evidence) -> dict:
    return {"file": e.file, "line": e.line, "text": e.text, "rank": e.rank, "step": e.step, "time": _time(e.ts)}


def _onset(o: Onset) -> dict:
    return {"step": o.step, "time": _time(o.time), "rank": o.rank, "file": o.file, "line": o.line}


def _clean(v):
    """JSON has no NaN/Inf: report them as strings so nothing is silently lost."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


def finding_dict(f: Finding) -> dict:
    """One finding as the contract's object."""
    return {
        "rank": f.rank,
        "playbook": f.id,
        "title": f.playbook.title,
        "category": f.playbook.category,
        "severity": f.severity.label,
        "confidence": round(f.confidence, 3),
        "root_cause": f.root_cause,
        "explained_by": list(f.explained_by),
        "explains": list(f.explains),
        "onset": _onset(f.onset),
        "summary": f.summary,
        "ranks": f.ranks,
        "causes": [
            {
                "cause": c.cause.id,
                "title": c.cause.title,
                "likelihood": c.likelihood,
                "playbook": c.cause.playbook,
                "verify": c.cause.verify,
                "fix": c.cause.fix,
                "evidence": [_evidence(e) for e in c.evidence],
            }
            for c in f.causes
        ],
        "evidence": [_evidence(e) for e in f.evidence],
        "evidence_count": f.evidence_count,
        "facts": _clean(f.facts),
        "verify": f.playbook.verify,
        "fix": f.playbook.fix,
    }


def report_dict(a: Analysis) -> dict:
    """The whole report as a dict (see forensics/report.schema.json)."""
    run = a.context.run
    files = run.table("files").to_pylist()
    return {
        "schema_version": SCHEMA_VERSION,
        "forensics_version": __version__,
        "run": {
            "path": str(run.root),
            "tables": {name: run.num_rows(name) for name in ("events", "metrics", "gpu", "gpu_procs", "spans", "counters")},
            "meta": _clean(run.meta),
            "baseline": str(a.context.baseline.run.root) if a.context.baseline else None,
            "first_failure": _onset(a.first_failure) if a.first_failure else None,
        },
        "files": files,
        "playbooks": {
            "ran": a.ran,
            "skipped": [{"playbook": k, "reason": v} for k, v in sorted(a.skipped.items())],
            "errored": [{"playbook": k, "error": v} for k, v in sorted(a.errored.items())],
        },
        "findings": [finding_dict(f) for f in a.findings],
    }


def render(a: Analysis) -> str:
    """The JSON text."""
    return orjson.dumps(report_dict(a), option=orjson.OPT_INDENT_2, default=str).decode() + "\n"

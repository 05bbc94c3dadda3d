"""torchrun's ChildFailedError report, both layouts (<=1.10 `Root Cause:`, >=1.11 `Failures:`)."""

from __future__ import annotations

import datetime as dt
import re

import polars as pl
from forensics.parsers.blocks.common import View, block_text, event, opener_views, rank_of

NEEDLE = "Root Cause"
REPORT_START = re.compile(r"^(?P<prefix>.*?)Root Cause(?: \(first observed failure\))?:\s*$")


_BORDER = re.compile(r"^\s*(?:={3,}|\*{3,}|-{3,})\s*$")
_ENTRY = re.compile(r"^\[(\d+)\]:\s*$")
_MSG_MESSAGE = re.compile(r'^\s+"message": "(.*)",?\s*$')
_KEY = re.compile(r"^\s+(time|host|rank|exitcode|error_file|traceback|msg)\s*:\s?(.*)$")
_REPORT_LINE = re.compile(r"^(?:\s|\[\d+\]:|(?:Other )?Failures:|Root Cause|.*\bFAILED\s*$|={3,}|\*{3,}|-{3,})")


def read(frame: pl.DataFrame, cand: pl.DataFrame, found: list[dict]) -> list[dict]:
    """torchrun ChildFailedError reports, from the `Root Cause` line back to the error line and on to the border."""
    events = []
    for row, m, v, a in opener_views(frame, cand, NEEDLE, REPORT_START, 400):
        prefix = m.group("prefix")
        body = v.body
        # Backwards to the ChildFailedError line (or the first report line); forwards to the last border.
        b = a
        while b - 1 >= 0 and a - b < 400:
            prev = body[b - 1]
            if "ChildFailedError" in prev:
                b -= 1
                break
            if not _in_report(prev, body[b - 2] if b >= 2 else ""):
                break
            b -= 1
        e = a
        while e + 1 < len(body) and e - a < 2000:
            if not _in_report(body[e + 1], body[e + 2] if e + 2 < len(body) else ""):
                break
            e += 1
        while e > a and not body[e].strip():
            e -= 1
        lines = [body[k] for k in range(b, e + 1)]
        events.append(_report_event(frame, v, b, e, lines, row, prefix))
    return events


def _in_report(line: str, beyond: str) -> bool:
    """Whether a line belongs to a report; an empty line does when the report goes on after it.

    (A child's call stack ends with a line of two spaces, which log capture right-strips to nothing.)
    """
    if line.strip():
        return bool(_REPORT_LINE.match(line))
    return bool(beyond.strip()) and bool(_REPORT_LINE.match(beyond))


def _parse_failures(lines: list[str]) -> tuple[str | None, list[dict], list[dict]]:
    """Title, root-cause entries and other entries of a report."""
    title, section = None, None
    root: list[dict] = []
    other: list[dict] = []
    entry: dict | None = None
    key = None
    for raw in lines:
        line = raw.rstrip()
        s = line.strip()
        # The title is flush left; PyTorch 1.9-1.10 centred it between `*` and `=` borders, before any section.
        if s.endswith("FAILED") and title is None and (not line.startswith(" ") or section is None):
            title = s[: -len("FAILED")].strip()
            continue
        if s in ("Failures:", "Other Failures:"):
            section, entry = "other", None
            continue
        if s.startswith("Root Cause"):
            section, entry = "root", None
            continue
        if _BORDER.match(line) or "ChildFailedError" in line:
            entry, key = None, None
            continue
        em = _ENTRY.match(s)
        if em and section:
            entry = {"idx": em.group(1)}
            (root if section == "root" else other).append(entry)
            key = None
            continue
        km = _KEY.match(line)
        if km and entry is not None and (key is None or len(line) - len(line.lstrip()) <= 2):
            key = km.group(1)
            entry[key] = km.group(2).strip()
            entry.setdefault("_lines", {})[key] = []
            continue
        if entry is not None and key in ("traceback", "msg") and line.startswith("  "):
            entry["_lines"][key].append(line)
    return title, root, other


def _entry_fields(entry: dict) -> dict:
    out: dict = {}
    rm = re.match(r"(-?\d+) \(local_rank: (\d+)\)", entry.get("rank", ""))
    if rm:
        out["rank"], out["local_rank"] = rm.group(1), rm.group(2)
    xm = re.match(r"(-?\d+) \(pid: (\d+)\)", entry.get("exitcode", ""))
    if xm:
        out["exitcode"], out["pid"] = xm.group(1), xm.group(2)
    out["time"] = entry.get("time")
    out["host"] = entry.get("host")
    out["error_file"] = entry.get("error_file")
    tb = entry.get("traceback", entry.get("msg", "")).strip('"')
    out["traceback"] = tb or None
    sm = re.search(r"Signal (\d+) \((SIG\w+)\) received by PID (\d+)", tb)
    if sm:
        out["signal"] = sm.group(2)
    more = [ln.strip() for ln in entry.get("_lines", {}).get("traceback", []) if ln.strip()]
    if more:
        # The child's py_callstack, indented by two: its last line is the exception.
        out["exception"] = more[-1]
    for ln in entry.get("_lines", {}).get("msg", []):
        # PyTorch 1.9-1.10 printed the child's error.json under `msg:`; its "message" is the exception.
        mm = _MSG_MESSAGE.match(ln)
        if mm:
            out["exception"] = mm.group(1)
            break
    return out


def _parse_time(text: str | None) -> dt.datetime | None:
    """The report row's `time`: torchrun prints `datetime.fromtimestamp(ts).isoformat(sep="_")` (ProcessFailure.
    timestamp_isoformat), the agent host's LOCAL time with no zone. Like every zone-less stamp it is read as UTC
    (the host's zone is not in the log); it is still the failure's own time, so it wins over the stamp of the
    line the report is printed on (printed later, and often a stamp of the same zone-less kind)."""
    if not text:
        return None
    try:
        return dt.datetime.strptime(text.strip(), "%Y-%m-%d_%H:%M:%S").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def _report_event(frame: pl.DataFrame, v: View, b: int, e: int, lines: list[str], row: dict, prefix: str) -> dict:
    title, root, other = _parse_failures(lines)
    rf = _entry_fields(root[0]) if root else {}
    others = [_entry_fields(x) for x in other]
    fields = {
        "title": title,
        **rf,
        "failures": len(root) + len(others),
        "other_ranks": ",".join(o.get("rank", "?") for o in others) or None,
        "other_local_ranks": ",".join(o.get("local_rank", "?") for o in others) or None,
        "other_exitcodes": ",".join(o.get("exitcode", "?") for o in others) or None,
        "other_pids": ",".join(o.get("pid", "?") for o in others) or None,
    }
    what = rf.get("exception") or rf.get("traceback") or ""
    message = f"{title or 'worker'} FAILED: rank {rf.get('rank', '?')} (local_rank {rf.get('local_rank', '?')}) exitcode {rf.get('exitcode', '?')}"
    if what:
        message += f": {what}"
    rank = int(rf["rank"]) if rf.get("rank", "").lstrip("-").isdigit() else rank_of(prefix)
    return event(
        line=int(frame.get_column("line")[int(v.rows[b])]),
        end_line=int(frame.get_column("line")[int(v.rows[e])]),
        code="torchrun_child_failed_report",
        severity="error",
        message=message,
        text=block_text(frame.get_column("text"), v.rows[b : e + 1]),
        fields=fields,
        rank=rank,
        ts=_parse_time(rf.get("time")) or row["ts"],
    )

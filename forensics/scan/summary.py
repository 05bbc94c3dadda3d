"""summary.md and summary.html of a scan: root causes, recurrence groups, recurring hosts, slowest/largest runs, what was not scanned.

Every string that came from a log (summaries, signatures, host names, paths, reasons) is escaped in both outputs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from forensics.reports.escape import html as escape_html
from forensics.reports.escape import md_text

TOP = 10
UNNAMED = "(host not named in the logs)"


@dataclass
class Section:
    """One titled table of the summary (cells are raw strings; the renderers escape them)."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    note: str = ""


def _examples(paths: list[str], n: int = 3) -> str:
    more = f" (+{len(paths) - n} more)" if len(paths) > n else ""
    return ", ".join(sorted(paths)[:n]) + more


def _size(n: int | None) -> str:
    n = n or 0
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def headline(rows: list[dict], excluded: int = 0) -> list[str]:
    """The counts: runs, statuses, verdicts."""
    status = Counter(r["status"] for r in rows)
    verdict = Counter(r["verdict"] for r in rows)
    out = [f"{len(rows)} runs: " + ", ".join(f"{v} {k}" for k, v in sorted(verdict.items())),
           "status: " + ", ".join(f"{v} {k}" for k, v in sorted(status.items()))]
    if excluded:
        out.append(f"{excluded} runs older than --since not scanned")
    return out


def sections(rows: list[dict]) -> list[Section]:
    """The summary's tables, computed from the runs rows."""
    failed = [r for r in rows if r["verdict"] == "failed"]
    out: list[Section] = []

    causes: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in failed:
        causes[(r["root_playbook"] or "?", r["top_cause"] or "?")].append(r["path"])
    sec = Section("Root causes of failed runs", ["root playbook", "top cause", "runs", "examples"])
    for (pb, cause), paths in sorted(causes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        sec.rows.append([pb, cause, str(len(paths)), _examples(paths)])
    out.append(sec)

    groups: dict[str, list[dict]] = defaultdict(list)
    for r in failed:
        if r["failure_fingerprint"]:
            groups[r["failure_fingerprint"]].append(r)
    sec = Section("Recurrence groups (runs that failed the same way)", ["fingerprint", "runs", "root playbook", "cause", "signature", "examples"],
                  note="Groups of two or more runs with the same root playbook, cause and masked evidence line.")
    for fp, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(members) < 2:
            continue
        r0 = members[0]
        sec.rows.append([fp, str(len(members)), r0["root_playbook"] or "", r0["top_cause"] or "", r0["failure_signature"] or "",
                         _examples([m["path"] for m in members])])
    out.append(sec)

    host_runs: Counter[str] = Counter()
    host_failed: Counter[str] = Counter()
    host_xid: dict[str, Counter[int]] = defaultdict(Counter)
    host_causes: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        for h in r["hosts"] or []:
            host_runs[h] += 1
            if r["verdict"] == "failed":
                host_failed[h] += 1
                host_causes[h][r["root_playbook"] or "?"] += 1
        unnamed = False
        for pair in set(r["xid_hosts"] or []):
            h, _, code = pair.partition("\t")
            host_xid[h if h != "?" else UNNAMED][int(code)] += 1
            unnamed |= h == "?"
        if unnamed:  # runs whose Xid lines name no host still count, under one placeholder
            host_runs[UNNAMED] += 1
            host_failed[UNNAMED] += r["verdict"] == "failed"
            if r["verdict"] == "failed":
                host_causes[UNNAMED][r["root_playbook"] or "?"] += 1
    sec = Section("Hosts that recur", ["host", "failed runs", "runs", "Xid", "root causes"],
                  note="Hosts named in two or more runs' logs, or with an Xid error; Xid counts are runs.")
    names = {h for h, n in host_runs.items() if n >= 2} | set(host_xid)
    for h in sorted(names, key=lambda h: (-host_failed[h], -sum(host_xid[h].values()), h)):
        xids = ", ".join(f"Xid {c} in {n} run{'s' if n > 1 else ''}" for c, n in sorted(host_xid[h].items()))
        rc = ", ".join(f"{pb} ×{n}" for pb, n in host_causes[h].most_common(3))
        sec.rows.append([h, str(host_failed[h]), str(host_runs[h]), xids, rc])
    out.append(sec)

    done = [r for r in rows if r["status"] == "ok"]
    sec = Section("Slowest runs", ["path", "seconds", "files", "size"])
    for r in sorted(done, key=lambda r: (-(r["seconds"] or 0), r["path"]))[:TOP]:
        sec.rows.append([r["path"], f"{r['seconds'] or 0:.2f}", str(r["files"]), _size(r["bytes"])])
    out.append(sec)
    sec = Section("Largest runs", ["path", "size", "files", "verdict"])
    for r in sorted(rows, key=lambda r: (-(r["bytes"] or 0), r["path"]))[:TOP]:
        sec.rows.append([r["path"], _size(r["bytes"]), str(r["files"]), r["verdict"]])
    out.append(sec)

    sec = Section("Could not be scanned", ["path", "status", "reason"])
    for r in sorted((r for r in rows if r["status"] != "ok"), key=lambda r: r["path"]):
        sec.rows.append([r["path"], r["status"], r["error"] or ""])
    out.append(sec)
    return out


def render_md(root: str, rows: list[dict], excluded: int = 0) -> str:
    """summary.md."""
    lines = [f"# forensics scan: {md_text(root)}", ""]
    lines += [f"- {md_text(h)}" for h in headline(rows, excluded)]
    for sec in sections(rows):
        lines += ["", f"## {sec.title}", ""]
        if sec.note:
            lines += [sec.note, ""]
        if not sec.rows:
            lines.append("(none)")
            continue
        lines.append("| " + " | ".join(sec.headers) + " |")
        lines.append("|" + "---|" * len(sec.headers))
        lines += ["| " + " | ".join(md_text(c) for c in row) + " |" for row in sec.rows]
    return "\n".join(lines) + "\n"


_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}th{background:#f3f3f3}"
        "td{font-family:ui-monospace,monospace;font-size:.9em}")


def render_html(root: str, rows: list[dict], excluded: int = 0) -> str:
    """summary.html: self-contained (no scripts, no network), every log string escaped."""
    e = escape_html
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>forensics scan: {e(root)}</title><style>{_CSS}</style></head><body>",
           f"<h1>forensics scan: {e(root)}</h1><ul>"]
    out += [f"<li>{e(h)}</li>" for h in headline(rows, excluded)]
    out.append("</ul>")
    for sec in sections(rows):
        out.append(f"<h2>{e(sec.title)}</h2>")
        if sec.note:
            out.append(f"<p>{e(sec.note)}</p>")
        if not sec.rows:
            out.append("<p>(none)</p>")
            continue
        out.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in sec.headers) + "</tr>")
        out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in sec.rows]
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"

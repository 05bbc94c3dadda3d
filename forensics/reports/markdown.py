"""Markdown output for incident tickets."""

from __future__ import annotations

from forensics.engine import Analysis
from forensics.reports.jsonout import finding_dict


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(a: Analysis) -> str:
    """The Markdown report."""
    run = a.context.run
    out = [f"# forensics report: `{run.root}`", ""]
    if not a.findings:
        out += ["No findings.", ""]
    else:
        out += ["| # | severity | playbook | root | onset | summary |", "|---|---|---|---|---|---|"]
        for f in a.findings:
            d = finding_dict(f)
            o = d["onset"]
            where = f"{o['file']}:{o['line']}" if o["file"] else ""
            out.append(f"| {f.rank} | {f.severity.label} | `{f.id}` | {'yes' if f.root_cause else 'from ' + ', '.join(f.explained_by)} | {_cell(where)} | {_cell(f.summary)} |")
        out.append("")
    for f in a.findings:
        d = finding_dict(f)
        out += [f"## {f.rank}. {f.playbook.title} (`{f.id}`, {f.severity.label})", "", d["summary"], ""]
        if f.explained_by:
            out += [f"Explained by: {', '.join(f'`{x}`' for x in f.explained_by)}", ""]
        if d["evidence"]:
            out.append("Evidence:")
            out.append("")
            for e in d["evidence"][:5]:
                out += [f"- `{e['file']}:{e['line']}`", "", "  ```text", *("  " + ln for ln in e["text"].splitlines()), "  ```"]
            out.append("")
        if d["causes"]:
            out.append("Causes:")
            out.append("")
            for c in d["causes"]:
                out.append(f"1. **{c['title']}** ({c['likelihood']:.0%}) — verify: `{c['verify']}` — fix: {c['fix']}")
            out.append("")
    files = run.table("files").to_pylist()
    out += ["## Files", "", "| file | kind | status | rows | note |", "|---|---|---|---|---|"]
    out += [f"| `{_cell(r['file'])}` | {r['kind']} | {r['status']} | {r['rows']} | {_cell(r['error'] or '')} |" for r in files]
    return "\n".join(out) + "\n"

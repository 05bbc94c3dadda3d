"""Markdown output for incident tickets."""

from __future__ import annotations

from forensics.engine import Analysis
from forensics.reports.escape import md_code_span, md_fence, md_text, visible
from forensics.reports.jsonout import finding_dict


def render(a: Analysis) -> str:
    """The Markdown report."""
    run = a.context.run
    out = [f"# forensics report: {md_code_span(run.root)}", ""]
    if not a.findings:
        out += ["No findings.", ""]
    else:
        out += ["| # | severity | playbook | root | onset | summary |", "|---|---|---|---|---|---|"]
        for f in a.findings:
            d = finding_dict(f)
            o = d["onset"]
            where = f"{o['file']}:{o['line']}" if o["file"] else ""
            out.append(f"| {f.rank} | {f.severity.label} | `{f.id}` | {'yes' if f.root_cause else 'from ' + ', '.join(f.explained_by)} | {md_text(where)} | {md_text(f.summary)} |")
        out.append("")
    for f in a.findings:
        d = finding_dict(f)
        out += [f"## {f.rank}. {f.playbook.title} (`{f.id}`, {f.severity.label})", "", md_text(d["summary"]), ""]
        if f.explained_by:
            out += [f"Explained by: {', '.join(f'`{x}`' for x in f.explained_by)}", ""]
        if d["evidence"]:
            out.append("Evidence:")
            out.append("")
            for e in d["evidence"][:5]:
                body = [visible(ln) for ln in e["text"].splitlines()]
                fence = md_fence("\n".join(body))
                where = f"{e['file']}:{e['line']}"
                out += [f"- {md_code_span(where)}", "", f"  {fence}text", *("  " + ln for ln in body), f"  {fence}"]
            out.append("")
        if d["causes"]:
            out.append("Causes:")
            out.append("")
            for c in d["causes"]:
                out.append(f"1. **{c['title']}** ({c['likelihood']:.0%}) — verify: `{c['verify']}` — fix: {c['fix']}")
            out.append("")
    files = run.table("files").to_pylist()
    out += ["## Files", "", "| file | kind | status | rows | note |", "|---|---|---|---|---|"]
    out += [f"| {md_text(r['file'])} | {r['kind']} | {r['status']} | {r['rows']} | {md_text(r['error'] or '')} |" for r in files]
    return "\n".join(out) + "\n"

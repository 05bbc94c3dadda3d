"""The postmortem as Markdown for tickets and wikis, with its plots written beside it as SVG files."""

from __future__ import annotations

from pathlib import Path

from forensics.reports.escape import md_code_span, md_fence, md_text, visible
from forensics.reports.postmortem.build import Postmortem, finding_ranks, lane_cell
from forensics.reports.postmortem.html import _num, _onset, _pct


def block(value: object, info: str = "text") -> list[str]:
    """Input text as a fenced code block whose fence is longer than any backtick run in it (a ``` line in a
    log cannot close it)."""
    s = visible(str(value))
    fence = md_fence(s)
    return [fence + info, *s.splitlines(), fence]


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def render(pm: Postmortem, files_dir: str) -> str:
    """The Markdown text; plots are referenced as `files_dir/<key>.svg`."""
    out = [f"# Incident postmortem: {md_text(pm.run)}", ""]
    if pm.baseline:
        out += [f"Compared with {md_text(pm.baseline)}.", ""]
    out += [f"forensics {pm.version}, {pm.checked} playbooks ran.", ""]
    out += ["## Verdict", "", "> " + md_text(pm.verdict), ""]
    out += ["## Impact", "", _row("what", "value", "how we know"), _row("---", "---", "---")]
    out += [_row(md_text(f.label), f"**{md_text(f.value)}**", md_text(f.note)) for f in pm.impact]
    out += ["", "## Causal chain", ""]

    def node(n, depth: int) -> None:
        f = n.finding
        who = f" on {finding_ranks(f)}" if f.ranks else ""
        out.append("  " * depth + f"- **{f.severity.label}** {md_code_span(f.id)} {md_text(f.playbook.title)}{who}, onset {md_text(_onset(f.onset))}: "
                   + md_text(f.summary))
        for c in n.children:
            node(c, depth + 1)

    for n in pm.chain:
        node(n, 0)
    if not pm.chain:
        out.append("No findings: nothing to chain.")
    out += ["", "## Timeline", ""]
    if pm.timeline:
        out += [f"![Timeline]({files_dir}/timeline.svg)", ""]
    if pm.lanes:
        out += [_row("lane", "first metric line", "last metric line", "first error", "exit"), _row(*["---"] * 5)]
        for ln in pm.lanes:
            name = ln.name + (" **(first failure)**" if ln.first_failure else "")
            cells = [md_text(lane_cell(ln.point(k), pm.timeline_by_time)) for k in ("first_metric", "last_metric", "first_error", "exit")]
            out.append(_row(name, *cells))
    out += ["", "## Metric plots", ""]
    for fig in pm.metric_figures:
        out += [f"![{fig.title}]({files_dir}/{fig.key}.svg)", "", md_text(fig.caption), ""]
    if not pm.metric_figures:
        out += ["No training metrics in the logs.", ""]
    if pm.gpu_figures:
        out += ["## GPU telemetry", ""]
        for fig in pm.gpu_figures:
            out += [f"![{fig.title}]({files_dir}/{fig.key}.svg)", "", md_text(fig.caption), ""]
    if pm.trace:
        out += ["## Trace summary", "", _row("trace", "rank", "profiled steps", "GPU busy share", "syncs per step", "data-loader share"),
                _row(*["---"] * 6)]
        for t in pm.trace.traces:
            out.append(_row(md_text(t["file"]), t["rank"] if t["rank"] is not None else "", t["steps"], _pct(t["gpu_busy"]),
                            _num(t["syncs_per_step"]), _pct(t["loader_share"])))
        for title, rows in (("Top kernels and device copies by time", pm.trace.kernels), ("Top ops by time (inclusive)", pm.trace.ops)):
            if rows:
                out += ["", f"### {title}", "", _row("name", "calls", "ms", "share"), _row(*["---"] * 4)]
                out += [_row(md_text(r["name"]), r["calls"], f"{r['ms']:.2f}", _pct(r["share"])) for r in rows]
        out.append("")
    out += ["## Evidence and action items", ""]
    for f in pm.findings:
        explained = "" if f.root_cause else f", explained by {', '.join(f.explained_by)}"
        out += [f"### {f.rank}. {md_text(f.playbook.title)} ({md_code_span(f.id)}, {f.severity.label}, confidence {f.confidence:.2f}{explained})", "",
                md_text(f.summary), ""]
        for e in f.evidence:
            out += [f"{md_text(f'{e.file}:{e.line}')}", "", *block(e.text), ""]
        if f.evidence_count > len(f.evidence):
            out += [f"... {f.evidence_count - len(f.evidence)} more evidence rows.", ""]
        for c in f.causes[:3]:
            out.append(f"- [ ] Verify cause \u201c{md_text(c.cause.title)}\u201d ({c.likelihood:.0%}): {md_text(c.cause.verify)}")
            out.append(f"- [ ] Fix: {md_text(c.cause.fix)}")
        out += [f"- [ ] Confirm the finding: {md_text(f.playbook.verify)}", f"- [ ] General fix: {md_text(f.playbook.fix)}", ""]
    if not pm.findings:
        out += ["No findings.", ""]
    out += ["## What could not be checked", ""]
    if pm.skipped or pm.errored:
        out += [_row("playbook", "why it did not run"), _row("---", "---")]
        out += [_row(md_code_span(pid), md_text(why)) for pid, why in pm.skipped]
        out += [_row(md_code_span(pid), "error: " + md_text(why)) for pid, why in pm.errored]
    else:
        out.append("Every selected playbook ran.")
    out.append("")
    if pm.files_unparsed:
        out += [_row("file", "kind", "status", "why"), _row(*["---"] * 4)]
        out += [_row(md_text(r["file"]), md_text(r["kind"]), md_text(r["status"]), md_text(r["error"] or "")) for r in pm.files_unparsed]
    else:
        out.append("Every file was parsed completely.")
    out += ["", "## Appendix", "", f"Run folder {md_text(pm.run)}; rows: " + ", ".join(f"{k} {v}" for k, v in pm.tables.items()) + ".", ""]
    if pm.environment:
        out += ["### Environment found in the inputs", "", _row("what", "value", "where"), _row("---", "---", "---")]
        out += [_row(md_text(f.label), md_text(f.value), md_text(f.note)) for f in pm.environment]
        out.append("")
    out += ["### Files", "", _row("file", "kind", "status", "rows", "bytes", "note"), _row(*["---"] * 6)]
    out += [_row(md_text(r["file"]), md_text(r["kind"]), md_text(r["status"]), r["rows"], r["bytes"], md_text(r["error"] or "")) for r in pm.files]
    return "\n".join(out) + "\n"


def write(pm: Postmortem, out: Path) -> list[Path]:
    """Write `out` (the .md) and `<stem>_files/` with one SVG per plot; returns the paths written."""
    folder = out.with_name(out.stem + "_files")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for fig in ([pm.timeline] if pm.timeline else []) + pm.metric_figures + pm.gpu_figures:
        path = folder / f"{fig.key}.svg"
        # A standalone SVG file needs its namespace back (inline SVG in HTML does not).
        path.write_text(fig.svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" ', 1),
                        encoding="utf-8")
        written.append(path)
    out.write_text(render(pm, folder.name), encoding="utf-8")
    return [out, *written]

"""The postmortem as Markdown for tickets and wikis, with its plots written beside it as SVG files."""

from __future__ import annotations

import re
from pathlib import Path

from forensics.reports.escape import longest_backticks, md_fence, visible
from forensics.reports.postmortem.build import Postmortem, finding_ranks, lane_cell
from forensics.reports.postmortem.html import _num, _onset, _pct

# Characters with a meaning anywhere in a Markdown line (CommonMark + GitHub tables): backslash-escaped in text.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]|~>])")
# ... and those that mean something only at the start of a line (heading, list, quote, numbered list).
_MD_LEAD = re.compile(r"^(\s*(?:\d+)?)([#+\-=]|(?<=\d)[.)])")


def text(value: object) -> str:
    """Input text for a Markdown paragraph or table cell: one line, HTML and Markdown syntax neutralised."""
    s = visible(str(value)).replace("\r", " ").replace("\n", " ")
    s = s.replace("&", "&amp;").replace("<", "&lt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return _MD_LEAD.sub(lambda m: m.group(1) + "\\" + m.group(2), s)


def code(value: object) -> str:
    """Trusted text (playbook ids) as inline code: a backtick run longer than any inside it, padded so edges stay literal."""
    s = visible(str(value)).replace("\r", " ").replace("\n", " ")
    fence = "`" * (longest_backticks(s) + 1)
    return f"{fence} {s} {fence}"


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
    out = [f"# Incident postmortem: {text(pm.run)}", ""]
    if pm.baseline:
        out += [f"Compared with {text(pm.baseline)}.", ""]
    out += [f"forensics {pm.version}, {pm.checked} playbooks ran.", ""]
    out += ["## Verdict", "", "> " + text(pm.verdict), ""]
    out += ["## Impact", "", _row("what", "value", "how we know"), _row("---", "---", "---")]
    out += [_row(text(f.label), f"**{text(f.value)}**", text(f.note)) for f in pm.impact]
    out += ["", "## Causal chain", ""]

    def node(n, depth: int) -> None:
        f = n.finding
        who = f" on {finding_ranks(f)}" if f.ranks else ""
        out.append("  " * depth + f"- **{f.severity.label}** {code(f.id)} {text(f.playbook.title)}{who}, onset {text(_onset(f.onset))}: "
                   + text(f.summary))
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
            cells = [text(lane_cell(ln.point(k), pm.timeline_by_time)) for k in ("first_metric", "last_metric", "first_error", "exit")]
            out.append(_row(name, *cells))
    out += ["", "## Metric plots", ""]
    for fig in pm.metric_figures:
        out += [f"![{fig.title}]({files_dir}/{fig.key}.svg)", "", text(fig.caption), ""]
    if not pm.metric_figures:
        out += ["No training metrics in the logs.", ""]
    if pm.gpu_figures:
        out += ["## GPU telemetry", ""]
        for fig in pm.gpu_figures:
            out += [f"![{fig.title}]({files_dir}/{fig.key}.svg)", "", text(fig.caption), ""]
    if pm.trace:
        out += ["## Trace summary", "", _row("trace", "rank", "profiled steps", "GPU busy share", "syncs per step", "data-loader share"),
                _row(*["---"] * 6)]
        for t in pm.trace.traces:
            out.append(_row(text(t["file"]), t["rank"] if t["rank"] is not None else "", t["steps"], _pct(t["gpu_busy"]),
                            _num(t["syncs_per_step"]), _pct(t["loader_share"])))
        for title, rows in (("Top kernels and device copies by time", pm.trace.kernels), ("Top ops by time (inclusive)", pm.trace.ops)):
            if rows:
                out += ["", f"### {title}", "", _row("name", "calls", "ms", "share"), _row(*["---"] * 4)]
                out += [_row(text(r["name"]), r["calls"], f"{r['ms']:.2f}", _pct(r["share"])) for r in rows]
        out.append("")
    out += ["## Evidence and action items", ""]
    for f in pm.findings:
        explained = "" if f.root_cause else f", explained by {', '.join(f.explained_by)}"
        out += [f"### {f.rank}. {text(f.playbook.title)} ({code(f.id)}, {f.severity.label}, confidence {f.confidence:.2f}{explained})", "",
                text(f.summary), ""]
        for e in f.evidence:
            out += [f"{text(f'{e.file}:{e.line}')}", "", *block(e.text), ""]
        if f.evidence_count > len(f.evidence):
            out += [f"... {f.evidence_count - len(f.evidence)} more evidence rows.", ""]
        for c in f.causes[:3]:
            out.append(f"- [ ] Verify cause \u201c{text(c.cause.title)}\u201d ({c.likelihood:.0%}): {text(c.cause.verify)}")
            out.append(f"- [ ] Fix: {text(c.cause.fix)}")
        out += [f"- [ ] Confirm the finding: {text(f.playbook.verify)}", f"- [ ] General fix: {text(f.playbook.fix)}", ""]
    if not pm.findings:
        out += ["No findings.", ""]
    out += ["## What could not be checked", ""]
    if pm.skipped or pm.errored:
        out += [_row("playbook", "why it did not run"), _row("---", "---")]
        out += [_row(code(pid), text(why)) for pid, why in pm.skipped]
        out += [_row(code(pid), "error: " + text(why)) for pid, why in pm.errored]
    else:
        out.append("Every selected playbook ran.")
    out.append("")
    if pm.files_unparsed:
        out += [_row("file", "kind", "status", "why"), _row(*["---"] * 4)]
        out += [_row(text(r["file"]), text(r["kind"]), text(r["status"]), text(r["error"] or "")) for r in pm.files_unparsed]
    else:
        out.append("Every file was parsed completely.")
    out += ["", "## Appendix", "", f"Run folder {text(pm.run)}; rows: " + ", ".join(f"{k} {v}" for k, v in pm.tables.items()) + ".", ""]
    if pm.environment:
        out += ["### Environment found in the inputs", "", _row("what", "value", "where"), _row("---", "---", "---")]
        out += [_row(text(f.label), text(f.value), text(f.note)) for f in pm.environment]
        out.append("")
    out += ["### Files", "", _row("file", "kind", "status", "rows", "bytes", "note"), _row(*["---"] * 6)]
    out += [_row(text(r["file"]), text(r["kind"]), text(r["status"]), r["rows"], r["bytes"], text(r["error"] or "")) for r in pm.files]
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

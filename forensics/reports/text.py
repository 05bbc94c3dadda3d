"""Terminal output that reads like a good compiler error: root first, chain under it, evidence, verify, fix."""

from __future__ import annotations

import datetime as dt

from forensics.contracts.model import Evidence, Severity
from forensics.engine import Analysis, Finding
from forensics.reports.escape import one_line, visible

_COLOURS = {
    Severity.CRITICAL: "\x1b[1;31m",
    Severity.HIGH: "\x1b[31m",
    Severity.MEDIUM: "\x1b[33m",
    Severity.LOW: "\x1b[36m",
    Severity.INFO: "\x1b[2m",
}
_BOLD, _DIM, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[0m"


class _Style:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def sev(self, s: Severity, text: str) -> str:
        return f"{_COLOURS[s]}{text}{_RESET}" if self.colour else text

    def bold(self, text: str) -> str:
        return f"{_BOLD}{text}{_RESET}" if self.colour else text

    def dim(self, text: str) -> str:
        return f"{_DIM}{text}{_RESET}" if self.colour else text


def _when(f: Finding) -> str:
    o = f.onset
    parts = []
    if o.rank is not None:
        parts.append(f"rank {o.rank}")
    if o.step is not None:
        parts.append(f"step {o.step}")
    if o.time is not None:
        parts.append(o.time.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"))
    return ", ".join(parts)


def _quote(e: Evidence, st: _Style, indent: str, keep: int = 5) -> list[str]:
    """The evidence lines with their numbers; a long block shows its head and its tail."""
    lines = e.text.splitlines() or [""]
    numbered = list(enumerate(lines, e.line))
    if len(numbered) > 2 * keep + 1:
        numbered = numbered[:keep] + [(None, f"... ({len(lines) - 2 * keep} more lines)")] + numbered[-keep:]
    width = len(str(e.line + len(lines) - 1))
    out = [f"{indent}{st.dim('-->')} {one_line(e.file)}:{e.line}"]
    for num, text in numbered:
        label = "" if num is None else str(num)
        out.append(f"{indent}{label:>{width}} {st.dim('|')} {one_line(text)}")
    return out


def _finding(f: Finding, st: _Style, depth: int, max_evidence: int) -> list[str]:
    ind = "    " * depth
    head = st.sev(f.severity, f"{f.severity.label}[{f.id}]")
    arrow = "caused: " if depth else ""
    out = [f"{ind}{arrow}{head}: {st.bold(one_line(f.summary))}"]
    when = _when(f)
    meta = f"#{f.rank}, confidence {f.confidence:.2f}" + (f", {when}" if when else "")
    out.append(f"{ind}  {st.dim(meta)}")
    shown = f.evidence[: max_evidence if depth == 0 else 2]
    for e in shown:
        out.extend(_quote(e, st, ind + "  "))
    if f.evidence_count > len(shown):
        out.append(f"{ind}  {st.dim(f'... {f.evidence_count - len(shown)} more evidence rows')}")
    if depth == 0:
        for i, c in enumerate(f.causes[:3], 1):
            link = f" (see {c.cause.playbook})" if c.cause.playbook not in (None, "*") else ""
            out.append(f"{ind}  = cause {i} ({c.likelihood:.0%}): {c.cause.title}{link}")
        if f.causes:
            top = f.causes[0].cause
            out.append(f"{ind}  = verify: {top.verify}")
            out.append(f"{ind}  = fix: {top.fix}")
        else:
            out.append(f"{ind}  = verify: {f.playbook.verify}")
            out.append(f"{ind}  = fix: {f.playbook.fix}")
    return out


def render(a: Analysis, colour: bool = False, max_evidence: int = 3) -> str:
    """The text report."""
    st = _Style(colour)
    run = a.context.run
    files = run.table("files").to_pylist()
    bad = [r for r in files if r["status"] in ("failed", "partial")]
    lines = [st.bold(f"forensics: {one_line(run.root)}") + st.dim(f"  ({len(files)} files, {len(a.ran)} playbooks ran, {len(a.skipped)} skipped)")]
    for r in bad:
        lines.append(st.dim(f"  note: {one_line(r['file'])}: {r['status']}: {one_line(r['error'])}"))
    ff = a.first_failure
    if ff is not None and (ff.rank is not None or ff.step is not None):
        parts = [f"rank {ff.rank}" if ff.rank is not None else "", f"step {ff.step}" if ff.step is not None else "",
                 ff.time.strftime("%Y-%m-%d %H:%M:%S UTC") if ff.time else "", f"{one_line(ff.file)}:{ff.line}" if ff.file else ""]
        lines.append(st.bold("first failure: ") + ", ".join(p for p in parts if p))
    lines.append("")
    depth_of: dict[str, int] = {}
    roots = [f for f in a.findings if f.root_cause]
    problems = [f for f in a.findings if f.severity > Severity.INFO]
    if not problems:
        lines.append("No problems found." + (f" ({len(a.findings)} informational notes)" if a.findings else ""))
    for f in a.findings:
        parent = f.explained_by[0] if f.explained_by else None
        depth = depth_of.get(parent, -1) + 1 if parent else 0
        depth_of[f.id] = depth
        if depth == 0 and roots and f is not roots[0]:
            lines.append("")
        lines.extend(_finding(f, st, depth, max_evidence))
    for pid, err in sorted(a.errored.items()):
        lines.append(st.dim(f"  internal error in playbook {pid}: {visible(err)}"))
    n_root = len([f for f in problems if f.root_cause])
    lines.append("")
    lines.append(st.dim(f"{len(problems)} finding(s), {n_root} root cause(s)."))
    return "\n".join(lines) + "\n"

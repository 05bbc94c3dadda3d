"""A playbook's documentation as `forensics playbooks show` prints it."""

from __future__ import annotations

from forensics.playbooks.base import Playbook


def render_doc(pb: Playbook) -> str:
    """Title, metadata, the fixed doc sections, thresholds and ranked causes, as Markdown."""
    out = [f"# {pb.id}: {pb.title}", "", f"Category: {pb.category}. Severity: {pb.severity.label}. Reads: {', '.join(pb.tables)}."]
    if pb.explains:
        out.append(f"Can explain: {', '.join(pb.explains)}.")
    out += ["", pb.doc.strip(), "", "## Thresholds", ""]
    if pb.thresholds:
        for name, t in pb.thresholds.items():
            origin = f" (origin: {t.origin})" if t.origin else ""
            out.append(f"- `{name}` = {t.default:g}: {t.doc}{origin}. Override: `--set {pb.id}.{name}=VALUE` or `[thresholds.{pb.id}]` in forensics.toml.")
    else:
        out.append("None.")
    out += ["", "## Causes (in order of prior likelihood)", ""]
    for c in sorted(pb.causes, key=lambda c: -c.prior):
        link = f" (see `{c.playbook}`)" if c.playbook and c.playbook != "*" else (" (confirmed by any earlier failure)" if c.playbook else "")
        out += [f"- **{c.id}**{link}: {c.title}", f"  - verify: `{c.verify}`", f"  - fix: {c.fix}"]
    out += ["", "## Verify", "", f"`{pb.verify}`", "", "## Fix", "", pb.fix]
    return "\n".join(out) + "\n"

"""The postmortem as one self-contained HTML page (Jinja2 with autoescaping: every input string is escaped)."""

from __future__ import annotations

from functools import cache
from importlib import resources

import jinja2
from markupsafe import Markup

from forensics.contracts.model import Onset
from forensics.reports.escape import visible
from forensics.reports.postmortem.build import Postmortem, finding_ranks, lane_cell


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:.0%}"


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


def _onset(o: Onset) -> str:
    bits = [f"step {o.step}"] if o.step is not None else []
    if o.time is not None:
        bits.append(o.time.strftime("%Y-%m-%d %H:%M:%S UTC"))
    if o.file:
        bits.append(f"{o.file}:{o.line}")
    return ", ".join(bits) or "unknown"


@cache
def _template() -> jinja2.Template:
    # Every plain string printed into the page shows its control characters as visible escapes (then is
    # HTML-escaped); Markup (the inline SVG plots) passes as it is.
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=False, keep_trailing_newline=True,
                             finalize=lambda v: visible(v) if isinstance(v, str) and not isinstance(v, Markup) else v)
    text = resources.files("forensics.reports.postmortem").joinpath("page.html.j2").read_text(encoding="utf-8")
    return env.from_string(text)


def render(pm: Postmortem) -> str:
    """The HTML text."""
    return _template().render(pm=pm, pct=_pct, num=_num, onset=_onset, ranks=finding_ranks,
                              cell=lambda p: lane_cell(p, pm.timeline_by_time))

"""Drawing only: prepared series and lanes to deterministic SVG text with matplotlib's SVG backend."""

from __future__ import annotations

import datetime as dt
import io
import re

import matplotlib
import matplotlib.dates as mdates
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter
from matplotlib.transforms import blended_transform_factory

from forensics.reports.postmortem.facts import Lane
from forensics.reports.postmortem.series import PlotData

# Text from the input (metric names in legends) is drawn as text, never parsed as math ($...$);
# text as <text> elements keeps the page small and searchable.
RC = {"svg.fonttype": "none", "text.parse_math": False, "font.size": 9, "axes.titlesize": 10,
      "font.family": "DejaVu Sans", "axes.grid": True, "grid.alpha": 0.3, "path.simplify": True}
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
MAX_LANES = 40
MARGINS = {"left": 0.09, "right": 0.985, "bottom": 0.2, "top": 0.8}
# The timeline's frame in inches: lane names on the left, the legend on the right, title above, time axis below.
LANE_MARGINS_IN = {"left": 0.75, "right": 1.4, "bottom": 0.5, "top": 0.3}
POINT_STYLE = {  # kind -> marker, colour, size, legend label
    "first_metric": ("o", "#1f77b4", 5, "first metric line"),
    "last_metric": ("|", "#1f77b4", 12, "last metric line"),
    "first_error": ("X", "#d62728", 7, "first error"),
    "exit": ("s", "#333333", 5, "exit"),
    "first_failure": ("*", "#d62728", 16, "first failure"),
}


def gid(*parts: str) -> str:
    """An SVG id from trusted parts, reduced to [a-z0-9-] (ids also name what tests look for)."""
    return re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")


def _figure(width: float, height: float) -> tuple[Figure, object]:
    """A figure and its axes on the SVG canvas: no pyplot (no figure registry, no Agg canvas drawn for nothing)."""
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasSVG(fig)
    return fig, fig.add_subplot()


def to_svg(fig: Figure, salt: str) -> str:
    """The figure as an inline <svg> element: no XML prolog, DOCTYPE, metadata or namespace URLs, same
    bytes for the same input (hash salt fixed per figure so ids of two figures on one page never collide)."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    # Inline SVG in HTML needs no namespace declarations; dropping them leaves no URL in the page.
    text = re.sub(r'\s+xmlns(?::\w+)?="[^"]*"', "", text, count=3)
    return text.replace("<svg ", f'<svg role="img" aria-label="{salt}" ', 1)


def _datenum(x: float) -> float:
    return x / 86400.0  # matplotlib's date epoch is 1970-01-01 (the default): days since it


def _time_axis(ax) -> None:
    loc = mdates.AutoDateLocator(tz=dt.timezone.utc, maxticks=8)
    ax.xaxis.set_major_locator(loc)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc, tz=dt.timezone.utc))


def _xs(values: list[float], x_kind: str) -> list[float]:
    return [_datenum(v) for v in values] if x_kind == "time" else values


def _merged(spans: list[list[float]]) -> list[tuple[float, float]]:
    """Intervals sorted, with overlapping or touching ones joined."""
    out: list[list[float]] = []
    for x0, x1 in sorted(spans):
        if out and x0 <= out[-1][1]:
            out[-1][1] = max(out[-1][1], x1)
        else:
            out.append([x0, x1])
    return [(a, b) for a, b in out]


def plot(p: PlotData, onsets: list[tuple[float, str, bool]], log_y: bool = False) -> str:
    """One series plot: lines per series, NaN/Inf as markers on the top edge, onsets as vertical lines,
    shaded spans (throttling, skipped steps)."""
    with matplotlib.rc_context(RC):
        fig, ax = _figure(8.5, 2.6)
        for i, s in enumerate(p.series):
            colour = COLORS[i % len(COLORS)]
            if s.x:
                ax.plot(_xs(s.x, p.x_kind), s.y, color=colour, linewidth=1.0, label=s.label)
            if s.bad_x:
                # On the top edge (axes coordinates): a NaN has no height, but it has a place.
                top = blended_transform_factory(ax.transData, ax.transAxes)
                (m,) = ax.plot(_xs(s.bad_x, p.x_kind), [0.97] * len(s.bad_x), linestyle="none", marker="X", markersize=7,
                               color="#d62728", transform=top, label=f"NaN/Inf ({s.label})", clip_on=False)
                m.set_gid(gid(p.key, "nonfinite", s.label))
        if p.spans:
            # One collection of merged intervals, not a patch per span: a run with thousands of skipped steps
            # would otherwise cost a patch (and an SVG path) each.
            bars = [(x0, x1 - x0) for x0, x1 in _merged([_xs([a, b if b > a else a + 1e-9], p.x_kind) for a, b, _ in p.spans])]
            ax.broken_barh(bars, (0, 1), transform=ax.get_xaxis_transform(), color="#ff9896", alpha=0.35,
                           linewidth=0).set_gid(gid(p.key, "span"))
        if p.spans:
            ax.plot([], [], color="#ff9896", linewidth=6, alpha=0.6, label=p.spans[0][2].split(":")[-1].strip() if p.key == "loss"
                    or p.key == "loss_scale" else "throttled")
        labels: dict[float, list[str]] = {}
        for x, label, root in onsets:
            line = ax.axvline(_xs([x], p.x_kind)[0], color="#d62728" if root else "#ff7f0e", linestyle="--", linewidth=1.1)
            line.set_gid(gid(p.key, "onset", label))
            labels.setdefault(x, []).append(label)
        for x, names in labels.items():
            # Findings that start at the same place share one label (separate ones would overprint).
            ax.text(_xs([x], p.x_kind)[0], 1.01, ", ".join(names), transform=blended_transform_factory(ax.transData, ax.transAxes),
                    fontsize=7, color="#d62728", ha="center", va="bottom")
        if log_y and all(v > 0 for s in p.series for v in s.y):
            ax.set_yscale("log")
            # Plain numbers: the default log labels are mathtext, which parse_math=False would print raw.
            plain = FuncFormatter(lambda v, _pos: f"{v:g}")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(NullFormatter())
        if p.x_kind == "time":
            _time_axis(ax)
        ax.set_xlabel({"step": "step", "time": "time (UTC)", "line": "line / sample"}[p.x_kind])
        # A fixed title height (y given): matplotlib otherwise measures every tick label to place it, at each draw.
        ax.set_title(p.title, loc="left", pad=12, y=1.0)
        if p.series:
            ax.legend(loc="upper right", fontsize=7, ncols=min(3, len(p.series) + 1), framealpha=0.8)
        # Fixed margins, not tight_layout: every series plot has the same frame (title and onset labels above,
        # ticks and the axis label below), and measuring text to fit it costs a second draw of each figure.
        fig.subplots_adjust(**MARGINS)
        return to_svg(fig, p.key)


def timeline(lanes: list[Lane], by_time: bool) -> str:
    """Per-rank swim lanes over wall time (or steps): first/last metric line, first error, exit, first failure."""
    shown = sorted(lanes, key=lambda ln: (not ln.first_failure, ln.point("first_error") is None))[:MAX_LANES]
    shown.sort(key=lambda ln: (ln.rank is None, ln.rank if ln.rank is not None else 0))

    def xof(pt) -> float | None:
        if by_time:
            return mdates.date2num(pt.ts) if pt.ts is not None else None
        return float(pt.step) if pt.step is not None else None

    height = 0.9 + 0.32 * max(len(shown), 2)
    with matplotlib.rc_context(RC):
        fig, ax = _figure(8.5, height)
        seen: set[str] = set()
        for y, lane in enumerate(shown):
            xs = [(pt, xof(pt)) for pt in lane.points]
            xs = [(pt, x) for pt, x in xs if x is not None]
            if not xs:
                continue
            lo, hi = min(x for _, x in xs), max(x for _, x in xs)
            ax.plot([lo, hi], [y, y], color="#bbbbbb", linewidth=1, zorder=1)
            fm, lm = lane.point("first_metric"), lane.point("last_metric")
            if fm and lm and xof(fm) is not None and xof(lm) is not None:
                ax.plot([xof(fm), xof(lm)], [y, y], color="#1f77b4", linewidth=4, alpha=0.5, zorder=2,
                        label=None if "training" in seen else "logging steps")
                seen.add("training")
            for pt, x in xs:
                marker, colour, size, label = POINT_STYLE[pt.kind]
                (m,) = ax.plot([x], [y], linestyle="none", marker=marker, color=colour, markersize=size, zorder=3,
                               label=None if pt.kind in seen else label)
                seen.add(pt.kind)
                m.set_gid(gid("timeline", pt.kind, lane.name))
                if pt.kind == "first_failure":
                    ax.annotate(f"first failure ({lane.name})", (x, y), xytext=(6, 6), textcoords="offset points",
                                fontsize=8, color=colour, fontweight="bold")
        ax.set_yticks(range(len(shown)), [ln.name for ln in shown])
        ax.set_ylim(len(shown) - 0.5, -0.8)
        if by_time:
            _time_axis(ax)
            ax.set_xlabel("time (UTC)")
        else:
            ax.set_xlabel("step (the logs carry no time stamps)")
        ax.set_title("Timeline", loc="left", y=1.0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, framealpha=0.8)
        # Fixed margins in inches (lane names, legend, axis label), not tight_layout: that draws the figure twice.
        m = LANE_MARGINS_IN
        fig.subplots_adjust(left=m["left"] / 8.5, right=1 - m["right"] / 8.5, bottom=m["bottom"] / height, top=1 - m["top"] / height)
        return to_svg(fig, "timeline")

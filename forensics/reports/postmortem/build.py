"""Assemble the postmortem from an analysis: facts, plots (as SVG text) and the sections, ready to render."""

from __future__ import annotations

from dataclasses import dataclass, field

from forensics import __version__
from forensics.engine import Analysis, Finding
from forensics.playbooks.evidence import ranks_text
from forensics.reports.postmortem import facts as F
from forensics.reports.postmortem import plots, series
from forensics.reports.postmortem.traces import TraceSummary, summarize


@dataclass
class Figure:
    """One drawn plot: a stable key (file name in Markdown), its title, the SVG and a caption."""

    key: str
    title: str
    svg: str
    caption: str = ""


@dataclass
class Postmortem:
    """Everything the page shows, in section order."""

    run: str
    baseline: str | None
    version: str
    verdict: str
    healthy: bool
    impact: list[F.Fact]
    chain: list[F.ChainNode]
    lanes: list[F.Lane]
    timeline_by_time: bool
    timeline: Figure | None
    metric_figures: list[Figure]
    gpu_figures: list[Figure]
    trace: TraceSummary | None
    findings: list[Finding]
    skipped: list[tuple[str, str]]
    errored: list[tuple[str, str]]
    files_unparsed: list[dict]
    files: list[dict]
    environment: list[F.Fact]
    tables: dict[str, int] = field(default_factory=dict)
    checked: int = 0


def _onsets(a: Analysis, x_kind: str) -> list[tuple[float, str, bool]]:
    """Where each finding starts, on a plot's x axis (steps or epoch seconds)."""
    out = []
    for f in a.findings:
        o = f.onset
        if x_kind == "step" and o.step is not None:
            out.append((float(o.step), f.id, f.root_cause))
        elif x_kind == "time" and o.time is not None:
            out.append((o.time.timestamp(), f.id, f.root_cause))
    return out


def _caption(p: series.PlotData) -> str:
    bits = [f"{p.points} points"]
    drawn = sum(len(s.x) for s in p.series)
    bad = sum(len(s.bad_x) for s in p.series)
    if drawn + bad < p.points:
        bits.append(f"{drawn} drawn (min and max per pixel column)")
    if bad:
        bits.append(f"NaN/Inf at {bad} place(s), marked on the top edge")
    if p.note:
        bits.append(p.note)
    return "; ".join(bits)


def build(a: Analysis) -> Postmortem:
    """The postmortem of an analysed run."""
    ctx = a.context
    saves = F.checkpoint_saves(ctx)
    impact, t_fail, estimated = F.impact(a, ctx, saves)
    lanes = F.lanes(ctx, a)
    points = [p for ln in lanes for p in ln.points]
    by_time = bool(points) and sum(p.ts is not None for p in points) * 2 >= len(points)
    usable = [p for p in points if (p.ts if by_time else p.step) is not None]
    timeline = Figure("timeline", "Timeline", plots.timeline(lanes, by_time)) if usable else None
    prefer = ([a.first_failure.rank] if a.first_failure and a.first_failure.rank is not None else []) + \
        sorted({r for f in a.findings for r in f.ranks})
    metric_figs = []
    for p in series.metric_plots(ctx, prefer):
        svg = plots.plot(p, _onsets(a, p.x_kind), log_y=p.key in ("lr", "loss_scale", "grad_norm"))
        metric_figs.append(Figure(p.key, p.title, svg, _caption(p)))
    gpu_figs = []
    for p in series.gpu_plots(ctx):
        svg = plots.plot(p, _onsets(a, p.x_kind))
        cap = _caption(p) + (f"; {len(p.spans)} throttle interval(s) shaded" if p.spans else "")
        gpu_figs.append(Figure(p.key, p.title, svg, cap))
    files = ctx.table("files")
    return Postmortem(
        run=str(ctx.run.root),
        baseline=str(ctx.baseline.run.root) if ctx.baseline is not None else None,
        version=__version__,
        verdict=F.verdict(a, ctx, t_fail, estimated),
        healthy=not any(f.severity > 0 for f in a.findings),
        impact=impact,
        chain=F.chain(a),
        lanes=lanes,
        timeline_by_time=by_time,
        timeline=timeline,
        metric_figures=metric_figs,
        gpu_figures=gpu_figs,
        trace=summarize(ctx),
        findings=a.findings,
        skipped=sorted(a.skipped.items()),
        errored=sorted(a.errored.items()),
        files_unparsed=F.unchecked_files(ctx),
        files=files.select("file", "kind", "status", "rows", "bytes", "error").sort("file").to_dicts() if files.height else [],
        environment=F.environment(ctx),
        tables={name: ctx.run.num_rows(name) for name in ("events", "metrics", "gpu", "gpu_procs", "spans", "counters")},
        checked=len(a.ran),
    )


def lane_cell(p: F.Point | None, by_time: bool) -> str:
    """A lane point as table text: time or step, then file:line."""
    if p is None:
        return ""
    when = []
    if p.ts is not None:
        when.append(p.ts.strftime("%H:%M:%S"))
    if p.step is not None:
        when.append(f"step {p.step}")
    return " ".join(when) + (f" ({p.file}:{p.line})" if p.file else "")


def finding_ranks(f: Finding) -> str:
    """'ranks 0-2' or ''."""
    return ranks_text(f.ranks)


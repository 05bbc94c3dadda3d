"""Run the playbooks over a run's tables, merge detections into findings, link and rank them.

Ranking (deterministic): a finding B is explained by A when B's playbook is among A's
consequences (`explains`) and A's onset is not later than B's. Findings nobody explains
are roots. Roots are ordered by severity, then confidence, then onset (time, then step),
then playbook id; each root is followed by the findings it explains, earliest first.
"""

from __future__ import annotations

import datetime as dt
import traceback
from dataclasses import dataclass, field

from forensics.config import Config, resolve_thresholds, selected
from forensics.contracts.context import Context
from forensics.contracts.model import ANY_PLAYBOOK, Cause, Detection, Evidence, Onset, Severity
from forensics.playbooks.base import Playbook, registry
from forensics.progress import Meter

MAX_EVIDENCE = 10


@dataclass
class RankedCause:
    """A cause with its likelihood for this run and the evidence behind it."""

    cause: Cause
    likelihood: float
    evidence: list[Evidence]


@dataclass
class Finding:
    """One playbook's diagnosis of the run."""

    playbook: Playbook
    severity: Severity
    confidence: float
    summary: str
    onset: Onset
    evidence: list[Evidence]
    evidence_count: int
    causes: list[RankedCause]
    facts: dict
    ranks: list[int]
    raw_causes: dict[str, float] = field(default_factory=dict)
    cause_evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    # Causes that an explaining finding proved (a memory-leak finding before an OOM proves its growth cause).
    confirmed: set[str] = field(default_factory=set)
    explained_by: list[str] = field(default_factory=list)
    explains: list[str] = field(default_factory=list)
    root_cause: bool = True
    rank: int = 0

    @property
    def id(self) -> str:
        """The playbook id."""
        return self.playbook.id


@dataclass
class Analysis:
    """The outcome of analysing one run."""

    context: Context
    findings: list[Finding]
    ran: list[str]
    skipped: dict[str, str]
    errored: dict[str, str]
    # The earliest error on any rank: where a multi-rank failure started.
    first_failure: Onset | None = None


def _merge(pb: Playbook, detections: list[Detection]) -> Finding:
    """Several detectors of one playbook (or several hits) become one finding."""
    detections = sorted(detections, key=lambda d: _onset_key(d.onset))
    first = detections[0]
    causes: dict[str, float] = {}
    cause_ev: dict[str, list[Evidence]] = {}
    evidence: list[Evidence] = []
    facts: dict = {}
    ranks: set[int] = set()
    count = 0
    for d in detections:
        for cid, strength in d.causes.items():
            pb.cause(cid)  # unknown cause ids are a playbook bug: fail loudly in tests
            causes[cid] = max(causes.get(cid, 0.0), strength)
        for cid, rows in d.cause_evidence.items():
            cause_ev.setdefault(cid, []).extend(rows)
        evidence.extend(d.evidence)
        count += d.evidence_count if d.evidence_count is not None else len(d.evidence)
        for k, v in d.facts.items():
            facts.setdefault(k, v)
        ranks.update(r for r in d.ranks if r is not None)
        if d.onset.rank is not None:
            ranks.add(d.onset.rank)
    for d in detections:
        for cid, factor in d.discount.items():
            pb.cause(cid)
            if cid in causes:
                causes[cid] *= factor
    severity = max((d.severity for d in detections if d.severity is not None), default=pb.severity)
    summary = first.summary if len(detections) == 1 else "; ".join(dict.fromkeys(d.summary for d in detections))
    return Finding(
        playbook=pb,
        severity=severity,
        confidence=max(d.confidence for d in detections),
        summary=summary,
        onset=first.onset,
        evidence=_dedupe(evidence)[:MAX_EVIDENCE],
        evidence_count=max(count, len(_dedupe(evidence))),
        causes=[],
        facts=facts,
        ranks=sorted(ranks),
        raw_causes=causes,
        cause_evidence=cause_ev,
    )


def _dedupe(rows: list[Evidence]) -> list[Evidence]:
    seen: set[tuple[str, int]] = set()
    out = []
    for r in rows:
        if (r.file, r.line) not in seen:
            seen.add((r.file, r.line))
            out.append(r)
    return out


_FAR = dt.datetime.max.replace(tzinfo=dt.timezone.utc)


def _onset_key(o: Onset) -> tuple:
    return (o.time is None, o.time or _FAR, o.step is None, o.step or 0, o.file or "", o.line or 0)


def not_later(a: Onset, b: Onset) -> bool:
    """Whether onset `a` is not later than `b`, comparing what both know (time, else step)."""
    if a.time is not None and b.time is not None:
        return a.time <= b.time
    if a.step is not None and b.step is not None:
        return a.step <= b.step
    if a.file is not None and a.file == b.file and a.line is not None and b.line is not None:
        return a.line <= b.line
    return True  # nothing comparable: the declared causal direction stands


# How far a cause another finding confirmed leads the best unconfirmed one (score ratio).
CONFIRMED_LEAD = 1.5


def _rank_causes(f: Finding) -> None:
    """Order causes by prior x strength; when no evidence favours any, by prior alone."""
    strengths = f.raw_causes
    scored = []
    for c in f.playbook.causes:
        s = strengths.get(c.id, 0.0)
        scored.append((c, c.prior * s if strengths else c.prior))
    if f.confirmed:
        # Another finding's evidence outweighs a prior: a confirmed cause leads the causes this finding's
        # own evidence favours (its own text may fit them too: a leak's last step does not fit the GPU).
        lead = max((score for c, score in scored if c.id not in f.confirmed), default=0.0)
        scored = [(c, max(score, lead * CONFIRMED_LEAD) if c.id in f.confirmed else score) for c, score in scored]
    total = sum(score for _, score in scored) or 1.0
    ranked = sorted(scored, key=lambda cs: (-cs[1], f.playbook.causes.index(cs[0])))
    f.causes = [
        RankedCause(c, round(score / total, 3), f.cause_evidence.get(c.id, [])[:MAX_EVIDENCE])
        for c, score in ranked
        if score > 0 or not strengths
    ]


def drop_claimed_fallbacks(findings: list[Finding]) -> list[Finding]:
    """A catch-all finding gives way to every specific finding above info.

    It stays only when every such finding is among its consequences and starts strictly after it (a crash on one
    rank before the others time out in a collective); when the order cannot be told, the specific finding wins.
    """
    specific = [f for f in findings if not f.playbook.fallback and f.severity > Severity.INFO]
    if not specific:
        return findings

    def stays(f: Finding) -> bool:
        mine = {(e.file, e.line) for e in f.evidence}
        # A finding that quotes one of the catch-all's failure lines has claimed that failure.
        return all(g.id in f.playbook.explains and not_later(f.onset, g.onset) and not not_later(g.onset, f.onset)
                   and not mine & {(e.file, e.line) for e in g.evidence} for g in specific)

    return [f for f in findings if not f.playbook.fallback or stays(f)]


def link(findings: list[Finding]) -> None:
    """Fill explained_by / explains and boost the causes that another finding confirms."""
    by_id = {f.id: f for f in findings}
    for a in findings:
        for bid in a.playbook.explains:
            b = by_id.get(bid)
            if b is None or b is a or not not_later(a.onset, b.onset):
                continue
            # Mutual explanation with equal onsets: the stricter earlier one wins, else severity, else id.
            mutual = a.id in b.playbook.explains and not_later(b.onset, a.onset)
            if mutual and (b.severity, a.id) > (a.severity, b.id):
                continue
            a.explains.append(b.id)
            b.explained_by.append(a.id)
            named = [c for c in b.playbook.causes if c.playbook == a.id]
            for c in named or [c for c in b.playbook.causes if c.playbook == ANY_PLAYBOOK]:
                b.raw_causes[c.id] = 1.0
                b.confirmed.add(c.id)
                b.cause_evidence.setdefault(c.id, []).extend(a.evidence[:2])
    for f in findings:
        f.root_cause = not f.explained_by


def order(findings: list[Finding]) -> list[Finding]:
    """Roots by severity, confidence and earliness; each followed by its chain."""
    def key(f: Finding) -> tuple:
        return (-int(f.severity), -round(f.confidence, 3), _onset_key(f.onset), f.id)

    by_id = {f.id: f for f in findings}
    out: list[Finding] = []
    placed: set[str] = set()

    def visit(f: Finding, parent: Finding | None = None) -> None:
        if f.id in placed:
            return
        placed.add(f.id)
        if parent is not None:
            # The finding is shown under this parent: name it first among its explainers.
            f.explained_by.sort(key=lambda pid: pid != parent.id)
        out.append(f)
        for child in sorted((by_id[c] for c in f.explains), key=lambda x: (_onset_key(x.onset), x.id)):
            visit(child, f)

    for root in sorted((f for f in findings if f.root_cause), key=key):
        visit(root)
    for f in sorted(findings, key=key):  # anything left (cycles) keeps its own place
        visit(f)
    for i, f in enumerate(out, 1):
        f.rank = i
    return out


def analyze(ctx: Context, cfg: Config | None = None, overrides: dict | None = None,
            meter: Meter | None = None) -> Analysis:
    """Run every selected playbook over the context and return ranked findings (`meter`, a progress bar, counts playbooks)."""
    cfg = cfg or Config()
    merged_overrides = {**cfg.thresholds}
    for pid, values in (overrides or {}).items():
        merged_overrides.setdefault(pid, {}).update(values)
    findings: list[Finding] = []
    ran: list[str] = []
    skipped: dict[str, str] = {}
    errored: dict[str, str] = {}
    playbooks = registry()
    if meter is not None:
        meter.total = len(playbooks)
    for pid, pb in playbooks.items():
        if meter is not None:
            meter.update(1)
        if not selected(pb, cfg.select, cfg.ignore):
            continue
        th = resolve_thresholds(pb, merged_overrides)
        if pb.needs_baseline and ctx.baseline is None:
            skipped[pid] = "needs a second run (--baseline)"
            continue
        if not pb.detectors:
            skipped[pid] = "no detector for the evidence available yet"
            continue
        runnable = [(fn, tabs) for fn, tabs in pb.detectors if any(ctx.available(t) for t in tabs)]
        if not runnable:
            wanted = sorted({t for _, tabs in pb.detectors for t in tabs})
            skipped[pid] = f"no {' / '.join(wanted)} rows in this run"
            continue
        detections: list[Detection] = []
        try:
            for fn, _ in runnable:
                got = fn(ctx, th)
                if got is None:
                    continue
                detections.extend([got] if isinstance(got, Detection) else list(got))
        except Exception as exc:  # noqa: BLE001 - one broken playbook must not hide the others
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            errored[pid] = f"{type(exc).__name__}: {exc} ({tb.filename.rsplit('/', 1)[-1]}:{tb.lineno})"
            continue
        ran.append(pid)
        if detections:
            findings.append(_merge(pb, detections))
    findings = drop_claimed_fallbacks(findings)
    link(findings)
    for f in findings:
        _rank_causes(f)
    _quote_real_lines(ctx, findings)
    ordered = order(findings)
    return Analysis(context=ctx, findings=ordered, ran=ran, skipped=skipped, errored=errored,
                    first_failure=first_failure(ordered))


def _quote_real_lines(ctx: Context, findings: list[Finding]) -> None:
    """Evidence made from metric values gets the text of its real line."""
    from forensics.quote import fill

    files = ctx.table("files")
    kinds = dict(zip(files.get_column("file").to_list(), files.get_column("kind").to_list(), strict=True)) if files.height else {}
    for f in findings:
        f.evidence = fill(ctx.run.root, kinds, f.evidence)
        for c in f.causes:
            c.evidence = fill(ctx.run.root, kinds, c.evidence)


def first_failure(findings: list[Finding]) -> Onset | None:
    """The onset of the earliest root finding above `info` that names a rank or step (the first failing rank)."""
    roots = [f for f in findings if f.root_cause and f.severity >= Severity.HIGH]
    if not roots:
        return None
    return min((f.onset for f in roots), key=_onset_key)

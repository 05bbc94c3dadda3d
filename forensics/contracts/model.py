"""The vocabulary of diagnosis: severities, causes, evidence rows, onsets, detections."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import IntEnum


class Severity(IntEnum):
    """How bad the problem is if true (independent of how sure we are)."""

    INFO = 0
    LOW = 1
    MEDIUM = 2
    HIGH = 3
    CRITICAL = 4

    @property
    def label(self) -> str:
        """Lower-case name used in output and configuration."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        """`high` -> Severity.HIGH (case-insensitive)."""
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r}; use one of {', '.join(s.label for s in cls)}") from None


ANY_PLAYBOOK = "*"


@dataclass(frozen=True)
class Cause:
    """One possible root cause a playbook ranks, with how to confirm and fix it."""

    id: str
    title: str
    verify: str
    fix: str
    # Likelihood before looking at this run's evidence (the rank score is prior x strength).
    prior: float = 0.5
    # When this cause is itself another playbook's problem (growth over time -> memory-leak);
    # ANY_PLAYBOOK: confirmed by whatever finding explains this one (a peer failed first).
    playbook: str | None = None


@dataclass(frozen=True)
class Evidence:
    """One quoted input row: where it is and what it says."""

    file: str
    line: int
    text: str
    rank: int | None = None
    step: int | None = None
    ts: dt.datetime | None = None
    # True when `text` was made from parsed values (a metric row); the engine then quotes the real line.
    synthetic: bool = False


@dataclass(frozen=True)
class Onset:
    """Where a problem first shows: step, time, rank and the line that shows it."""

    step: int | None = None
    time: dt.datetime | None = None
    rank: int | None = None
    file: str | None = None
    line: int | None = None


@dataclass
class Detection:
    """What one detector saw: the raw material of a finding before ranking."""

    summary: str
    onset: Onset
    evidence: list[Evidence]
    evidence_count: int | None = None
    # cause id -> strength in [0, 1] given this run's evidence.
    causes: dict[str, float] = field(default_factory=dict)
    # cause id -> evidence rows specific to that cause.
    cause_evidence: dict[str, list[Evidence]] = field(default_factory=dict)
    confidence: float = 0.8
    severity: Severity | None = None  # overrides the playbook's default when set
    facts: dict = field(default_factory=dict)  # the numbers behind the summary
    ranks: list[int] = field(default_factory=list)  # every rank that shows the problem
    # cause id -> factor in [0, 1] applied after detections merge: evidence that makes a cause less
    # likely (memory held by another process means the job's own demand is not what ran out).
    discount: dict[str, float] = field(default_factory=dict)

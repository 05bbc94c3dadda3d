"""The Playbook declaration: metadata, thresholds, ranked causes, docs and detectors in one unit."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from forensics.contracts.model import Cause, Detection, Severity

if TYPE_CHECKING:
    from forensics.contracts.context import Context

# A detector reads the evidence tables through the context and returns what it saw (or nothing).
Detector = Callable[["Context", dict], "Detection | Iterable[Detection] | None"]

DOC_SECTIONS = ("Symptom", "Why it matters", "Evidence", "Known false positives")
CATEGORIES = ("memory", "gradient", "distributed", "numerical", "performance", "data", "device", "autograd", "operations")


@dataclass(frozen=True)
class Threshold:
    """A tunable number with its default, meaning and origin."""

    default: float
    doc: str
    origin: str = ""


@dataclass
class Playbook:
    """One diagnosis of PLAYBOOKS.md, declared once; detectors may come from several modules."""

    id: str
    title: str
    category: str
    severity: Severity
    doc: str  # Markdown with the fixed sections of DOC_SECTIONS, in order
    causes: tuple[Cause, ...]
    verify: str
    fix: str
    # Tables this playbook reads; if every one is empty the playbook is skipped, never passed.
    tables: tuple[str, ...] = ("events",)
    # Playbooks whose findings this one can explain (its consequences).
    explains: tuple[str, ...] = ()
    thresholds: dict[str, Threshold] = field(default_factory=dict)
    detectors: list[tuple[Detector, tuple[str, ...]]] = field(default_factory=list)
    # Needs a second run (--baseline) to say anything.
    needs_baseline: bool = False
    # A catch-all (unclassified-failure): its finding gives way to any specific finding above info
    # unless it came first and that finding is among its consequences (see engine.drop_claimed_fallbacks).
    fallback: bool = False

    def detector(self, tables: tuple[str, ...] | None = None) -> Callable[[Detector], Detector]:
        """Decorator adding a detector that reads `tables` (default: the playbook's tables)."""

        def wrap(fn: Detector) -> Detector:
            self.detectors.append((fn, tuple(tables or self.tables)))
            return fn

        return wrap

    def cause(self, cause_id: str) -> Cause:
        """The declared cause with this id."""
        for c in self.causes:
            if c.id == cause_id:
                return c
        raise KeyError(f"{self.id}: no cause {cause_id!r}")

    def doc_sections(self) -> list[str]:
        """The `## ` headings of the documentation, in order."""
        return re.findall(r"^## (.+?)\s*$", self.doc, flags=re.M)


_REGISTRY: dict[str, Playbook] = {}
_LOADED = False


def declare(pb: Playbook) -> Playbook:
    """Register a playbook declaration (once per id)."""
    if pb.id in _REGISTRY:
        raise ValueError(f"playbook {pb.id} declared twice")
    _REGISTRY[pb.id] = pb
    return pb


def get(playbook_id: str) -> Playbook:
    """The declared playbook with this id (loading every playbook module first)."""
    return registry()[playbook_id]


def registry() -> dict[str, Playbook]:
    """All playbooks, importing every module of the playbooks package once (declarations first)."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        import importlib
        import pkgutil

        import forensics.playbooks as playbooks

        names = sorted(m.name for m in pkgutil.walk_packages(playbooks.__path__, "forensics.playbooks."))
        # Declarations live in `playbooks.<category>.<id>` modules; detector add-ons in other
        # modules look their playbook up with get(), so import declarations first.
        skip = {"forensics.playbooks.base", "forensics.playbooks.timeseries"}
        for name in names:
            if name not in skip:
                importlib.import_module(name)
    return dict(sorted(_REGISTRY.items()))

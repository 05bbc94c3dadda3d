"""The Playbook declaration: metadata, thresholds, ranked causes, docs and detectors in one unit."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from forensics.contracts.model import Cause, Detection, Severity

if TYPE_CHECKING:
    from forensics.contracts.context import Context

# A detector reads the evidence tables through the context and returns what it saw (or nothing).
Detector = Callable[["Context", dict], "Detection | Iterable[Detection] | None"]
# A detector with the tables it reads.
Registered = tuple[Detector, tuple[str, ...]]

DOC_SECTIONS = ("Symptom", "Why it matters", "Evidence", "Known false positives")
CATEGORIES = ("memory", "gradient", "distributed", "numerical", "performance", "data", "device", "autograd", "operations")


@dataclass(frozen=True)
class Threshold:
    """A tunable number with its default, meaning and origin."""

    default: float
    doc: str
    origin: str = ""


@dataclass(frozen=True, eq=False)
class Playbook:
    """One diagnosis of PLAYBOOKS.md, declared once; detectors may come from several modules.

    Everything but `detectors` is fixed by the declaration: the instance is frozen, `thresholds` becomes a
    read-only mapping, and the detector list becomes a tuple once every playbook module is loaded.
    """

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
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    # Every event code any of its detectors reads (tests/test_playbook_declaration.py checks the modules).
    codes: tuple[str, ...] = ()
    detectors: list[Registered] | tuple[Registered, ...] = field(default_factory=list)
    # Needs a second run (--baseline) to say anything.
    needs_baseline: bool = False
    # A catch-all (unclassified-failure): its finding gives way to any specific finding above info
    # unless it came first and that finding is among its consequences (see engine.drop_claimed_fallbacks).
    fallback: bool = False

    def __post_init__(self) -> None:
        # Frozen dataclass: set the read-only views through object.__setattr__, once, here.
        object.__setattr__(self, "thresholds", MappingProxyType(dict(self.thresholds)))
        object.__setattr__(self, "codes", tuple(self.codes))
        if len(set(self.codes)) != len(self.codes):
            raise ValueError(f"{self.id}: an event code is declared twice in codes")

    def detector(self, tables: tuple[str, ...] | None = None) -> Callable[[Detector], Detector]:
        """Decorator adding a detector that reads `tables` (default: the playbook's tables)."""

        def wrap(fn: Detector) -> Detector:
            if isinstance(self.detectors, tuple):
                raise RuntimeError(f"{self.id}: detectors are added when the playbook modules load, not later")
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
        for pb in _REGISTRY.values():
            object.__setattr__(pb, "detectors", tuple(pb.detectors))
    return dict(sorted(_REGISTRY.items()))

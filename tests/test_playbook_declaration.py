"""A playbook is declared once: its declaration holds every threshold and every event code its detectors read,
and nothing changes it after its module has run."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from forensics.playbooks.base import Playbook, Threshold, registry

from tests.conftest import ROOT

PBS = registry()
PLAYBOOK_DIR = ROOT / "playbooks"


def _known_codes() -> set[str]:
    """Every event code a parser can emit: the signature table's, and the few a parser sets itself."""
    table = tomllib.loads((ROOT / "parsers" / "signatures.toml").read_text(encoding="utf-8"))
    codes = {s["code"] for s in table["signature"]}
    for path in (ROOT / "parsers").rglob("*.py"):
        codes |= {a or b for a, b in re.findall(r'\bcode="([a-z0-9_]+)"|"code": *"([a-z0-9_]+)"', path.read_text(encoding="utf-8"))}
    return codes


KNOWN = _known_codes()


def _strings(value: object):
    if isinstance(value, str):
        yield value
    elif isinstance(value, (tuple, list, set, frozenset)):
        for v in value:
            yield from _strings(v)


def _codes_in(module: ModuleType) -> set[str]:
    """Event codes a module names: in its globals (its own constants and the ones it imports) and as literals."""
    found = {s for v in vars(module).values() for s in _strings(v) if s in KNOWN}
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    # The declaration's own codes=(...) is what is checked, not evidence of a read.
    declared = {id(n) for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg == "codes" for n in ast.walk(k.value)}
    found |= {n.value for n in ast.walk(tree)
              if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in KNOWN and id(n) not in declared}
    return found


def _modules(pb: Playbook) -> set[ModuleType]:
    """The declaring module and every module that adds a detector to the playbook."""
    declaring = sys.modules[f"forensics.playbooks.{pb.category}.{pb.id.replace('-', '_')}"]
    return {declaring} | {sys.modules[fn.__module__] for fn, _ in pb.detectors}


@pytest.mark.parametrize("pid", sorted(PBS))
def test_declared_codes_are_exactly_the_codes_its_detectors_read(pid):
    pb = PBS[pid]
    read = set().union(*(_codes_in(m) for m in _modules(pb)))
    assert sorted(read - set(pb.codes)) == [], "read but not declared in codes=(...)"
    assert sorted(set(pb.codes) - read) == [], "declared in codes=(...) but read by no detector module"
    assert sorted(set(pb.codes) - KNOWN) == [], "no parser emits these codes"


def test_the_scan_sees_codes_read_through_an_imported_constant():
    # allocator-fragmentation reads the OOM codes through cuda_oom's OOM_CODES, never spelling them out.
    module = sys.modules["forensics.playbooks.memory.allocator_fragmentation"]
    source = Path(module.__file__).read_text(encoding="utf-8")
    assert source.count('"mps_oom"') == 1 and re.search(r'codes=\([^)]*"mps_oom"', source)  # only in its declaration
    assert "mps_oom" in _codes_in(module) and "mps_oom" in PBS["allocator-fragmentation"].codes
    assert "mps_oom" not in PBS["loss-spike"].codes


def test_no_detector_module_declares_thresholds_or_causes():
    # Side modules add detectors only; every number and cause is in the Playbook(...) declaration.
    offenders = []
    for path in PLAYBOOK_DIR.rglob("*.py"):
        if path.name == "base.py":
            continue
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"\.(thresholds|causes|codes|tables|explains)\s*(\[[^\]]*\]\s*=(?!=)|=(?!=)|\.(setdefault|update|pop|clear|append|extend)\()|object\.__setattr__", text):
            offenders.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert offenders == []


def test_the_declaration_is_immutable_once_loaded():
    pb = PBS["memory-leak"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        pb.causes = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        pb.thresholds["min_r2"] = Threshold(0.0, "weaker")  # type: ignore[index]
    with pytest.raises(AttributeError):
        pb.thresholds.setdefault("warmup_share", Threshold(0.5, "other"))  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="detectors are added"):
        pb.detector(("gpu",))(lambda ctx, th: None)
    assert pb.thresholds["min_r2"].default == 0.8 and len(pb.detectors) == 2


def test_a_threshold_mapping_given_to_the_declaration_is_copied():
    given = {"x": Threshold(1.0, "a number")}
    pb = Playbook(id="t", title="t", category="data", severity=PBS["loss-spike"].severity, doc="", causes=(), verify="", fix="", thresholds=given)
    given["y"] = Threshold(2.0, "added later")
    assert list(pb.thresholds) == ["x"]
    with pytest.raises(ValueError, match="declared twice"):
        Playbook(id="t", title="t", category="data", severity=pb.severity, doc="", causes=(), verify="", fix="", codes=("a", "a"))


_FINGERPRINT = """
import importlib, json, sys
from forensics.playbooks import base
def fp(pb):
    return repr((pb.title, pb.category, pb.severity, pb.doc, pb.causes, pb.verify, pb.fix, pb.tables, pb.explains,
                 list(pb.thresholds.items()), pb.codes, pb.needs_baseline))
ids = json.loads(sys.argv[1])
for pid, category in ids.items():  # the declaring modules only
    importlib.import_module(f"forensics.playbooks.{category}.{pid.replace('-', '_')}")
declared = {pid: fp(pb) for pid, pb in base._REGISTRY.items()}
loaded = {pid: fp(pb) for pid, pb in base.registry().items()}  # every detector module too
print(json.dumps(sorted(pid for pid in loaded if declared.get(pid) != loaded[pid])))
"""


def test_loading_the_detector_modules_changes_no_declaration():
    # In a fresh interpreter: a declaration as its own module leaves it equals the declaration after every
    # other module of the package has loaded.
    ids = json.dumps({pid: pb.category for pid, pb in PBS.items()})
    out = subprocess.run([sys.executable, "-c", _FINGERPRINT, ids], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout) == []

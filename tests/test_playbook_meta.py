"""The catalog itself: ids match PLAYBOOKS.md, docs have their fixed sections, links and causes are sound."""

from __future__ import annotations

import re
import tomllib

import pytest
from forensics.playbooks.base import CATEGORIES, DOC_SECTIONS, registry

from forensics.contracts.model import ANY_PLAYBOOK
from tests.conftest import ROOT, sample_cases

CATALOG = ROOT.parent / "shared" / "PLAYBOOKS.md"
PBS = registry()


def test_ids_are_the_catalog_ids():
    if not CATALOG.is_file():
        pytest.skip("../shared/PLAYBOOKS.md absent")
    ids = set(re.findall(r"^\| `([a-z0-9-]+)` \|", CATALOG.read_text(), flags=re.M))
    assert set(PBS) <= ids, set(PBS) - ids


@pytest.mark.parametrize("pid", sorted(PBS))
def test_declaration_is_complete(pid):
    pb = PBS[pid]
    assert pb.category in CATEGORIES
    sections = pb.doc_sections()
    assert sections[: len(DOC_SECTIONS)] == list(DOC_SECTIONS), sections
    assert pb.causes and len({c.id for c in pb.causes}) == len(pb.causes)
    assert all(re.fullmatch(r"[a-z0-9_]+", c.id) and c.verify and c.fix for c in pb.causes)
    assert all(c.playbook in (None, ANY_PLAYBOOK) or c.playbook in PBS for c in pb.causes)
    assert all(x in PBS for x in pb.explains), pb.explains
    assert all(t.doc for t in pb.thresholds.values())


def test_event_codes_used_by_playbooks_exist_in_the_signature_table():
    codes = {s["code"] for s in tomllib.loads((ROOT / "parsers" / "signatures.toml").read_text())["signature"]}
    codes |= {"python_traceback", "cpp_frames", "cpp_stacktrace", "torchrun_child_failed_report", "nvidia_smi_table", "torchrun_error_file", "python_stack"}
    used = set()
    for path in (ROOT / "playbooks").rglob("*.py"):
        for tup in re.findall(r"^[A-Z_]+CODES = \(([^)]*)\)", path.read_text(), flags=re.M):
            used |= set(re.findall(r'"([a-z0-9_]+)"', tup))
    # A code no signature produces is a detector that can never fire.
    assert sorted(used - codes) == []


def test_positive_and_nearmiss_samples_exist():
    # Found from the playbook: sample_logs/<id>/<case>/; a positive case expects the playbook to fire,
    # a near miss looks like it and expects it quiet.
    fires = {pid: [tomllib.loads((c / "expect.toml").read_text()).get("fires", []) for c in sample_cases(pid)] for pid in PBS}
    positive = [pid for pid in PBS if not any(pid in f for f in fires[pid])]
    nearmiss = [pid for pid in PBS if not PBS[pid].needs_baseline and not any(pid not in f for f in fires[pid])]
    assert not positive, positive
    assert not nearmiss, nearmiss

"""Every case of sample_logs/<playbook-id>/<case>/ against its expect.toml: exactly which playbooks fire, which ranks first."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from forensics.playbooks.base import registry

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.conftest import HEALTHY, SAMPLES, sample_cases

PBS = registry()
# Found from the playbooks: a folder named for no playbook holds no case that runs.
CASES = [case for group in [*PBS, HEALTHY] for case in sample_cases(group)]
KEYS = {"description", "fires", "tolerate", "not_fire", "root", "first_cause", "onset_rank", "onset_step", "evidence",
        "healthy", "baseline"}


def _analysis(folder: Path, expect: dict):
    ctx = Context(ingest(folder))
    if expect.get("baseline"):
        ctx.baseline = Context(ingest(SAMPLES / expect["baseline"]))
    return analyze(ctx)


@pytest.mark.parametrize("folder", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_sample(folder: Path):
    expect = tomllib.loads((folder / "expect.toml").read_text())
    a = _analysis(folder, expect)
    assert not a.errored, a.errored
    problems = [f for f in a.findings if f.severity > Severity.INFO]
    fired = {f.id for f in problems}
    if expect.get("healthy"):
        assert not problems, [(f.id, f.summary) for f in problems]
    # `fires` is exact: every one fires, and nothing else does unless listed under `tolerate`.
    fires, tolerate = set(expect.get("fires", [])), set(expect.get("tolerate", []))
    assert sorted(fires - fired) == [], [(f.id, f.summary) for f in problems]
    assert sorted(fired - fires - tolerate) == [], [(f.id, f.summary) for f in problems if f.id not in fires]
    for pid in expect.get("not_fire", []):
        assert pid not in fired, [(f.id, f.summary) for f in problems if f.id == pid]
    if "root" in expect:
        assert problems and problems[0].id == expect["root"], [(f.id, f.summary) for f in problems]
        top = problems[0]
        if "first_cause" in expect:
            assert top.causes and expect["first_cause"] in top.causes[0].cause.id, [(c.cause.id, c.likelihood) for c in top.causes]
        if "onset_rank" in expect:
            assert top.onset.rank == expect["onset_rank"], top.onset
        if "onset_step" in expect:
            assert top.onset.step == expect["onset_step"], top.onset
    for ref in expect.get("evidence", []):
        quoted = {f"{e.file}:{e.line}" for f in problems for e in f.evidence}
        assert ref in quoted, (ref, sorted(quoted))
    for f in problems:
        assert f.evidence and all(e.file and e.line >= 0 for e in f.evidence), f.id


@pytest.mark.parametrize("folder", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_expectation_is_well_formed(folder: Path):
    expect = tomllib.loads((folder / "expect.toml").read_text())
    assert set(expect) <= KEYS, set(expect) - KEYS
    named = [*expect.get("fires", []), *expect.get("tolerate", []), *expect.get("not_fire", []), *([expect["root"]] if "root" in expect else [])]
    assert set(named) <= set(PBS), set(named) - set(PBS)
    assert not set(expect.get("tolerate", [])) & set(expect.get("fires", [])), "a tolerated playbook is not also expected"
    assert expect.get("root", next(iter(expect.get("fires", [])), None)) in (*expect.get("fires", []), None)
    if folder.parent.name == HEALTHY:
        assert expect.get("healthy") and not expect.get("fires") and not expect.get("tolerate")
    if expect.get("baseline"):
        assert (SAMPLES / expect["baseline"]).is_dir(), expect["baseline"]


def test_every_sample_folder_is_a_case_of_a_playbook():
    # sample_logs/ holds one folder per playbook id (and healthy/), each of case folders with an expect.toml;
    # folders starting with "_" hold baselines and the scripts that recorded the samples.
    groups = {p.name for p in SAMPLES.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert groups - set(PBS) - {HEALTHY} == set()
    cases = {p for g in groups for p in (SAMPLES / g).iterdir() if p.is_dir()}
    assert sorted(str(p.relative_to(SAMPLES)) for p in cases - set(CASES)) == []
    assert sorted(p.name for p in SAMPLES.iterdir() if p.is_file() and p.suffix == ".toml") == []

"""Every run folder of sample_logs/ against its `<folder>.expect.toml`: which playbooks fire, which ranks first."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.conftest import SAMPLES

# Two layouts: `<folder>.expect.toml` beside the folder, and `<playbook>/<case>/expect.toml` inside it.
EXPECTS = sorted(SAMPLES.glob("*.expect.toml")) + sorted(SAMPLES.glob("*/*/expect.toml"))


def _folder(expect_path: Path) -> Path:
    return expect_path.parent if expect_path.name == "expect.toml" else SAMPLES / expect_path.name.removesuffix(".expect.toml")


def _name(expect_path: Path) -> str:
    return str(_folder(expect_path).relative_to(SAMPLES))


def _analysis(folder: Path, expect: dict):
    ctx = Context(ingest(folder))
    if expect.get("baseline"):
        ctx.baseline = Context(ingest(SAMPLES / expect["baseline"]))
    return analyze(ctx)


@pytest.mark.parametrize("expect_path", EXPECTS, ids=[_name(p) for p in EXPECTS])
def test_sample(expect_path: Path):
    expect = tomllib.loads(expect_path.read_text())
    folder = _folder(expect_path)
    assert folder.is_dir(), f"{folder} missing"
    a = _analysis(folder, expect)
    assert not a.errored, a.errored
    problems = [f for f in a.findings if f.severity > Severity.INFO]
    fired = {f.id for f in problems}
    if expect.get("healthy"):
        assert not problems, [(f.id, f.summary) for f in problems]
    for pid in expect.get("fires", []):
        assert pid in fired, (pid, [(f.id, f.summary) for f in problems])
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


def test_every_sample_folder_has_an_expectation():
    folders = {p.name for p in SAMPLES.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    # A playbook folder of the nested layout holds case folders, each with its expect.toml.
    nested = {p.name for p in SAMPLES.iterdir() if p.is_dir() and any(p.glob("*/expect.toml"))}
    folders -= nested
    assert all((c / "expect.toml").is_file() for n in nested for c in (SAMPLES / n).iterdir() if c.is_dir())
    expected = {_name(p) for p in EXPECTS}
    baselines = {tomllib.loads(p.read_text()).get("baseline") for p in EXPECTS}
    assert folders - expected - baselines == set()

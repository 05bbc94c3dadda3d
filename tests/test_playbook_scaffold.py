"""`forensics playbooks new`: the module it writes is a complete declaration, the cases it writes are a positive
and a near miss of that id, and it refuses what exists. Always into a temporary root, never the checkout."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from forensics.playbooks import base
from forensics.playbooks.base import DOC_SECTIONS, Playbook

from forensics.cli import main
from forensics.scaffold import ScaffoldError, new_playbook


def _root(tmp_path: Path) -> Path:
    for name in ("playbooks", "sample_logs"):
        (tmp_path / name).mkdir()
    return tmp_path


def _load(module: Path, monkeypatch) -> Playbook:
    # Executed with a declare() that registers nothing: the real registry must not see the scaffold.
    monkeypatch.setattr(base, "declare", lambda pb: pb)
    namespace: dict = {"__name__": "scaffolded"}
    exec(compile(module.read_text(), str(module), "exec"), namespace)
    return namespace["PLAYBOOK"]


def test_new_writes_a_declaration_and_two_cases(tmp_path, monkeypatch):
    root = _root(tmp_path)
    res = CliRunner().invoke(main, ["playbooks", "new", "grad-accum-mismatch", "--category", "gradient", "--root", str(root)])
    assert res.exit_code == 0, res.output
    module = root / "playbooks" / "gradient" / "grad_accum_mismatch.py"
    positive = tomllib.loads((root / "sample_logs" / "grad-accum-mismatch" / "positive" / "expect.toml").read_text())
    nearmiss = tomllib.loads((root / "sample_logs" / "grad-accum-mismatch" / "nearmiss" / "expect.toml").read_text())
    assert "wrote playbooks/gradient/grad_accum_mismatch.py" in res.output
    pb = _load(module, monkeypatch)
    assert (pb.id, pb.category, pb.codes, dict(pb.thresholds)) == ("grad-accum-mismatch", "gradient", (), {})
    assert pb.doc_sections() == list(DOC_SECTIONS)
    assert len(pb.causes) == 1 and len(pb.detectors) == 1
    assert (positive["fires"], positive["root"]) == (["grad-accum-mismatch"], "grad-accum-mismatch")
    assert nearmiss["fires"] == [] and nearmiss["not_fire"] == ["grad-accum-mismatch"]
    assert "grad-accum-mismatch" not in base.registry()


@pytest.mark.parametrize(("pid", "category", "message"), [
    ("cuda-oom", "memory", "exists"),  # a catalog id
    ("Cuda_OOM", "memory", "not a playbook id"),
    ("new-thing", "weather", "no category"),
])
def test_new_refuses(tmp_path, pid, category, message):
    root = _root(tmp_path)
    res = CliRunner().invoke(main, ["playbooks", "new", pid, "--category", category, "--root", str(root)])
    assert res.exit_code == 2 and message in res.output
    assert list((root / "playbooks").iterdir()) == [] and list((root / "sample_logs").iterdir()) == []


def test_new_refuses_a_case_folder_that_exists_and_writes_nothing(tmp_path):
    root = _root(tmp_path)
    (root / "sample_logs" / "new-thing" / "old-case").mkdir(parents=True)
    with pytest.raises(ScaffoldError, match="exists"):
        new_playbook(root, "new-thing", "data", existing=())
    assert not (root / "playbooks" / "data").exists()


def test_new_needs_a_checkout(tmp_path):
    res = CliRunner().invoke(main, ["playbooks", "new", "new-thing", "--category", "data", "--root", str(tmp_path)])
    assert res.exit_code == 2 and "--root" in res.output

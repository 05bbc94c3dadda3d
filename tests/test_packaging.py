"""Packaging: one import package (`forensics`, with `parsers/` and `playbooks/` mapped under it), a cache
digest that covers every file of it, and `python -m forensics` that works beside a foreign `parsers/`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import forensics.parsers
import forensics.playbooks

from forensics import cache
from tests.conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_source_folder_is_a_listed_package():
    mapping = PYPROJECT["tool"]["setuptools"]["package-dir"]
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = set()
    for name, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add(".".join((name, *init.parent.relative_to(ROOT / folder).parts)))
    assert found == listed


def test_the_repository_folders_import_under_one_name():
    assert Path(forensics.parsers.__file__).resolve().parent == ROOT / "parsers"
    assert Path(forensics.playbooks.__file__).resolve().parent == ROOT / "playbooks"
    mapping = PYPROJECT["tool"]["setuptools"]["package-dir"]
    assert all(name == "forensics" or name.startswith("forensics.") for name in mapping)


def test_python_m_forensics_runs_beside_a_foreign_parsers_package(tmp_path):
    # A user's own project with `parsers/` and `playbooks/` packages must not shadow ours.
    for name in ("parsers", "playbooks"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise ImportError('the foreign package was imported')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "forensics", "analyze", str(ROOT / "sample_logs" / "cuda-oom" / "oom-then-timeouts"), "--no-cache"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "critical[cuda-oom]" in proc.stdout


def test_a_grammar_change_in_a_subfolder_misses_the_cache(tmp_path, monkeypatch):
    grammar = Path(forensics.parsers.__file__).parent / "metric_grammars" / "generic.py"
    run = ROOT / "sample_logs" / "cuda-oom" / "oom-then-timeouts"
    before = cache.fingerprint(run)
    original = grammar.read_bytes()
    try:
        grammar.write_bytes(original + b"\n# changed\n")
        cache._code_digest.cache_clear()
        assert cache.fingerprint(run) != before
    finally:
        grammar.write_bytes(original)
        cache._code_digest.cache_clear()
    assert cache.fingerprint(run) == before

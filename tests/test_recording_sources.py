"""Every recorded issue paste under tests/recordings/issues names its public thread in SOURCES.md."""

from __future__ import annotations

from tests.helpers import ISSUES


def test_sources_list_every_fixture():
    listed = (ISSUES / "SOURCES.md").read_text(encoding="utf-8")
    for path in ISSUES.glob("*.log"):
        assert f"| {path.name} | https://github.com/" in listed, path.name

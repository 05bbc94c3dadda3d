"""Shared test fixtures: paths to the bundled samples and the shared real-file corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_logs"
# Cases of runs where no playbook may fire live under sample_logs/healthy/<case>/.
HEALTHY = "healthy"


def sample_cases(group: str) -> list[Path]:
    """The case folders of one playbook id (or of HEALTHY): sample_logs/<group>/<case>/ with an expect.toml."""
    return sorted(p.parent for p in (SAMPLES / group).glob("*/expect.toml"))
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture
def corpus() -> Path:
    """The shared corpus of real recordings; tests using it skip when it is absent."""
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not present")
    return CORPUS

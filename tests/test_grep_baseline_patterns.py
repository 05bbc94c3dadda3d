"""The ingest benches' baseline: every signature regex converts to an ERE that `grep -E` accepts."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _ingest_bench():
    spec = importlib.util.spec_from_file_location("ingest_bench", ROOT / "bench" / "ingest_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("grep") is None, reason="no grep on this machine")
def test_every_converted_signature_pattern_is_a_valid_ere(tmp_path: Path):
    # A class such as `[^.\n]` in a signature became a real newline in grep's pattern file and broke the
    # baseline of bench/scale_bench.py; grep exits 2 on any invalid pattern, 1 when nothing matches.
    patterns, _ = _ingest_bench().grep_patterns()
    assert all("\n" not in p for p in patterns)
    bad = []
    for p in patterns:
        proc = subprocess.run(["grep", "-E", "-e", p, os.devnull], capture_output=True, text=True,
                              env={**os.environ, "LC_ALL": "C"})
        if proc.returncode == 2:
            bad.append((p, proc.stderr.strip()))
    assert not bad

"""`report` and `scan` on hostile places: an output that cannot be written is one line and exit 2 before any
work, a folder nested past Python's recursion limit is found and analysed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_hostile_input import _remove_chain

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.10 GiB of which 1.06 GiB is free.")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True,
                          errors="replace", timeout=300, env={**os.environ, "FORENSICS_WORKERS": "1"})


@pytest.fixture
def run(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    root.mkdir()
    (root / "rank0.log").write_text(OOM + "\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("args", [
    ["report", "--no-cache", "--format", "markdown", "-o", "{blocked}/p.md"],
    ["report", "--no-cache", "-o", "{blocked}/p.html"],
    ["scan", "-j", "1", "-o", "{blocked}/scan"],
], ids=["report-markdown", "report-html", "scan"])
def test_an_unwritable_output_is_one_line_and_exit_2(run, tmp_path, args):
    blocker = tmp_path / "a-file"  # a path under a file cannot be created, whoever runs the test (root too)
    blocker.write_text("")
    cmd, *rest = args
    proc = _cli(cmd, str(run), *(a.format(blocked=blocker) for a in rest))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("forensics: error: cannot write") and str(blocker) in last


def test_scan_finds_a_run_nested_past_the_recursion_limit(tmp_path):
    root = tmp_path / "root"
    top = root / "job-1"
    top.mkdir(parents=True)
    (top / "rank0.log").write_text(OOM + "\n", encoding="utf-8")
    deep = os.fsencode(root / "deep")
    os.mkdir(deep)
    fd = os.open(deep, os.O_RDONLY)
    try:  # 1,100 levels, made relative to a descriptor: the full path is longer than the OS takes at once
        for _ in range(1100):
            os.mkdir(b"d", dir_fd=fd)
            nxt = os.open(b"d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        with open(os.open(b"rank0.log", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w", encoding="utf-8") as fh:
            fh.write(OOM + "\n")
    finally:
        os.close(fd)
    proc = _cli("scan", str(root), "-j", "1", "-o", str(tmp_path / "out"), "--format", "json")
    _remove_chain(Path(os.fsdecode(deep)) / "d")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RecursionError" not in proc.stderr and "recursion" not in proc.stderr
    import json

    doc = json.loads(proc.stdout)
    assert doc["runs"] == 2 and doc["not_scanned"] == [], doc


def test_a_report_under_an_unwritable_home_says_so_once(run, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "FORENSICS_CACHE_DIR", "MPLCONFIGDIR",
                                                             "XDG_CONFIG_HOME")}
    proc = subprocess.run([sys.executable, "-m", "forensics", "report", str(run), "-o", str(tmp_path / "p.html")],
                          capture_output=True, text=True, timeout=300, env={**env, "HOME": str(blocker / "home")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("forensics: cache not written") and "wrote" in lines[1], lines


def test_scan_reads_only_what_discovery_reads(run, tmp_path):
    # A FIFO (opening it would block), a link to a folder outside and a name that is not UTF-8 (its row shows
    # `\\xff`, which is no path): the run is analysed, none of them is opened by the scan's host reading.
    os.mkfifo(run / "pipe.log")
    (run / "outside").symlink_to(tmp_path)
    with open(os.path.join(os.fsencode(run), b"bad\xff.log"), "wb") as fh:
        fh.write(OOM.encode() + b"\n")
    proc = _cli("scan", str(run), "-j", "1", "-o", str(tmp_path / "out"), "--format", "json", "--timeout-per-run", "120")
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    doc = json.loads(proc.stdout)
    assert doc["not_scanned"] == [] and doc["status"] == {"ok": 1}, doc
    assert doc["root_causes"][0]["playbook"] == "cuda-oom", doc["root_causes"]

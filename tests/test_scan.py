"""`forensics scan` over a small archive of real sample runs copied under new names: verdicts equal `analyze`'s,
failure fingerprints group like failures, hosts and Xids are counted, a crashing / hanging / memory-hungry run
becomes a row, a kill -9 mid-scan resumes to the same tables, archives are read in place."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from forensics.cli import main
from forensics.scan import hosts, summary
from forensics.scan.fingerprint import failure_fingerprint, mask
from tests.conftest import SAMPLES

INCIDENTS = Path(__file__).resolve().parent / "recordings" / "incidents"
ENV_LINE = "SLURM_JOB_NODELIST=gpu-node-017\n"


def build_archive(root: Path) -> Path:
    """ROOT/job-N run folders copied from sample_logs/ and recorded incidents, plus archives."""
    copies = {
        "job-01": SAMPLES / "cuda-oom" / "oom-then-timeouts",
        "job-02": SAMPLES / "cuda-oom" / "oom-then-timeouts",  # fails exactly like job-01
        "job-03": SAMPLES / "nccl-timeout" / "stuck-rank",
        "job-04": SAMPLES / "healthy" / "hf-trainer",
        "job-05": SAMPLES / "gpu-hardware-fault" / "xid",
        "job-06": SAMPLES / "gpu-hardware-fault" / "xid",
        "job-07": SAMPLES / "nccl-timeout" / "nearmiss",  # names gpu-node-17 in its NCCL lines
        "job-08": INCIDENTS / "arjuna_48_srun_task_killed",
    }
    for name, src in copies.items():
        shutil.copytree(src, root / name)
    for name in ("job-05", "job-06"):  # the node both Xid runs ran on, as a SLURM environment dump names it
        (root / name / "slurm-env.log").write_text(ENV_LINE)
    with tarfile.open(root / "job-09.tar.gz", "w:gz") as tar:
        tar.add(SAMPLES / "cuda-oom" / "h100", arcname="cuda-oom-h100")
    (root / "job-10.zip").write_bytes(b"not a zip file")
    (root / "job-11.7z").write_bytes(b"7z\xbc\xaf\x27\x1c")
    return root


def scan(root: Path, out: Path, *args: str, env: dict | None = None) -> dict:
    """The scan through the CLI, in-process; returns its JSON result."""
    res = CliRunner().invoke(main, ["scan", str(root), "-o", str(out), "--jobs", "2", "--format", "json", *args], env=env)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def tables(out: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Both tables, sorted, without the one column that measures this machine (seconds)."""
    runs = pl.read_parquet(out / "runs.parquet").drop("seconds").sort("path")
    findings = pl.read_parquet(out / "findings.parquet").sort("path", "rank")
    return runs, findings


@pytest.fixture(scope="module")
def scanned(tmp_path_factory) -> tuple[Path, Path, dict]:
    base = tmp_path_factory.mktemp("scan")
    root = build_archive(base / "archive")
    out = base / "out"
    return root, out, scan(root, out)


def _row(out: Path, path: str) -> dict:
    runs = pl.read_parquet(out / "runs.parquet")
    return runs.filter(pl.col("path") == path).to_dicts()[0]


def test_every_run_is_a_row_and_findings_equal_analyze(scanned, tmp_path):
    root, out, res = scanned
    runs, findings = tables(out)
    assert runs["path"].to_list() == [f"job-{i:02d}" for i in range(1, 9)] + ["job-09.tar.gz", "job-10.zip", "job-11.7z"]
    assert runs["path"].is_unique().all() and res["runs"] == 11
    for path in ("job-01", "job-03", "job-04", "job-05", "job-08"):
        got = CliRunner().invoke(main, ["analyze", str(root / path), "--format", "json", "--no-cache"])
        report = json.loads(got.stdout)
        mine = findings.filter(pl.col("path") == path).sort("rank")
        assert mine["playbook"].to_list() == [f["playbook"] for f in report["findings"]]
        for row, f in zip(mine.to_dicts(), report["findings"], strict=True):
            assert json.loads(row["causes_json"]) == f["causes"] and json.loads(row["evidence_json"]) == f["evidence"]
            assert (row["summary"], row["severity"], row["confidence"], row["root_cause"]) == (f["summary"], f["severity"], f["confidence"], f["root_cause"])
        failed = any(f["severity"] in ("critical", "high") for f in report["findings"])
        assert _row(out, path)["verdict"] == ("failed" if failed else "clean")
    # The archive, read in place, gives what analyze gives on the folder it was made from.
    report = json.loads(CliRunner().invoke(main, ["analyze", str(SAMPLES / "cuda-oom" / "h100"), "--format", "json", "--no-cache"]).stdout)
    assert findings.filter(pl.col("path") == "job-09.tar.gz")["playbook"].to_list() == [f["playbook"] for f in report["findings"]]


def test_runs_table_columns(scanned):
    _, out, _ = scanned
    oom = _row(out, "job-01")
    assert oom["status"] == "ok" and oom["verdict"] == "failed" and oom["root_playbook"] == "cuda-oom"
    assert oom["first_rank"] == 3 and oom["onset_step"] == 120 and oom["world_size"] == 4 and oom["files"] == 5
    assert oom["top_cause"] and oom["confidence"] > 0.5 and oom["bytes"] > 0 and len(oom["input_fingerprint"]) == 32
    assert _row(out, "job-04")["verdict"] == "clean" and _row(out, "job-04")["failure_fingerprint"] is None


def test_same_failure_shares_a_fingerprint_and_different_ones_do_not(scanned):
    _, out, res = scanned
    fp = {p: _row(out, p)["failure_fingerprint"] for p in ("job-01", "job-02", "job-03", "job-05")}
    assert fp["job-01"] == fp["job-02"] is not None
    assert len({fp["job-01"], fp["job-03"], fp["job-05"]}) == 3
    group = next(g for g in res["groups"] if g["fingerprint"] == fp["job-01"])
    assert group["runs"] >= 2 and group["playbook"] == "cuda-oom"


def test_hosts_and_xids_are_counted(scanned):
    _, out, res = scanned
    assert _row(out, "job-05")["first_host"] == "gpu-node-017" and _row(out, "job-05")["xids"] == [79]
    assert "gpu-node-17" in _row(out, "job-07")["hosts"]
    assert "c002" in _row(out, "job-08")["hosts"]
    host = next(h for h in res["hosts"] if h["host"] == "gpu-node-017")
    assert host["failed_runs"] == 2 and host["xid"] == "Xid 79 in 2 runs"
    md = (out / "summary.md").read_text()
    assert "| gpu-node-017 | 2 | 2 | Xid 79 in 2 runs |" in md


def test_archives_are_read_or_reported(scanned):
    _, out, _ = scanned
    assert _row(out, "job-09.tar.gz")["status"] == "ok" and _row(out, "job-09.tar.gz")["root_playbook"] == "cuda-oom"
    bad = _row(out, "job-10.zip")
    assert bad["status"] == "failed" and "zip" in bad["error"].lower() and bad["verdict"] == "unknown"
    seven = _row(out, "job-11.7z")
    assert seven["status"] == "skipped" and "extract it" in seven["error"]
    md = (out / "summary.md").read_text()
    assert "## Could not be scanned" in md and "job\\-10.zip" not in md and "job-10.zip" in md


def test_summary_escapes_log_strings():
    row = {"path": "job-x", "status": "ok", "verdict": "failed", "root_playbook": "cuda-oom", "top_cause": "c", "hosts": ["<b>h1</b>"],
           "xid_hosts": [], "failure_fingerprint": "f", "failure_signature": "<script>alert(1)</script> | x", "seconds": 1.0,
           "files": 1, "bytes": 1, "error": None}
    rows = [row, {**row, "path": "job-y"}]
    html = summary.render_html("/r", rows)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;b&gt;h1" in html
    md = summary.render_md("/r", rows)
    assert "<script>" not in md and "&lt;script&gt;" in md and "\\| x" in md


def test_crash_hang_and_memory_become_rows_and_the_scan_goes_on(tmp_path):
    root = tmp_path / "root"
    for name, src in {"job-a": "cuda-oom/oom-then-timeouts", "job-crash": "healthy/hf-trainer", "job-hang": "healthy/hf-trainer",
                      "job-mem": "healthy/hf-trainer", "job-z": "nccl-timeout/stuck-rank"}.items():
        shutil.copytree(SAMPLES / src, root / name)
    res = scan(root, tmp_path / "out", "--timeout-per-run", "30", "--memory-per-run", "600",
               env={"FORENSICS_SCAN_FAULT": "crash:job-crash;hang:job-hang;memory:job-mem"})
    assert res["status"] == {"failed": 2, "ok": 2, "timeout": 1}
    out = tmp_path / "out"
    assert "exited with status 70" in _row(out, "job-crash")["error"]
    assert _row(out, "job-hang")["status"] == "timeout" and "--timeout-per-run" in _row(out, "job-hang")["error"]
    assert "600 MiB" in _row(out, "job-mem")["error"] or "MemoryError" in _row(out, "job-mem")["error"]
    assert _row(out, "job-a")["root_playbook"] == "cuda-oom" and _row(out, "job-z")["root_playbook"] == "nccl-timeout"


def _cli(root: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "forensics", "scan", str(root), "-o", str(out), "--jobs", "1", "--format", "json"]


def test_kill_9_mid_scan_then_resume_equals_an_uninterrupted_scan(scanned, tmp_path):
    shared_root, full_out, _ = scanned
    # A copy (modification times kept: the same input fingerprints), since this test changes a run at its end.
    root = shutil.copytree(shared_root, tmp_path / "archive")
    out = tmp_path / "out"
    proc = subprocess.Popen(_cli(root, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    parts = out / "parts"
    deadline = time.monotonic() + 120
    # The .7z is committed (as skipped) before any analysis: wait for two analysed runs after it.
    while time.monotonic() < deadline and len(list(parts.glob("[!.]*.json"))) < 3:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the scan and its workers, as `kill -9` of the job would
    proc.communicate()
    done_before = len(list(parts.glob("[!.]*.json")))
    assert 3 <= done_before < 11 and not (out / "runs.parquet").exists()
    resumed = subprocess.run(_cli(root, out), capture_output=True, text=True, check=True)
    res = json.loads(resumed.stdout)  # stdout holds the result only; progress went to stderr
    assert "scan:" in resumed.stderr
    assert res["unchanged"] == done_before and res["scanned"] == 11 - done_before
    runs, findings = tables(out)
    full_runs, full_findings = tables(full_out)
    assert runs.equals(full_runs) and findings.equals(full_findings) and runs["path"].is_unique().all()

    # A changed run is analysed again; the unchanged ones are not.
    with open(next(p for p in sorted((root / "job-04").iterdir()) if p.is_file() and p.name != "expect.toml"), "a") as fh:
        fh.write("\n")
    again = json.loads(subprocess.run(_cli(root, out), capture_output=True, text=True, check=True).stdout)
    assert again["scanned"] == 1 and again["runs"] == 11


def test_runs_glob_and_since(scanned, tmp_path):
    root, _, _ = scanned
    res = scan(root, tmp_path / "a", "--runs", "job-0[12]")
    assert res["runs"] == 2 and res["groups"][0]["runs"] == 2
    res = scan(root, tmp_path / "b", "--since", "2999-01-01")
    assert res["runs"] == 0 and res["excluded_by_since"] == 11
    bad = CliRunner().invoke(main, ["scan", str(root), "-o", str(tmp_path / "c"), "--since", "yesterday"])
    assert bad.exit_code == 2 and "--since" in bad.output


def test_ray_executor_gives_the_same_tables(scanned, tmp_path):
    pytest.importorskip("ray", reason="ray is an optional extra (pip install 'training-forensics[ray]')")
    root, full_out, _ = scanned
    out = tmp_path / "ray"
    scan(root, out, "--executor", "ray")
    runs, findings = tables(out)
    full_runs, full_findings = tables(full_out)
    assert runs.equals(full_runs) and findings.equals(full_findings)


def test_host_parsing_and_masking():
    assert hosts.expand_nodelist("gpu[01-03,07],cpu9") == ["gpu01", "gpu02", "gpu03", "gpu07", "cpu9"]
    info = hosts.scan_text(b"Nov 22 06:49:54 node-5 kernel: NVRM: Xid (PCI:0000:44:00): 79, pid=1\n"
                           b"srun: error: nid01934: tasks 0-1: Killed\n  host      : localhost\n  rank      : 1 (local_rank: 1)\n")
    assert info.hosts == {"node-5", "nid01934"} and info.rank_host == {0: "nid01934", 1: "nid01934"}
    assert info.xids == [("node-5", 79)]
    a = mask("[rank3]:[E1122 02:21:05.27 ProcessGroupNCCL.cpp:616] [Rank 3] WorkNCCL(SeqNum=126) 0x7f3a /home/u/x.py")
    b = mask("[rank1]:[E0101 11:00:00.99 ProcessGroupNCCL.cpp:616] [Rank 1] WorkNCCL(SeqNum=9) 0x11 /opt/y/z.py")
    assert a == b and "<time>" in a and "<path>" in a
    assert failure_fingerprint("p", "c", "x 1") == failure_fingerprint("p", "c", "x 2") != failure_fingerprint("q", "c", "x 1")

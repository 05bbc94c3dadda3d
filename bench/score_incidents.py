"""Score forensics on a frozen batch of real incidents: top-1, failures called clean, healthy runs alarmed.

Usage: python bench/score_incidents.py BATCH.toml [BATCH.toml ...] [--verbose]

A batch is a TOML of `[[incident]]` tables in the format of tests/recordings/incidents/INCIDENTS.toml:
`name` (a run folder beside the TOML, or with `files` a list of files beside it copied into a temporary
run), `root` (the established root-cause playbook) for a failure, `quiet = true` for a healthy run.
Each run goes through the installed CLI (`forensics analyze --format json --no-cache`), exactly as a user
would run it, so the score does not depend on internal APIs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

MEDIUM_PLUS = {"medium", "high", "critical"}


def run_folder(base: Path, case: dict, tmp: Path) -> Path:
    if "files" not in case:
        return base / case["name"]
    root = tmp / case["name"]
    root.mkdir(parents=True, exist_ok=True)
    for rel in case["files"]:
        shutil.copy(base / rel, root / Path(rel).name)
    return root


def findings(folder: Path) -> list[dict] | str:
    proc = subprocess.run(
        [sys.executable, "-m", "forensics", "analyze", str(folder), "--format", "json", "--no-cache"],
        capture_output=True, text=True, timeout=300,
    )
    if proc.returncode not in (0, 1):
        return f"crash: rc={proc.returncode} {proc.stderr.strip()[-300:]}"
    return json.loads(proc.stdout)["findings"]


def score(paths: list[Path], verbose: bool) -> None:
    fails = hits = clean_fails = healthy = alarmed = crashes = 0
    with tempfile.TemporaryDirectory() as tmpdir:
        for path in paths:
            cases = tomllib.loads(path.read_text(encoding="utf-8"))["incident"]
            for case in cases:
                got = findings(run_folder(path.parent, case, Path(tmpdir)))
                if isinstance(got, str):
                    crashes += 1
                    print(f"CRASH  {case['name']}: {got}")
                    continue
                problems = [f for f in got if f["severity"] != "info"]
                top = problems[0]["playbook"] if problems else None
                if case.get("quiet"):
                    healthy += 1
                    bad = [f["playbook"] for f in problems if f["severity"] in MEDIUM_PLUS]
                    alarmed += bool(bad)
                    mark = "ok   " if not bad else "ALARM"
                    print(f"{mark}  healthy {case['name']}: {bad or 'quiet'}") if verbose or bad else None
                    continue
                if "root" not in case:  # a partial verdict (fires / not_fire only): not scored
                    continue
                fails += 1
                ok = top == case.get("root")
                hits += ok
                clean_fails += top is None
                if verbose or not ok:
                    print(f"{'ok   ' if ok else 'MISS '}  {case['name']}: want {case.get('root')} got {top}")
    print()
    print(f"failures: {fails}  top-1: {hits}/{fails} = {hits / max(fails, 1):.0%}  reported clean: {clean_fails}")
    print(f"healthy: {healthy}  with a medium+ finding: {alarmed}  crashes: {crashes}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    score([Path(a) for a in args], "--verbose" in sys.argv)

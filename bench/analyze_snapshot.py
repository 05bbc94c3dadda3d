"""Save the JSON report of every sample case (and of any run given with its cache) to a folder,
or compare such a folder with the reports the current code gives: a performance change must not change any.

Usage:
  python bench/analyze_snapshot.py save DIR [--run RUN --cache-dir CACHE ...]
  python bench/analyze_snapshot.py check DIR [--run RUN --cache-dir CACHE ...]   (exit 1 when a report differs)

Run it from the checkout whose code is to be used (`git stash` or an older worktree for the "before").
A report is saved as DIR/<playbook-id>/<case>.json, with the run's path written as "<run>", so moving the
samples changes no report. A folder saved by an older layout (flat `sample_logs/<name>/` folders, reports
named `<name>.json`, the path as it was) still compares: a report whose name is not found is matched with
an unclaimed saved report of the same text once the run path is normalised.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from forensics.playbooks.base import registry  # noqa: E402

from forensics import cache  # noqa: E402
from forensics.contracts.context import Context  # noqa: E402
from forensics.engine import analyze  # noqa: E402
from forensics.ingest import ingest  # noqa: E402
from forensics.reports import jsonout  # noqa: E402

SAMPLES = Path("sample_logs")  # relative: the reports name the run by the path given
HEALTHY = "healthy"
RUN_PATH = '"<run>"'


def _normalised(text: str, run_path: str) -> str:
    """The report with its own run path (a JSON string) written as "<run>": the same text wherever the run lies."""
    return text.replace(json.dumps(run_path), RUN_PATH)


def _cases() -> list[Path]:
    """Every sample case, found from the playbook ids: sample_logs/<id>/<case>/expect.toml (and healthy/)."""
    return [p.parent for group in [*registry(), HEALTHY] for p in sorted((SAMPLES / group).glob("*/expect.toml"))]


def reports(runs: list[tuple[Path, Path]]) -> dict[str, str]:
    """Case name (<playbook-id>/<case>) -> normalised JSON text, for every case (with its baseline) and every cached run."""
    out = {}
    for d in _cases():
        ctx = Context(ingest(d))
        if base := tomllib.loads((d / "expect.toml").read_text()).get("baseline"):
            ctx.baseline = Context(ingest(SAMPLES / base))
        out[f"{d.parent.name}/{d.name}"] = _normalised(jsonout.render(analyze(ctx)), str(d))
    for run, cache_dir in runs:
        loaded = cache.load(run, cache_dir)
        if loaded is None:
            sys.exit(f"no matching cache for {run} in {cache_dir}: run `forensics ingest {run} -o {cache_dir}` first")
        out[f"run-{run.parent.name}-{run.name}"] = jsonout.render(analyze(Context(loaded)))
    return out


def _saved(folder: Path) -> dict[str, str]:
    """Name -> normalised text of every saved report (either layout)."""
    out = {}
    for p in sorted(folder.rglob("*.json")):
        text = p.read_text()
        name = p.relative_to(folder).with_suffix("").as_posix()
        if "/" not in name and not name.startswith("run-"):  # an older, flat snapshot: sample_logs/<name>
            text = _normalised(text, f"sample_logs/{name}")
        out[name] = text
    return out


def differing(got: dict[str, str], saved: dict[str, str]) -> list[str]:
    """Names of the current reports with no identical saved report (by name, else an unclaimed one of the same text)."""
    unclaimed: dict[str, list[str]] = {}
    for name, text in saved.items():
        if name not in got:
            unclaimed.setdefault(text, []).append(name)
    differ = []
    for name, text in got.items():
        if name in saved:
            if saved[name] != text:
                differ.append(name)
        elif unclaimed.get(text):
            unclaimed[text].pop()
        else:
            differ.append(name)
    return differ


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["save", "check"])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--run", type=Path, action="append", default=[], help="a run folder (with --cache-dir, same order)")
    ap.add_argument("--cache-dir", type=Path, action="append", default=[])
    args = ap.parse_args()
    args.folder = args.folder.resolve()
    args.run = [p.resolve() for p in args.run]
    args.cache_dir = [p.resolve() for p in args.cache_dir]
    os.chdir(REPO)
    if len(args.run) != len(args.cache_dir):
        ap.error("give one --cache-dir per --run")
    got = reports(list(zip(args.run, args.cache_dir, strict=True)))
    if args.mode == "save":
        for name, text in got.items():
            (args.folder / f"{name}.json").parent.mkdir(parents=True, exist_ok=True)
            (args.folder / f"{name}.json").write_text(text)
        print(f"{len(got)} reports saved in {args.folder}")
        return 0
    differ = differing(got, _saved(args.folder))
    print(f"{len(got) - len(differ)} of {len(got)} reports identical" + (f"; differ: {', '.join(differ)}" if differ else ""))
    return 1 if differ else 0

if __name__ == "__main__":
    sys.exit(main())

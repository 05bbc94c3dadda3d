"""Save the JSON report of every sample_logs/ run folder (and of any run given with its cache) to a folder,
or compare such a folder with the reports the current code gives: a performance change must not change any.

Usage:
  python bench/analyze_snapshot.py save DIR [--run RUN --cache-dir CACHE ...]
  python bench/analyze_snapshot.py check DIR [--run RUN --cache-dir CACHE ...]   (exit 1 when a report differs)

Run it from the checkout whose code is to be used (`git stash` or an older worktree for the "before").
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from forensics import cache  # noqa: E402
from forensics.contracts.context import Context  # noqa: E402
from forensics.engine import analyze  # noqa: E402
from forensics.ingest import ingest  # noqa: E402
from forensics.reports import jsonout  # noqa: E402

SAMPLES = Path("sample_logs")  # relative: the reports name the run by the path given


def reports(runs: list[tuple[Path, Path]]) -> dict[str, str]:
    """Report name -> JSON text, for every sample folder (with its baseline) and every cached run."""
    out = {}
    for d in sorted(SAMPLES.iterdir()):
        if not d.is_dir() or d.name.startswith("_"):
            continue
        ctx = Context(ingest(d))
        expect = SAMPLES / f"{d.name}.expect.toml"
        if expect.is_file() and (base := tomllib.loads(expect.read_text()).get("baseline")):
            ctx.baseline = Context(ingest(SAMPLES / base))
        out[d.name] = jsonout.render(analyze(ctx))
    for run, cache_dir in runs:
        loaded = cache.load(run, cache_dir)
        if loaded is None:
            sys.exit(f"no matching cache for {run} in {cache_dir}: run `forensics ingest {run} -o {cache_dir}` first")
        out[f"run-{run.parent.name}-{run.name}"] = jsonout.render(analyze(Context(loaded)))
    return out


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
        args.folder.mkdir(parents=True, exist_ok=True)
        for name, text in got.items():
            (args.folder / f"{name}.json").write_text(text)
        print(f"{len(got)} reports saved in {args.folder}")
        return 0
    differ = [name for name, text in got.items()
              if not (args.folder / f"{name}.json").is_file() or (args.folder / f"{name}.json").read_text() != text]
    print(f"{len(got) - len(differ)} of {len(got)} reports identical" + (f"; differ: {', '.join(differ)}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

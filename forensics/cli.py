"""The `forensics` command line."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from forensics import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="forensics")
def main() -> None:
    """Post-hoc forensic analysis of deep-learning training runs."""


@main.command()
@click.argument("run", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(path_type=Path), help="folder for the Parquet tables (default: the user cache)")
@click.option("-q", "--quiet", is_flag=True, help="print only the totals")
def ingest(run: Path, out: Path | None, quiet: bool) -> None:
    """Parse every file of RUN into the evidence tables and write them as Parquet."""
    from forensics import cache
    from forensics.ingest import ingest as do_ingest

    def progress(row: dict) -> None:
        if quiet:
            return
        why = f"  ({row['error']})" if row["error"] else ""
        click.echo(f"{row['status']:<12} {row['kind']:<16} {row['rows']:>9} rows  {row['file']}{why}")

    result = do_ingest(run, progress=progress)
    target = out or cache.default_dir(run)
    cache.save(result, target)
    counts = ", ".join(f"{name} {result.table(name).num_rows}" for name in ("events", "metrics", "gpu", "gpu_procs", "spans", "counters"))
    click.echo(f"{result.table('files').num_rows} files; {counts}; tables in {target}")


def run_main() -> None:  # pragma: no cover
    sys.exit(main())

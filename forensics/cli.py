"""The `forensics` command line: ingest, analyze, report, scan, playbooks."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

from forensics import __version__
from forensics.reports.escape import one_line

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="forensics")
def main() -> None:
    """Post-hoc forensic analysis of deep-learning training runs.

    \b
    Exit status: 0 no finding at or above --fail-on, 1 findings, 2 usage or input error.
    """


def _fail(message: str) -> None:
    """One clear line on stderr and exit status 2 (usage or input error), never a traceback."""
    click.echo(f"forensics: error: {one_line(message)}", err=True)
    sys.exit(EXIT_ERROR)


def _load_run(run: Path, cache_dir: Path | None, use_cache: bool, quiet: bool, bar: bool = False):
    """The run's tables: from a matching Parquet cache, else parsed now (and cached; `bar`: a progress bar on a terminal)."""
    from forensics import cache, progress
    from forensics.ingest import ingest as do_ingest

    target = cache_dir or cache.default_dir(run)
    if use_cache:
        cached = cache.load(run, target)
        if cached is not None:
            return cached
    with progress.bar("parsing", enabled=bar) as meter:
        result = do_ingest(run, meter=meter)
    if use_cache:
        try:
            cache.save(result, target)
        except Exception as exc:  # noqa: BLE001 - a cache that cannot be written (read-only home, odd data) must not stop the analysis
            if not quiet:
                click.echo(f"forensics: cache not written, analysed without it ({one_line(exc)})", err=True)
        else:
            # The analysis reads the cache just written, lazily (as a later analyze would): the parsed run's tables
            # would be assembled whole in memory. Inputs changed meanwhile: the parsed run is used as it is.
            return cache.load(run, target) or result
    return result


@main.command()
@click.argument("run", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(path_type=Path), help="folder for the Parquet tables (default: the user cache)")
@click.option("-q", "--quiet", is_flag=True, help="print only the totals")
def ingest(run: Path, out: Path | None, quiet: bool) -> None:
    """Parse every file of RUN into the evidence tables and write them as Parquet.

    \b
    Example: forensics ingest sample_logs/cuda-oom/oom-then-timeouts -o /tmp/tables
    """
    from tqdm import tqdm

    from forensics import cache, progress
    from forensics.ingest import ingest as do_ingest

    def per_file(row: dict) -> None:
        if quiet:
            return
        why = f"  ({one_line(row['error'])})" if row["error"] else ""
        with tqdm.external_write_mode():  # the bar steps aside for the line, then redraws under it
            click.echo(f"{row['status']:<12} {row['kind']:<16} {row['rows']:>9} rows  {one_line(row['file'])}{why}")

    with progress.bar("parsing", enabled=not quiet) as meter:
        result = do_ingest(run, progress=per_file, meter=meter)
    target = out or cache.default_dir(run)
    try:
        cache.save(result, target)
    except OSError as exc:
        _fail(f"cannot write the tables to {target}: {exc.strerror or exc}")
    counts = ", ".join(f"{name} {result.num_rows(name)}" for name in ("events", "metrics", "gpu", "gpu_procs", "spans", "counters"))
    click.echo(f"{result.table('files').num_rows} files; {counts}; tables in {target}")


def _analysis_options(command):
    """The options of `analyze` and `report` that choose and configure the analysis (one declaration for both)."""
    options = [
        click.option("--select", multiple=True, help="run only these playbook ids or categories (repeatable, comma-separated)"),
        click.option("--ignore", multiple=True, help="skip these playbook ids or categories (repeatable, comma-separated)"),
        click.option("--set", "sets", multiple=True, metavar="ID.NAME=VALUE", help="override a threshold, e.g. --set nan-loss.incident_run=5"),
        click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="forensics.toml or pyproject.toml (default: searched from the current folder up)"),
        click.option("--baseline", type=click.Path(exists=True, path_type=Path), help="a second run to compare with (nondeterminism)"),
        click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), help="where parsed tables are cached (default: ~/.cache/forensics)"),
        click.option("--no-cache", is_flag=True, help="always parse the inputs again"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _analysis(run: Path, select: tuple[str, ...], ignore: tuple[str, ...], sets: tuple[str, ...], config: Path | None,
              baseline: Path | None, cache_dir: Path | None, no_cache: bool, quiet: bool, bar: bool):
    """The configuration and the analysis of RUN, as `analyze` and `report` both do it (ConfigError/ValueError on bad input).

    `bar`: progress bars on stderr (when it is a terminal) while parsing and analysing."""
    from forensics import progress
    from forensics.config import ConfigError, find_config, load_config, parse_set
    from forensics.contracts.context import Context
    from forensics.engine import analyze as do_analyze
    from forensics.playbooks.base import registry

    cfg = load_config(config or find_config(Path.cwd()))
    split = lambda items: [x.strip() for item in items for x in item.split(",") if x.strip()]  # noqa: E731
    cfg.select = split(select) or cfg.select
    cfg.ignore = split(ignore) + cfg.ignore
    known = set(registry()) | {pb.category for pb in registry().values()}
    unknown = [x for x in cfg.select + cfg.ignore if x not in known]
    if unknown:
        raise ConfigError(f"unknown playbook id or category: {', '.join(unknown)} (see `forensics playbooks list`)")
    overrides = parse_set(sets)
    ctx = Context(_load_run(run, cache_dir, not no_cache, quiet, bar))
    if baseline is not None:
        ctx.baseline = Context(_load_run(baseline, None, not no_cache, True, bar))
    with progress.bar("analysing", unit="playbook", enabled=bar) as meter:
        return cfg, do_analyze(ctx, cfg, overrides, meter)


@main.command()
@click.argument("run", type=click.Path(exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False, path_type=Path), help="write the report to FILE instead of stdout")
@click.option("--fail-on", type=click.Choice(["critical", "high", "medium", "low", "info"]), help="exit 1 when a finding is at or above this severity")
@_analysis_options
@click.option("--max-evidence", type=int, default=3, show_default=True, help="evidence rows quoted per root finding in text output")
def analyze(run: Path, fmt: str, out: Path | None, fail_on: str | None, select: tuple[str, ...], ignore: tuple[str, ...],
            sets: tuple[str, ...], config: Path | None, baseline: Path | None, cache_dir: Path | None, no_cache: bool,
            max_evidence: int) -> None:
    """Diagnose RUN: root causes first, the chain under them, evidence, verify and fix.

    \b
    Example: forensics analyze sample_logs/cuda-oom/oom-then-timeouts
    """
    from forensics.config import ConfigError
    from forensics.contracts.model import Severity

    try:
        # No bar while a JSON report goes to stdout (a machine reads it; a person is not watching).
        cfg, result = _analysis(run, select, ignore, sets, config, baseline, cache_dir, no_cache, fmt != "text",
                                bar=not (fmt == "json" and out is None))
        fail_level = fail_on or cfg.fail_on
        fail_sev = Severity.parse(fail_level) if fail_level else None
    except (ConfigError, ValueError) as exc:
        click.echo(f"forensics: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    if fmt == "json":
        from forensics.reports import jsonout

        text = jsonout.render(result)
    elif fmt == "markdown":
        from forensics.reports import markdown

        text = markdown.render(result)
    else:
        from forensics.reports import text as textout

        colour = out is None and sys.stdout.isatty() and "NO_COLOR" not in os.environ
        text = textout.render(result, colour=colour, max_evidence=max_evidence)
    if out is not None:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            _fail(f"cannot write the report to {out}: {exc.strerror or exc}")
    else:
        click.echo(text, nl=False)
    if fail_sev is not None and any(f.severity >= fail_sev for f in result.findings):
        sys.exit(EXIT_FINDINGS)
    sys.exit(EXIT_OK)


@main.command()
@click.argument("run", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False, path_type=Path),
              help="the page to write (default: postmortem.html, or postmortem.md with --format markdown)")
@click.option("--format", "fmt", type=click.Choice(["html", "markdown"]), default="html", show_default=True,
              help="one self-contained HTML file, or Markdown plus a <name>_files/ folder of SVG plots")
@_analysis_options
def report(run: Path, out: Path | None, fmt: str, select: tuple[str, ...], ignore: tuple[str, ...], sets: tuple[str, ...],
           config: Path | None, baseline: Path | None, cache_dir: Path | None, no_cache: bool) -> None:
    """Write the incident postmortem of RUN: verdict, impact, causal chain, timeline, plots, evidence, gaps.

    \b
    Example: forensics report sample_logs/cuda-oom/oom-then-timeouts -o postmortem.html
    """
    from forensics.config import ConfigError
    from forensics.reports.postmortem.build import build

    try:
        _, result = _analysis(run, select, ignore, sets, config, baseline, cache_dir, no_cache, False, bar=True)
    except (ConfigError, ValueError) as exc:
        click.echo(f"forensics: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    pm = build(result)
    if fmt == "markdown":
        from forensics.reports.postmortem import markdown as md

        target = out or Path("postmortem.md")
        try:
            written = md.write(pm, target)
        except OSError as exc:
            _fail(f"cannot write the report to {target}: {exc.strerror or exc}")
        click.echo(f"forensics: wrote {target} and {len(written) - 1} plot(s) in {target.stem}_files/", err=True)
    else:
        from forensics.reports.postmortem import html

        target = out or Path("postmortem.html")
        try:
            target.write_text(html.render(pm), encoding="utf-8")
        except OSError as exc:
            _fail(f"cannot write the report to {target}: {exc.strerror or exc}")
        click.echo(f"forensics: wrote {target} ({target.stat().st_size // 1024} KiB)", err=True)
    sys.exit(EXIT_OK)


@main.group()
def playbooks() -> None:
    """The playbook catalog."""


@playbooks.command("list")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def playbooks_list(fmt: str) -> None:
    """Every playbook: id, category, severity, title."""
    import orjson

    from forensics.playbooks.base import registry

    pbs = list(registry().values())
    if fmt == "json":
        rows = [{"id": p.id, "category": p.category, "severity": p.severity.label, "title": p.title,
                 "tables": list(p.tables), "explains": list(p.explains)} for p in pbs]
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return
    for p in sorted(pbs, key=lambda p: (p.category, p.id)):
        click.echo(f"{p.id:<26} {p.category:<12} {p.severity.label:<9} {p.title}")


@playbooks.command("show")
@click.argument("playbook_id")
def playbooks_show(playbook_id: str) -> None:
    """One playbook's documentation, thresholds, causes, verify and fix."""
    from forensics.playbooks.base import registry
    from forensics.playbooks.docs import render_doc

    pbs = registry()
    if playbook_id not in pbs:
        click.echo(f"forensics: error: no playbook {playbook_id!r} (see `forensics playbooks list`)", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(render_doc(pbs[playbook_id]))


@playbooks.command("new")
@click.argument("playbook_id")
@click.option("--category", required=True, help="one of the categories of `forensics playbooks list`")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="checkout to write into (default: the one forensics is installed from with `pip install -e`)")
def playbooks_new(playbook_id: str, category: str, root: Path | None) -> None:
    """Write a new playbook: its module with the declaration and doc sections, and a positive and a near-miss
    case skeleton under sample_logs/ID/. Refuses an id that exists.

    Example: forensics playbooks new gpu-oom-retry --category memory
    """
    import forensics.playbooks
    from forensics.playbooks.base import registry
    from forensics.scaffold import ScaffoldError, new_playbook

    root = root or Path(forensics.playbooks.__file__).resolve().parent.parent
    if not (root / "playbooks").is_dir() or not (root / "sample_logs").is_dir():
        click.echo(f"forensics: error: {click.format_filename(root)} holds no playbooks/ and sample_logs/: "
                   "run from a checkout installed with `pip install -e`, or give --root", err=True)
        sys.exit(EXIT_ERROR)
    try:
        written = new_playbook(root, playbook_id, category, registry())
    except ScaffoldError as exc:
        click.echo(f"forensics: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    for path in written:
        click.echo(f"wrote {click.format_filename(path.relative_to(root))}")
    click.echo("next: fill the TODOs, put the positive run's files beside its expect.toml and the near miss's "
               "beside its own, then `python -m pytest tests/test_samples.py tests/test_playbook_declaration.py` "
               "(CONTRIBUTING.md walks through it)")


@main.command()
@click.argument("root", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", "out", type=click.Path(file_okay=False, path_type=Path), default=Path("forensics-scan"), show_default=True,
              help="output folder: runs.parquet, findings.parquet, summary.md, summary.html (and parts/ for resuming)")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="worker processes (default: one per CPU)")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option("--ray-address", help="an existing Ray cluster (default: start a local one)")
@click.option("--runs", "runs_glob", metavar="GLOB", help="the run folders/archives under ROOT, e.g. '*/job-*' (default: every folder holding files)")
@click.option("--since", metavar="DATE", help="only runs with a file modified at or after DATE (ISO date or date-time, UTC)")
@click.option("--timeout-per-run", "timeout", type=click.FloatRange(min=0, min_open=True), default=600, show_default=True,
              help="seconds before a run's worker is killed and the run reported as timeout")
@click.option("--memory-per-run", "memory_mib", type=click.FloatRange(min=0, min_open=True), default=4096, show_default=True,
              help="MiB of worker memory before the run is stopped and reported as failed")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def scan(root: Path, out: Path, jobs: int | None, executor: str, ray_address: str | None, runs_glob: str | None,
         since: str | None, timeout: float, memory_mib: float, fmt: str) -> None:
    """Analyse every run under ROOT (folders or .tar/.tar.gz/.zip archives) into Parquet tables and a summary.

    \b
    Rerunning the same command resumes: committed runs whose inputs are unchanged are not analysed again.
    Example: forensics scan /archive/jobs -o scan-out --jobs 8
    """
    from forensics.config import ConfigError
    from forensics.scan.discover import parse_since
    from forensics.scan.run import ScanOptions
    from forensics.scan.run import scan as do_scan

    try:  # an output folder that cannot be written is one line and exit 2, before any run is analysed
        out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=out).close()
    except OSError as exc:
        _fail(f"cannot write the scan output to {out}: {exc.strerror or exc}")
    try:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        opts = ScanOptions(root=root, out=out, jobs=jobs or cpus, executor=executor, ray_address=ray_address,
                           runs_glob=runs_glob, since=parse_since(since) if since else None, timeout=timeout, memory_mib=memory_mib)
        res = do_scan(opts, stderr=sys.stderr)
    except (ConfigError, ValueError, RuntimeError) as exc:
        click.echo(f"forensics: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    if fmt == "json":
        import orjson

        click.echo(orjson.dumps(res, option=orjson.OPT_INDENT_2).decode())
    else:
        from forensics.scan.run import render_text

        click.echo(render_text(res), nl=False)

"""Parquet cache of a run's evidence tables, reused while the inputs are unchanged."""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from forensics import __version__, byname, metric_lines
from forensics.contracts import tables as T
from forensics.ingest import Run

MANIFEST = "manifest.json"
# The metrics rows again, grouped by name (forensics/byname.py): series queries read only their metric's rows.
METRICS_BY_NAME = "metrics_by_name.parquet"
# One row per metrics line (forensics/metric_lines.py): questions about lines read several times fewer rows.
METRIC_LINES = "metric_lines.parquet"


@functools.cache
def _code_digest() -> str:
    """Hash of the package version and every file of the installed package: any code change invalidates caches.

    The package's three source folders (the app, `parsers/`, `playbooks/`) are mapped under `forensics`,
    so they are walked by their import paths, subfolders included (a grammar in `parsers/metric_grammars/`).
    """
    import importlib.util

    # Located, not imported: reading the cache must not load the playbooks.
    specs = [importlib.util.find_spec(name) for name in ("forensics", "forensics.parsers", "forensics.playbooks")]
    roots = sorted({Path(p).resolve() for spec in specs if spec for p in spec.submodule_search_locations or []})
    h = hashlib.sha256(__version__.encode())
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".toml", ".json", ".md"):
                h.update(path.relative_to(root.parent).as_posix().encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


def fingerprint(root: Path) -> str:
    """Identity of a run folder's inputs: every path with its size and modification time.

    Entries are taken with lstat, never followed: a link to `/proc/self/environ` or a FIFO must not
    make the identity change in every process (discovery never reads those either). Names are hashed
    as bytes, so a name that is not UTF-8 cannot break it.
    """
    from forensics.discover import input_entries

    root = Path(root)
    h = hashlib.sha256(_code_digest().encode())
    if root.is_file():
        st = root.stat()
        h.update(os.fsencode(root.name) + f"\0{st.st_size}\0{st.st_mtime_ns}".encode())
        return h.hexdigest()
    for rel, st in input_entries(root):
        if st is None:
            h.update(rel + b"\0?\n")
        elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            h.update(rel + f"\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        else:
            h.update(rel + b"\0special\n")
    return h.hexdigest()


def default_dir(root: Path) -> Path:
    """Where `ingest` writes and `analyze` looks when no folder is named: the user cache, never the run folder."""
    base = Path(os.environ.get("FORENSICS_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    if not os.environ.get("FORENSICS_CACHE_DIR"):
        base = base / "forensics"
    key = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    return base / key


def save(run: Run, out: Path) -> None:
    """Write every table as Parquet plus a manifest holding the input fingerprint."""
    out.mkdir(parents=True, exist_ok=True)
    for name in T.SCHEMAS:
        # Part by part: a big run's metrics never need to be in memory at once.
        # The metrics again, as the views their queries read (by name, by line), from the same parts.
        views = [byname.Writer(out / METRICS_BY_NAME), metric_lines.Writer(out / METRIC_LINES)] if name == "metrics" else []
        with pq.ParquetWriter(out / f"{name}.parquet", T.SCHEMAS[name], compression="zstd") as writer:
            for batch in run.batches(name):
                writer.write_table(batch)
                for view in views:
                    view.write(batch)
        for view in views:
            view.close()
    manifest = {
        "forensics_version": __version__,
        "root": str(Path(run.root).resolve()),
        "fingerprint": fingerprint(run.root),
        "meta": run.meta,
    }
    (out / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2, default=str))


@dataclass
class CachedRun(Run):
    """A run read from its Parquet cache lazily: a table is read whole only when asked for whole
    (`table`); queries (`scan`) read only the columns and rows they keep, so analysing a big run
    does not hold its tables in memory."""

    folder: Path = Path()

    def _path(self, name: str) -> Path:
        return self.folder / f"{name}.parquet"

    def table(self, name: str) -> pa.Table:
        if name not in self.tables:
            self.tables[name] = T.conform(name, pq.read_table(self._path(name)))
        return self.tables[name]

    def scan(self, name: str) -> pl.LazyFrame:
        if name in self.tables:
            return super().scan(name)
        return pl.scan_parquet(self._path(name))

    def batches(self, name: str) -> Iterator[pa.Table]:
        if name in self.tables:
            yield self.tables[name]
            return
        for batch in pq.ParquetFile(self._path(name)).iter_batches():
            yield T.conform(name, pa.Table.from_batches([batch]))

    def num_rows(self, name: str) -> int:
        return pq.ParquetFile(self._path(name)).metadata.num_rows

    @functools.cached_property
    def _by_name(self) -> byname.Reader:
        return byname.Reader(self.folder / METRICS_BY_NAME)

    def metrics_named(self, names: list[str]) -> pl.LazyFrame:
        if "metrics" in self.tables:
            return super().metrics_named(names)
        return self._by_name.rows(names)

    def metric_names(self) -> set[str]:
        if "metrics" in self.tables:
            return super().metric_names()
        return self._by_name.names

    def metric_lines(self) -> pl.LazyFrame:
        if "metrics" in self.tables:
            return super().metric_lines()
        return pl.scan_parquet(self.folder / METRIC_LINES)


def load(root: Path, cache_dir: Path) -> Run | None:
    """The cached run when the cache matches the current inputs, else None (its tables are read lazily)."""
    manifest_path = cache_dir / MANIFEST
    if not manifest_path.is_file():
        return None
    try:
        manifest = orjson.loads(manifest_path.read_bytes())
        if manifest.get("fingerprint") != fingerprint(root):
            return None
        run = CachedRun(root=Path(root), meta=manifest.get("meta", {}), folder=cache_dir)
        for name in T.SCHEMAS:
            # The schemas are checked now (a damaged or foreign file is found here); rows are read when asked.
            if pq.read_schema(run._path(name)).remove_metadata() != T.SCHEMAS[name].remove_metadata():
                return None
        run.metric_names()  # the by-name index is read (and checked) now too
        if pq.read_schema(cache_dir / METRIC_LINES).remove_metadata() != metric_lines.SCHEMA:
            return None
        return run
    except (OSError, ValueError, KeyError):
        return None  # a damaged cache is ignored, the run is parsed again

"""Small text logs parsed joined (a folder of thousands of them) give every file the rows a file-by-file parse
gives it: same lines, steps, ranks and order; nothing crosses from one file into the next."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from forensics.parsers import textlog

from forensics.discover import discover
from forensics.ingest import JOIN_MIN_FILES, ingest, parse_one
from forensics.sniff import sniff_source

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.10 GiB of which 1.06 GiB is free.")


def _small_logs(limit: int) -> dict[int, list]:
    """Small clean sample text logs, by year, one per case folder at most (a spread of formats)."""
    by_year: dict[int, list] = {}
    count = 0
    for case in sorted(p for p in SAMPLES.glob("*/*") if p.is_dir()):
        for src in discover(case)[0]:
            data = src.path.read_bytes()
            if src.compression or not 0 < src.size <= 32 * 1024 or b"\x00" in data:
                continue
            verdict = sniff_source(src)
            if verdict.kind != "text_log":
                continue
            by_year.setdefault(textlog._year_of(src, verdict.sniffed.text), []).append((src, data))
            count += 1
            break
        if count >= limit:
            break
    return by_year


def _rows(table: pa.Table | None) -> list[dict]:
    if table is None:
        return []
    rows = table.drop_columns(["file"]).to_pylist()
    # NaN != NaN: compare it as a marker.
    return [{k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in rows]


def test_joined_parse_gives_each_file_its_own_rows():
    by_year = _small_logs(40)
    assert sum(map(len, by_year.values())) >= 20
    for year, items in by_year.items():
        # Sample logs share names (train.log): each gets a folder of its own, named by letters (no rank in it).
        names = ["".join("abcdefghij"[int(c)] for c in str(i)) + "/" + s.rel for i, (s, _) in enumerate(items)]
        tables, counts = textlog.parse_many([(name, d) for name, (_, d) in zip(names, items, strict=True)], year)
        for name_of, (src, _), count in zip(names, items, counts, strict=True):
            _, single = parse_one(src)
            assert count == single.rows(), src.rel
            for name in set(single.tables) | set(tables):
                mine = tables.get(name)
                mine = mine.filter(pc.equal(mine.column("file").cast(pa.string()), name_of)) if mine is not None else None
                assert _rows(mine) == _rows(single.tables.get(name) if single.tables.get(name) is not None and
                                            single.tables[name].num_rows else None), (src.rel, name)


def test_a_step_or_a_traceback_never_crosses_into_the_next_file():
    logs = [("a/rank3.log", b"step 7 loss 2.0\nTraceback (most recent call last):\n  File \"t.py\", line 1, in <module>\n"),
            ("b/rank5.log", OOM.encode() + b"\n")]
    tables, counts = textlog.parse_many(logs, 2025)
    ev = tables["events"].to_pylist()
    oom = next(e for e in ev if e["code"] == "cuda_oom")
    assert (str(oom["file"]), oom["line"], oom["rank"], oom["step"]) == ("b/rank5.log", 1, 5, None)
    assert all(e["end_line"] <= 3 for e in ev if str(e["file"]) == "a/rank3.log")


@pytest.mark.parametrize("n", [JOIN_MIN_FILES + 4])
def test_a_folder_of_many_tiny_logs_ingests_every_file(tmp_path, n):
    for i in range(n):
        (tmp_path / f"worker-{i:05d}.log").write_text(f"step {i} loss 2.5\n", encoding="utf-8")
    (tmp_path / "worker-00007.log").write_text("step 7 loss 2.5\n" + OOM + "\n", encoding="utf-8")
    (tmp_path / "worker-00009.log").write_bytes(b"step 9 \xff loss 2.5\n")  # not clean UTF-8: parsed on its own
    run = ingest(tmp_path)
    files = {r["file"]: r for r in run.table("files").to_pylist()}
    assert len(files) == n and all(r["status"] in ("parsed", "partial") for r in files.values())
    assert files["worker-00009.log"]["status"] == "partial"
    metrics = run.table("metrics")
    assert metrics.num_rows == n
    assert metrics.column("file").to_pylist() == sorted(files)  # file order, as a file-by-file parse gives
    oom = [e for e in run.table("events").to_pylist() if e["code"] == "cuda_oom"]
    assert [(e["file"], e["line"], e["step"]) for e in oom] == [("worker-00007.log", 2, 7)]

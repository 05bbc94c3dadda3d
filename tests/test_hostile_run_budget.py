"""The run-wide decompressed budget: many compressed files each within their own budget cannot add up past the
folder's; the file that crosses it is cut and marked, the later ones get a row saying they were not read, and a
serial and a parallel ingest cut the same files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.10 GiB of which 1.06 GiB is free.")
MB = 1024 * 1024


def _bombs(root: Path, count: int, size: int) -> Path:
    """`count` gzip logs of `size` bytes each: an OOM line, then filler lines."""
    root.mkdir()
    filler = b"[2024-05-01 10:00:00,123] INFO: loading data shard 17 of 4096\n"
    body = OOM.encode() + b"\n" + filler * ((size - len(OOM) - 1) // len(filler))
    packed = gzip.compress(body, 6)
    for i in range(count):
        (root / f"rank{i}.log.gz").write_bytes(packed)
    return root


def _rows(run) -> dict[str, dict]:
    return {r["file"]: r for r in run.table("files").to_pylist()}


@pytest.mark.parametrize("workers", ["1", "2"])
def test_files_past_the_run_budget_are_cut_then_left_unread_in_file_order(tmp_path, monkeypatch, workers):
    root = _bombs(tmp_path / "run", 5, 2 * MB)
    monkeypatch.setenv("FORENSICS_MAX_RUN_DECOMPRESSED_GB", str(5 / 1024))  # 5 MiB: two files whole, half of the third
    monkeypatch.setenv("FORENSICS_WORKERS", workers)
    run = ingest(root)
    rows = _rows(run)
    assert [rows[f"rank{i}.log.gz"]["status"] for i in range(5)] == ["parsed", "parsed", "partial", "partial", "partial"]
    assert "run folder's decompressed budget" in rows["rank2.log.gz"]["error"] and "after 1 MiB" in rows["rank2.log.gz"]["error"]
    assert rows["rank2.log.gz"]["rows"] > 0  # the part before the cut is kept
    for i in (3, 4):
        assert rows[f"rank{i}.log.gz"]["rows"] == 0 and rows[f"rank{i}.log.gz"]["error"].startswith("not read: the run folder's budget")
    # The OOMs of the three files read are found; the unread ones are not invented.
    oom = next(f for f in analyze(Context(run)).findings if f.playbook.id == "cuda-oom")
    assert {e.file for e in oom.evidence} <= {"rank0.log.gz", "rank1.log.gz", "rank2.log.gz"}


def test_a_run_within_the_budget_is_not_measured_or_marked(tmp_path, monkeypatch):
    from forensics import run_budget

    root = _bombs(tmp_path / "run", 3, MB)
    monkeypatch.setattr(run_budget, "_decompressed", lambda *a: pytest.fail("measured a run within its budget"))
    rows = _rows(ingest(root))
    assert all(r["status"] == "parsed" and r["error"] is None for r in rows.values())


def test_plain_files_do_not_count_against_the_run_budget(tmp_path, monkeypatch):
    root = _bombs(tmp_path / "run", 2, 2 * MB)
    (root / "big.log").write_bytes(b"[2024-05-01 10:00:00,123] INFO: loading data shard 17 of 4096\n" * (8 * MB // 64))
    monkeypatch.setenv("FORENSICS_MAX_RUN_DECOMPRESSED_GB", str(5 / 1024))
    rows = _rows(ingest(root))
    assert {name: r["status"] for name, r in rows.items()} == {"big.log": "parsed", "rank0.log.gz": "parsed",
                                                                "rank1.log.gz": "parsed"}

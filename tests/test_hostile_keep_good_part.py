"""Hostile inputs whose good part must still reach the diagnosis: wide encodings, NUL holes, damaged gzip,
files reached twice through links; archives are named as archives; special files leave the cache key alone."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.10 GiB of which 1.06 GiB is free.")
LOG = "step 1 loss 2.0\nstep 2 loss 1.9\n" + OOM + "\n"


def _files(run) -> dict[str, dict]:
    return {r["file"]: r for r in run.table("files").to_pylist()}


def _oom_lines(run) -> list[tuple[str, int]]:
    found = [f for f in analyze(Context(run)).findings if f.playbook.id == "cuda-oom"]
    return [(e.file, e.line) for f in found for e in f.evidence]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-32-be"])
def test_a_wide_unicode_log_is_read_by_its_bom(tmp_path, encoding):
    bom = {"utf-16-be": b"\xfe\xff", "utf-32-be": b"\x00\x00\xfe\xff"}.get(encoding, b"")
    (tmp_path / "rank0.log").write_bytes(bom + LOG.encode(encoding))
    run = ingest(tmp_path)
    assert _files(run)["rank0.log"]["kind"] == "text_log"
    assert _oom_lines(run) == [("rank0.log", 3)]


def test_a_nul_block_inside_a_log_is_skipped_not_called_binary(tmp_path):
    (tmp_path / "rank0.log").write_bytes(b"step 1 loss 2.0\n" + b"\x00" * 16384 + b"\n" + OOM.encode() + b"\n")
    run = ingest(tmp_path)
    row = _files(run)["rank0.log"]
    assert row["kind"] == "text_log" and row["status"] == "partial" and "NUL" in row["error"]
    assert _oom_lines(run) == [("rank0.log", 3)]


def test_binary_content_with_nuls_stays_binary(tmp_path):
    data = bytes(range(256)) * 64 + b"\x00" * 4096
    (tmp_path / "weights.log").write_bytes(data)
    assert _files(ingest(tmp_path))["weights.log"]["kind"] == "binary"


def _damaged(kind: str) -> bytes:
    good = gzip.compress(("step 1 loss 2.0\n" * 10 + OOM + "\n").encode())
    if kind == "garbage":
        return good + b"not a gzip member" * 50
    bad = bytearray(good)
    bad[-8] ^= 0xFF  # the CRC32 of the trailer
    return bytes(bad)


@pytest.mark.parametrize("kind", ["garbage", "bad-crc"])
def test_a_damaged_gzip_keeps_everything_before_the_damage(tmp_path, kind):
    (tmp_path / "rank0.log.gz").write_bytes(_damaged(kind))
    run = ingest(tmp_path)
    row = _files(run)["rank0.log.gz"]
    assert row["status"] == "partial" and "corrupt gzip" in row["error"]
    assert _oom_lines(run) == [("rank0.log.gz", 11)]


def test_a_file_reached_twice_through_links_is_read_once(tmp_path):
    (tmp_path / "r.log").write_text(OOM + "\n", encoding="utf-8")
    os.link(tmp_path / "r.log", tmp_path / "h.log")
    os.symlink("r.log", tmp_path / "a.log")  # sorts before the file it points at
    run = ingest(tmp_path)
    rows = _files(run)
    assert [r["status"] for r in rows.values()].count("parsed") == 1
    assert "symlink to a file already read" in rows["a.log"]["error"]
    assert len(_oom_lines(run)) == 1


def test_archives_in_a_folder_are_named_as_archives(tmp_path):
    member = OOM.encode() + b"\n"
    info = tarfile.TarInfo("rank0.log")
    info.size = len(member)
    for name, mode in (("logs.tar", "w"), ("logs.tar.gz", "w:gz")):
        with tarfile.open(tmp_path / name, mode) as tar:
            tar.addfile(info, io.BytesIO(member))
    with zipfile.ZipFile(tmp_path / "logs.zip", "w") as z:
        z.writestr("rank0.log", member)
    rows = _files(ingest(tmp_path))
    for name in ("logs.tar", "logs.tar.gz", "logs.zip"):
        assert rows[name]["kind"] == "archive" and "archive" in rows[name]["error"], rows[name]


def test_a_link_to_a_special_file_leaves_the_cache_fingerprint_stable(tmp_path):
    (tmp_path / "rank0.log").write_text(OOM + "\n", encoding="utf-8")
    os.symlink("/proc/self/environ", tmp_path / "env")
    code = "import sys; from forensics.cache import fingerprint; print(fingerprint(sys.argv[1]))"
    prints = {subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                             env={**os.environ, "NOISE": str(i) * (i + 1)}).stdout for i in range(2)}
    assert len(prints) == 1 and len(next(iter(prints)).strip()) == 64
    doc = json.loads(subprocess.run([sys.executable, "-m", "forensics", "analyze", str(tmp_path), "--no-cache",
                                     "--format", "json"], capture_output=True, text=True).stdout)
    assert not any("NOISE" in json.dumps(f) for f in doc["files"])

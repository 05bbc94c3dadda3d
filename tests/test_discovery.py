"""Discovery and bad input: every file gets a row and a status; nothing crashes."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os

import zstandard

from forensics.ingest import ingest
from tests.helpers import frame, write_run

HF_LINE = "{'loss': 2.5, 'grad_norm': nan, 'learning_rate': 5e-05, 'epoch': 0.1}\n"


def _files(run):
    return {r["file"]: r for r in frame(run, "files").to_dicts()}


def test_compressed_logs_are_opened_transparently(tmp_path):
    data = HF_LINE.encode()
    root = write_run(tmp_path, {
        "a.log.gz": gzip.compress(data),
        "b.log.bz2": bz2.compress(data),
        "c.log.xz": lzma.compress(data),
        "d.log.zst": zstandard.ZstdCompressor().compress(data),
    })
    run = ingest(root)
    files = _files(run)
    assert {f: r["compression"] for f, r in files.items()} == {
        "a.log.gz": "gzip", "b.log.bz2": "bz2", "c.log.xz": "xz", "d.log.zst": "zstd"}
    assert all(r["status"] == "parsed" and r["kind"] == "text_log" for r in files.values())
    m = frame(run, "metrics").filter(name="loss")
    assert sorted(m["file"].to_list()) == sorted(files)
    assert m["value"].to_list() == [2.5] * 4


def test_truncated_gzip_keeps_what_was_decoded(tmp_path):
    blob = gzip.compress((HF_LINE * 20000).encode())
    root = write_run(tmp_path, {"rank0.log.gz": blob[: len(blob) // 2]})
    run = ingest(root)
    row = _files(run)["rank0.log.gz"]
    assert row["status"] == "partial"
    assert "truncated" in row["error"]
    assert frame(run, "metrics").filter(name="loss").height > 1000


def test_bad_files_get_rows_and_reasons(tmp_path):
    root = write_run(tmp_path, {
        "empty.log": b"",
        "binary.log": bytes(range(256)) * 40,
        "nul.log": b"\x00\x00" + HF_LINE.encode() + b"\x00",
        "bad_utf8.log": b"\xff\xfe garbage\n" + HF_LINE.encode(),
        "long.log": b"x" * (5 * 1024 * 1024) + b"\n" + HF_LINE.encode(),
        "snapshot.pickle": b"\x80\x04\x95" + b"\x00" * 64,
        "ok.log": HF_LINE.encode(),
    })
    os.symlink("/etc/hostname", root / "outside.log")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.mkfifo(root / "fifo.log")
    run = ingest(root)
    files = _files(run)
    assert files["empty.log"]["status"] == "unrecognized" and files["empty.log"]["error"] == "empty file"
    assert files["binary.log"]["status"] == "unrecognized" and "binary" in files["binary.log"]["error"]
    assert files["snapshot.pickle"]["status"] == "unrecognized" and "never loaded" in files["snapshot.pickle"]["error"]
    assert files["outside.log"]["status"] == "unrecognized" and "outside" in files["outside.log"]["error"]
    assert files["loop_a"]["status"] == "failed" and "loop" in files["loop_a"]["error"]
    assert files["fifo.log"]["status"] == "unrecognized" and "not a regular file" in files["fifo.log"]["error"]
    assert files["nul.log"]["status"] == "partial" and "NUL" in files["nul.log"]["error"]
    assert files["bad_utf8.log"]["status"] == "partial" and "UTF-8" in files["bad_utf8.log"]["error"]
    assert files["long.log"]["status"] == "parsed" and "longer than" in files["long.log"]["error"]
    losses = frame(run, "metrics").filter(name="loss")
    # The healthy line is read in every text file that has it, bad bytes or not.
    assert sorted(losses["file"].to_list()) == ["bad_utf8.log", "long.log", "nul.log", "ok.log"]
    assert losses.filter(file="long.log")["line"].to_list() == [2]


def test_unreadable_file_is_reported_not_fatal(tmp_path, monkeypatch):
    root = write_run(tmp_path, {"secret.log": HF_LINE, "ok.log": HF_LINE})
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p).endswith("secret.log") else real_access(p, m))
    files = _files(ingest(root))
    assert files["secret.log"]["status"] == "failed" and files["secret.log"]["error"] == "permission denied"
    assert files["ok.log"]["status"] == "parsed"


def test_input_is_never_modified(tmp_path):
    root = write_run(tmp_path, {"rank1.log": HF_LINE, "x/rank2.log.gz": gzip.compress(HF_LINE.encode())})
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in root.rglob("*") if p.is_file()}
    ingest(root)
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in root.rglob("*") if p.is_file()}
    assert before == after


def test_rank_from_file_name(tmp_path):
    root = write_run(tmp_path, {"logs/node1-rank12.out": HF_LINE, "t/attempt_0/3/stderr.log": HF_LINE})
    run = ingest(root)
    ranks = dict(frame(run, "metrics").filter(name="loss").select("file", "rank").iter_rows())
    assert ranks == {"logs/node1-rank12.out": 12, "t/attempt_0/3/stderr.log": 3}

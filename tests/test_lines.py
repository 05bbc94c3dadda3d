"""Chunk boundaries of the line reader: a file read in many small chunks gives what one chunk gives.

The content is made of literal formats.md lines: HF Trainer dicts behind tqdm `\\r` redraws
(§1.1, §1.16), torchtitan lines with their ANSI colours (§1.8), a `[rankN]: ` traceback
ending in the CUDA OOM message (§2, §2.1), CRLF line ends, and lines of several segments.
"""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest
from forensics.parsers import lines as L
from polars.testing import assert_frame_equal

from forensics.sources import make_source
from tests.helpers import frame, ingest_text, write_run

TITAN = (
    "[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - \x1b[31mstep: 200  \x1b[32mloss:  6.1384  "
    "\x1b[38;2;54;234;195mmemory: 49.66GiB(52.28%)  \x1b[34mtps: 5,856  \x1b[36mtflops: 339.16  \x1b[35mmfu: 34.29%\x1b[39m"
)
TITAN_CLEAN = (
    "[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - step: 200  loss:  6.1384  "
    "memory: 49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%"
)
BAR1 = "  8%|███▌      | 1999/24128 [1:52:09<20:27:23,  3.33s/it]"
BAR2 = "  8%|███▌      | 2000/24128 [1:52:12<20:27:20,  3.33s/it]"
HF = "{'loss': 0.2051, 'grad_norm': nan, 'learning_rate': 9.774074342405685e-06, 'epoch': 0.53}"
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 1 has a total capacity of 4.00 GiB "
       "of which 2.35 GiB is free. Of the allocated memory 825.15 MiB is allocated by PyTorch, and 24.85 MiB is reserved "
       "by PyTorch but unallocated.")
TRACEBACK = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/ws/train.py", line 270, in <module>',
    "[rank1]:     main()",
    '[rank1]:   File "/ws/train.py", line 201, in main',
    "[rank1]:     loss.backward()",
    f"[rank1]: {OOM}",
]


def _content(repeat: int = 40) -> tuple[str, int]:
    """A log of mixed lines with the traceback in the middle; returns it and the traceback's first line number."""
    out: list[str] = []
    for i in range(repeat):
        out.append(f"\r{BAR1}\r{BAR2}\r{' ' * 20}\r{HF}")  # one physical line, four segments
        out.append(TITAN)
        out.append(f"iter {i}: loss 3.2345, time 123.45ms, mfu 38.12%\r")  # a CRLF line end
        out.append("")
        if i == repeat // 2:
            tb_line = len(out) + 1
            out.extend(TRACEBACK)
    return "\n".join(out) + "\n", tb_line


def _read(path, chunk: int) -> pl.DataFrame:
    src = make_source(path, path.name)
    return pl.concat(list(L.iter_frames(src, chunk_bytes=chunk)))


@pytest.mark.parametrize("chunk", [16, 97, 1000])
def test_many_small_chunks_read_like_one_chunk(tmp_path, chunk):
    text, tb_line = _content()
    path = tmp_path / "train.log"
    path.write_text(text, encoding="utf-8")
    whole = _read(path, 1 << 24)
    assert_frame_equal(_read(path, chunk), whole)

    # Line numbers, CR segments and ANSI stripping, as a single read gives them.
    first = whole.filter(pl.col("line") == 1).to_dicts()
    # tqdm's clearing segment (spaces) is kept as an empty text; an empty segment would be dropped.
    assert [(r["seg"], r["text"]) for r in first] == [(0, ""), (1, BAR1), (2, BAR2), (3, ""), (4, HF)]
    assert whole.filter(pl.col("line") == 2).get_column("text").to_list() == [TITAN_CLEAN]
    crlf = whole.filter(pl.col("line") == 3).to_dicts()
    assert [(r["seg"], r["text"]) for r in crlf] == [(0, "iter 0: loss 3.2345, time 123.45ms, mfu 38.12%")]
    tb = whole.filter(pl.col("line").is_between(tb_line, tb_line + len(TRACEBACK) - 1)).get_column("text").to_list()
    assert tb == TRACEBACK


def test_gzip_and_missing_final_newline_read_like_one_chunk(tmp_path):
    text, _ = _content(10)
    path = tmp_path / "rank1.log.gz"
    path.write_bytes(gzip.compress(text.rstrip("\n").encode()))
    whole = _read(path, 1 << 24)
    assert_frame_equal(_read(path, 33), whole)
    body = text.rstrip("\n")
    assert whole.get_column("line").max() == body.count("\n") + 1
    # The unterminated last line (a CRLF line cut before its `\n`) is read, without its `\r`.
    assert whole.tail(1).to_dicts() == [{"line": body.count("\n") + 1, "seg": 0, "text": "iter 9: loss 3.2345, time 123.45ms, mfu 38.12%"}]


def test_traceback_across_a_chunk_boundary_stays_in_one_frame(tmp_path):
    text, tb_line = _content()
    path = tmp_path / "train.log"
    path.write_text(text, encoding="utf-8")
    src = make_source(path, path.name)
    # Cut the file a few bytes into the traceback's second line.
    cut = len("\n".join(text.split("\n")[:tb_line]).encode()) + 5
    frames = list(L.iter_frames(src, chunk_bytes=cut))
    holding = [f for f in frames if f.filter(pl.col("line") == tb_line).height]
    assert len(holding) == 1
    lines = set(holding[0].get_column("line").to_list())
    assert set(range(tb_line, tb_line + len(TRACEBACK))) <= lines


def _ingest_both(tmp_path, monkeypatch, text: str):
    big = ingest_text(tmp_path / "a", text)
    monkeypatch.setattr(L, "CHUNK_BYTES", 211)
    small = ingest_text(tmp_path / "b", text)
    for table in ("events", "metrics"):
        assert_frame_equal(frame(small, table), frame(big, table))
    return big


def test_ingest_with_tiny_chunks_gives_the_same_tables(tmp_path, monkeypatch):
    # Lines of one segment each before the traceback (see the next test for `\r` lines).
    lines = [f"iter {i}: loss 3.2345, time 123.45ms, mfu 38.12%" for i in range(60)] + [TITAN] * 20
    tb_line = len(lines) + 1
    text = "\n".join(lines + TRACEBACK + [f"\r{BAR1}\r{HF}"] * 10) + "\n"
    big = _ingest_both(tmp_path, monkeypatch, text)
    events = frame(big, "events").filter(pl.col("code") == "python_traceback").to_dicts()
    assert [(e["line"], e["end_line"], e["rank"]) for e in events] == [(tb_line, tb_line + len(TRACEBACK) - 1, 1)]
    assert events[0]["message"] == "torch.OutOfMemoryError: " + OOM.split(": ", 1)[1]
    oom = frame(big, "events").filter(pl.col("code") == "cuda_oom").to_dicts()
    assert [(e["line"], e["rank"]) for e in oom] == [(tb_line + len(TRACEBACK) - 1, 1)]
    assert json.loads(oom[0]["fields"])["requested"].startswith("20.00 MiB")
    hf = frame(big, "metrics").filter((pl.col("line") == tb_line + len(TRACEBACK)) & (pl.col("name") == "loss"))
    assert hf.get_column("value").to_list() == [0.2051]


def test_ingest_with_tiny_chunks_gives_the_same_tables_after_tqdm_lines(tmp_path, monkeypatch):
    text, tb_line = _content()
    big = _ingest_both(tmp_path, monkeypatch, text)
    events = frame(big, "events").filter(pl.col("code") == "python_traceback").to_dicts()
    assert [(e["line"], e["end_line"], e["rank"]) for e in events] == [(tb_line, tb_line + len(TRACEBACK) - 1, 1)]


def _bar(n: int, total: int = 100) -> str:
    return f" {n:3d}%|█         | {n}/{total} [00:{n:02d}<01:00,  1.00it/s]"


def test_hf_dict_steps_do_not_depend_on_chunk_boundaries(tmp_path, monkeypatch):
    # tqdm redraws then tqdm.write of the log dict on one physical line; the next line goes on with the bar (§1.1, §1.16).
    lines = []
    for k in range(1, 20):
        segs = "".join("\r" + _bar(5 * k + j) for j in range(1, 5))
        lines.append(f"{segs}\r{' ' * 60}\r{{'loss': {2.0 - k / 100}, 'grad_norm': 0.5, 'learning_rate': 0.0003, 'epoch': 0.{k:02d}}}")
    text = "\n".join(lines) + "\n"
    big = frame(ingest_text(tmp_path / "a", text), "metrics")
    assert big.filter(pl.col("name") == "loss").head(2).select("line", "step", "value").rows() == [(1, 11, 1.99), (2, 16, 1.98)]
    # Chunk sizes that end chunks on a dict's line, just after it and in the middle of a bar run.
    for size in (301, 420, 555, 777, 1024):
        monkeypatch.setattr(L, "CHUNK_BYTES", size)
        assert_frame_equal(frame(ingest_text(tmp_path / f"b{size}", text), "metrics"), big)


def test_many_files_same_tables_in_one_run(tmp_path):
    text, _ = _content(5)
    root = write_run(tmp_path, {"rank0.log": text, "rank1.log.gz": gzip.compress(text.encode())})
    from forensics.ingest import ingest

    run = ingest(root)
    m = frame(run, "metrics")
    assert sorted(m.get_column("file").unique().to_list()) == ["rank0.log", "rank1.log.gz"]
    a = m.filter(pl.col("file") == "rank0.log").drop("file", "rank")
    b = m.filter(pl.col("file") == "rank1.log.gz").drop("file", "rank")
    assert_frame_equal(a, b)

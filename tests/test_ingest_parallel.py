"""Parallel ingest (worker processes) and spilled tables give exactly the serial, in-memory result."""

from __future__ import annotations

import gzip

import polars as pl

from forensics import ingest as I
from forensics.contracts import tables as T
from tests.helpers import frame, write_run

TITAN = ("[rank{r}]:[titan] 2025-06-16 22:30:50,322 - root - INFO - \x1b[31mstep: {s}  \x1b[32mloss:  {l:.4f}  "
         "\x1b[38;2;54;234;195mmemory: 49.66GiB(52.28%)  \x1b[34mtps: 5,856  \x1b[36mtflops: 339.16  \x1b[35mmfu: 34.29%\x1b[39m")
WATCHDOG = ("[rank{r}]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 "
            "milliseconds before timing out.")


def _folder(tmp_path):
    files: dict[str, str | bytes] = {}
    for r in range(4):
        text = "\n".join(TITAN.format(r=r, s=s, l=8.0 - s / 100) for s in range(1, 200)) + "\n" + WATCHDOG.format(r=r) + "\n"
        if r == 1:
            files["logs/rank1.log.gz"] = gzip.compress(text.encode())
        else:
            files[f"logs/rank{r}.log"] = text
    files["logs/rank9.log"] = ""  # empty
    files["logs/weights.bin"] = bytes(range(256)) * 64  # binary, unrecognized
    files["train.log"] = "{'loss': 2.3456, 'grad_norm': 1.2345678, 'learning_rate': 4.999e-05, 'epoch': 0.01}\n"
    return write_run(tmp_path, files)


def _ingest(root, monkeypatch, workers: str, spill: int | None = None):
    monkeypatch.setenv("FORENSICS_WORKERS", workers)
    if spill is not None:
        monkeypatch.setattr(I, "SPILL_BYTES", spill)
    seen: list[str] = []
    run = I.ingest(root, progress=lambda row: seen.append(row["file"]))
    return run, seen


def test_workers_and_spilling_give_the_serial_tables(tmp_path, monkeypatch):
    root = _folder(tmp_path)
    serial, order = _ingest(root, monkeypatch, "1")
    for workers, spill in (("2", None), ("1", 0), ("3", 0)):
        run, seen = _ingest(root, monkeypatch, workers, spill)
        assert seen == order
        assert run.meta == serial.meta
        for name in T.SCHEMAS:
            assert run.table(name).equals(serial.table(name)), (workers, spill, name)
    # What the tables hold (so that equality is not between two empty results).
    m = frame(serial, "metrics").filter((pl.col("name") == "loss") & (pl.col("file") == "logs/rank1.log.gz"))
    assert m.sort("line").head(2).select("line", "rank", "step", "value").rows() == [(1, 1, 1, 7.99), (2, 1, 2, 7.98)]
    ev = frame(serial, "events").filter(pl.col("code") == "nccl_watchdog_timeout").sort("file")
    assert ev.select("file", "line", "rank").rows() == [(f"logs/rank{r}.log" + (".gz" if r == 1 else ""), 200, r) for r in range(4)]
    files = {r["file"]: r["status"] for r in frame(serial, "files").to_dicts()}
    assert files["logs/weights.bin"] == "unrecognized" and files["logs/rank0.log"] == "parsed"


"""Steps carried to events from another file of the same rank, by timestamp (forensics/steps.py)."""

from __future__ import annotations

import datetime as dt

import polars as pl

from forensics.ingest import ingest
from tests.helpers import frame, ingest_files, write_run


def _megatron(it: int, sec: int) -> str:
    # formats.md §1.2 [SRC] training line, stamped by Megatron itself.
    return (f" [2025-06-26 06:14:{sec:02d}.123456] iteration {it:8d}/  500000 | consumed samples: {it * 512:12d} | "
            f"elapsed time per iteration (ms): 1234.5 | learning rate: 1.500000E-04 | global batch size:   512 | "
            f"lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | "
            f"number of nan iterations:   0 |\n")


def _watchdog(rank: int, sec: int) -> str:
    # formats.md §2 [OBS] watchdog line of PyTorch 2.4+, glog-stamped (the year comes from the run).
    return (f"[rank{rank}]:[E626 06:{sec // 60 + 14:02d}:{sec % 60:02d}.903881913 ProcessGroupNCCL.cpp:616] [Rank {rank}] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, "
            "NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n")


# glog stamps carry no year: the parser takes it from the file's mtime, so date the files as the run.
RUN_DAY = dt.datetime(2025, 6, 26, 7, 0, tzinfo=dt.timezone.utc).timestamp()


def _events(run) -> pl.DataFrame:
    return frame(run, "events").filter(pl.col("code") == "nccl_watchdog_timeout").sort("rank")


def test_stderr_event_takes_the_step_its_rank_had_reached_in_stdout(tmp_path):
    files = {}
    for rank in (0, 1):
        files[f"logs/rank{rank}.out"] = "".join(_megatron(it, s) for it, s in ((100 + rank, 10), (110, 20), (120 + rank, 30)))
        files[f"logs/rank{rank}.err"] = "some warning\n" + _watchdog(rank, 25 + 10 * rank)
    run = ingest_files(tmp_path, files, mtime=RUN_DAY)
    # Megatron's own stamp follows a space (` [2025-06-26 06:14:10.123456] iteration ...`) and is read.
    loss = frame(run, "metrics").filter((pl.col("name") == "loss") & (pl.col("rank") == 0)).sort("step")
    assert loss.get_column("ts").dt.strftime("%H:%M:%S%.6f").to_list() == ["06:14:10.123456", "06:14:20.123456", "06:14:30.123456"]
    ev = _events(run)
    assert ev.get_column("rank").to_list() == [0, 1]
    # rank 0 timed out at :25 (after iteration 110 at :20); rank 1 at :35 (after its iteration 121 at :30).
    assert ev.get_column("step").to_list() == [110, 121]
    assert ev.get_column("file").to_list() == ["logs/rank0.err", "logs/rank1.err"]


def test_no_step_from_another_rank_nor_from_the_future(tmp_path):
    files = {
        # Only rank 1 logs steps, and only after rank 0's event.
        "logs/rank1.out": _megatron(500, 50),
        "logs/rank0.err": _watchdog(0, 40),
        # rank 1's event comes before its first step line.
        "logs/rank1.err": _watchdog(1, 5),
    }
    ev = _events(ingest_files(tmp_path, files, mtime=RUN_DAY))
    assert ev.get_column("rank").to_list() == [0, 1]
    assert ev.get_column("step").to_list() == [None, None]


def test_a_step_found_in_the_events_own_file_is_kept(tmp_path):
    files = {
        "logs/rank0.out": _megatron(300, 20),
        # The same file's preceding iteration line (200 at :10) wins over the other file's later step.
        "logs/rank0.err": _megatron(200, 10) + _watchdog(0, 25),
    }
    ev = _events(ingest_files(tmp_path, files, mtime=RUN_DAY))
    assert ev.get_column("step").to_list() == [200]


def test_year_less_stamps_take_the_year_of_the_logs_dated_stamps(tmp_path):
    # The file is written now (its mtime says this year); its own stamps say 2025.
    files = {"logs/rank0.log": _megatron(100, 10) + _watchdog(0, 25)}
    run = ingest(write_run(tmp_path, files))
    ev = _events(run)
    assert ev.get_column("ts").dt.strftime("%Y-%m-%d %H:%M:%S").to_list() == ["2025-06-26 06:14:25"]
    assert ev.get_column("step").to_list() == [100]


def test_year_less_stamps_alone_take_the_files_mtime_year(tmp_path):
    run = ingest_files(tmp_path, {"logs/rank0.log": _watchdog(0, 25)}, mtime=RUN_DAY)
    assert _events(run).get_column("ts").dt.year().to_list() == [2025]

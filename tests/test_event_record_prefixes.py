"""Record prefixes of other loggers before an event (TensorFlow's C++ logging, vLLM / Ray workers, bracketed runs): the stamp, rank and message they leave."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
from forensics.parsers.prefixes import split_prefixes

from tests.helpers import ISSUES, event_rows, ingest_issue
from tests.test_prefixes_launchers import split

UTC = dt.timezone.utc


def test_tensorflow_30912_prefix_gives_stamp_and_message(tmp_path):
    ev = ingest_issue(tmp_path, "tensorflow_30912_cublas_then_oom.log")
    assert event_rows(ev, "cublas_error", "status") == [(2, None, "CUBLAS_STATUS_NOT_INITIALIZED"), (3, None, "CUBLAS_STATUS_NOT_INITIALIZED")]
    got = ev.filter(ev["code"] == "cublas_error").select("line", "ts", "message").rows()
    assert got == [
        (2, dt.datetime(2019, 7, 21, 23, 23, 6, 224853, tzinfo=UTC), "failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED"),
        (3, dt.datetime(2019, 7, 21, 23, 23, 6, 226553, tzinfo=UTC), "failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED"),
    ]


def test_tensorflow_9489_events_get_their_stamps(tmp_path):
    ev = ingest_issue(tmp_path, "tensorflow_9489_cublas_handle.log")
    assert ev.select("line", "ts").rows()[0] == (1, dt.datetime(2019, 2, 11, 16, 42, 8, 131786, tzinfo=UTC))


def test_tensorflow_14231_windows_path_prefix():
    lines = (ISSUES / "tensorflow_14231_windows_path_oom.log").read_text(encoding="utf-8").splitlines()
    assert split(*lines) == [
        (None, dt.datetime(2017, 11, 3, 11, 34, 30, 628747, tzinfo=UTC), "failed to allocate 1.97G (2120187392 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY"),
        (None, dt.datetime(2017, 11, 3, 11, 34, 30, 665536, tzinfo=UTC), "failed to allocate 1.78G (1908168704 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY"),
    ]


def test_tensorflow_prefix_near_misses_are_kept():
    # A stamp and a colon without the level letter and `file:line] `, a stamp without microseconds, and TF 0.12's
    # bare `I file:line] ` (no stamp: tensorflow/tensorflow#6048) are not this prefix.
    lines = (
        "2019-07-21 23:23:06.136829: loss 0.5",
        "2019-07-21 23:23:06: E tensorflow/core/x.cc:1] failed",
        "I tensorflow/stream_executor/dso_loader.cc:128] successfully opened CUDA library libcublas.so locally",
    )
    assert split(*lines) == [(None, None, line) for line in lines]


def test_vllm_prefixes(tmp_path):
    ev = ingest_issue(tmp_path, "gpustack_835_vllm_nccl.log")
    assert event_rows(ev, "nccl_error", "reason") == [(1, None, "unhandled system error"), (2, None, "unhandled system error")]
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"]) == (3, 9)
    ev = ingest_issue(tmp_path / "b", "gpustack_2680_vllm_rank_prefix.log")
    # The quoted `raise RuntimeError(f"NCCL error: {error_str}")` source line is not an event.
    assert event_rows(ev, "nccl_error", "reason") == [(4, 3, "unhandled system error")]
    # Rank 3's traceback lost its head in the paste (it starts at a frame's source line); rank 2's is whole.
    tbs = ev.filter(pl.col("code") == "python_traceback").sort("line")
    assert tbs.select("line", "end_line", "rank").rows()[0] == (1, 4, 3)
    assert json.loads(tbs.get_column("fields")[0])["head_truncated"] == "true"
    assert tbs.select("line", "rank").rows()[1] == (6, 2)


def test_prefix_bracket_run_stops_at_a_python_list_only():
    df = split_prefixes(pl.DataFrame({"text": [
        "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['python', '-u', 'a.py'] exits with return code = 1",
        '[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ["python", "a.py"] exits with return code = 1',
        "[2023-04-14 13:11:27,885] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0",
        "[2023-04-14 13:11:27,885] [INFO] [config.py:1:print] [] empty bracket run",
    ]}), 2023)
    assert df.get_column("msg").to_list() == [
        "['python', '-u', 'a.py'] exits with return code = 1",
        '["python", "a.py"] exits with return code = 1',
        "step=10, skipped=0",
        "empty bracket run",
    ]
    assert df.get_column("rank").to_list() == [None, None, 0, None]

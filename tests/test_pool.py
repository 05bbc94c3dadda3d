"""The worker pool (forensics.pool): answers per task, a dead or overdue worker costs only its own task, and a
worker starts once with its initializer and environment."""

from __future__ import annotations

import os
import time

from forensics.pool import Pool

_INIT_MARK = "FORENSICS_TEST_POOL_INIT"


def _init() -> None:
    os.environ[_INIT_MARK] = str(os.getpid())


def _job(arg: int) -> tuple[int, int, str | None, str | None]:
    if arg == 2:
        os._exit(3)  # a worker killed mid-task (the OOM killer, a segfault)
    if arg == 3:
        raise ValueError("bad input")
    if arg == 4:
        time.sleep(120)
    return arg * 10, os.getpid(), os.environ.get(_INIT_MARK), os.environ.get("POLARS_MAX_THREADS")


def test_dead_raising_and_overdue_tasks_cost_only_themselves():
    got = {key: (status, value) for key, status, value in Pool(2, _init, {"POLARS_MAX_THREADS": "1"}).run(_job, [(k, k) for k in range(8)], timeout=20)}
    assert set(got) == set(range(8))
    assert got[2][0] == "failed" and "exited with status 3" in got[2][1]
    assert got[3] == ("error", "ValueError: bad input")
    assert got[4][0] == "timeout" and "20 s" in got[4][1]
    ok = {k: v for k, (s, v) in got.items() if s == "ok"}
    assert sorted(ok) == [0, 1, 5, 6, 7]
    assert all(v[0] == k * 10 for k, v in ok.items())
    # The initializer ran in the worker that served the task (once per process), under the asked environment.
    assert all(v[2] == str(v[1]) and v[3] == "1" for v in ok.values())
    # Two workers, each replaced once (the crash, the timeout): five answers from at most four processes.
    assert 2 <= len({v[1] for v in ok.values()}) <= 4


def test_memory_bound_kills_the_worker_and_the_next_task_runs():
    def tasks():
        yield "hog", 1
        yield "after", 5

    got = {key: (status, value) for key, status, value in Pool(1).run(_hog, tasks(), memory_mib=300)}
    assert got["hog"][0] == "failed" and "300 MiB" in got["hog"][1]
    assert got["after"] == ("ok", 5)


def _hog(arg: int) -> int:
    if arg == 1:
        hog = []
        while True:
            hog.append(bytearray(b"x" * (64 * 1024 * 1024)))
    return arg

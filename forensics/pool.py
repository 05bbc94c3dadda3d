"""The one pool of worker processes (ingest's file parsers, the scan's runs): standard-library process pools.

Each worker is a one-process `concurrent.futures.ProcessPoolExecutor` (a "slot"), and the pool hands a
slot its next task when it is free. One executor per worker, not one executor of N workers: killing a
worker (a run past its deadline or memory bound) or losing one (segfault, OOM killer) breaks the whole
executor and every task in flight on it, and it cannot say which task killed it; per slot, the broken
task is known exactly, its slot is replaced and the other tasks run on.

Workers start with the `spawn` method: a fresh interpreter that imports what it needs once (the
`initializer`: parsers, playbooks) and then serves tasks. Not `fork` (a forked child inherits polars'
and Arrow's thread pools mid-state), and not `forkserver` either: its speed-up needs the heavy modules
imported in the server before it forks, and importing polars or pyarrow already starts their threads
(`/proc/self/task` goes from 1 to 6), the state fork must not copy. As with any `multiprocessing`
program, a script that calls ingest at its top level needs an `if __name__ == "__main__":` guard.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

# How often the parent checks deadlines and workers' memory while waiting for answers.
TICK = 0.2

Outcome = tuple[Any, str, Any]  # (key, "ok" | "error" | "failed" | "timeout", result or reason)


def cpu_count() -> int:
    """CPUs this process may run on (the affinity mask of a container or `taskset`, not the host's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def in_worker() -> bool:
    """True inside a pool worker: a worker never starts a pool of its own."""
    return mp.parent_process() is not None


def rss_mib(pid: int) -> float:
    """Resident memory of a process in MiB (0 when unknown: not Linux, or it just exited)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def exit_reason(code: int | None) -> str:
    """Why a worker is gone, in words: the signal that killed it, or its exit status."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the kernel's OOM killer?)" if -code == signal.SIGKILL else ""
        return f"worker process killed by {name}{hint}"
    return f"worker process exited with status {code} without an answer"


def _start(env: dict[str, str], initializer: Callable[[], None] | None) -> None:
    """Worker side, once: the environment the parent asked for, then the caller's one-time imports."""
    os.environ.update(env)
    if initializer is not None:
        initializer()


def _call(func: Callable[[Any], Any], arg: Any) -> tuple[str, Any]:
    """Worker side, per task: ("ok", result), or ("error", text) when the task raised."""
    try:
        return "ok", func(arg)
    except Exception as exc:  # noqa: BLE001 - the caller decides what a failed task means
        return "error", f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    """`env` in os.environ while a worker starts: spawn copies the environment then, and polars reads
    POLARS_MAX_THREADS when it is imported, which may be before any initializer runs (the caller's
    `__main__` is imported first)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _Slot:
    """One worker process (a one-process executor) and the task it runs."""

    def __init__(self, env: dict[str, str], initializer: Callable[[], None] | None) -> None:
        self.executor = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=_start, initargs=(env, initializer))
        with _environ(env):
            first = self.executor.submit(os.getpid)  # starts the process now, under `env`
        self.pid_future: Future = first
        # The worker's Process object, kept: once the pool is broken the executor drops it from its table, and its
        # exit status is only known by joining it.
        self.process = next(iter((getattr(self.executor, "_processes", None) or {}).values()), None)
        self.key: Any = None
        self.future: Future | None = None
        self.deadline = float("inf")

    @property
    def pid(self) -> int | None:
        return self.pid_future.result() if self.pid_future.done() and not self.pid_future.exception() else None

    def exitcode(self) -> int | None:
        # No public API gives a pool worker's exit status: the Process kept at start (or the executor's table) does.
        proc = self.process or next(iter((getattr(self.executor, "_processes", None) or {}).values()), None)
        if proc is None:
            return None
        # A loaded machine may reap the dead worker late: wait for its status a little, not forever.
        for _ in range(20):
            proc.join(timeout=0.5)
            if proc.exitcode is not None:
                break
        return proc.exitcode

    def stop(self, kill: bool = False) -> None:
        pid = self.pid
        if kill and pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.executor.shutdown(wait=True, cancel_futures=True)


class Pool:
    """`workers` worker processes that run `func(arg)` for (key, arg) tasks; see the module docstring."""

    def __init__(self, workers: int, initializer: Callable[[], None] | None = None, env: dict[str, str] | None = None) -> None:
        self.workers = max(1, workers)
        self.initializer = initializer
        self.env = dict(env or {})

    def run(self, func: Callable[[Any], Any], tasks: Iterable[tuple[Any, Any]], timeout: float | None = None,
            memory_mib: float | None = None) -> Iterator[Outcome]:
        """Yield (key, status, value) for every task as it finishes, in `workers` processes.

        "ok": value is func's result; "error": func raised (value says what); "failed": the worker died
        or grew past `memory_mib` and was killed; "timeout": it ran past `timeout` seconds and was killed.
        A killed or dead worker is replaced, and the other tasks go on.
        """
        todo = list(tasks)
        todo.reverse()
        slots: list[_Slot] = []
        try:
            for _ in range(min(self.workers, len(todo))):
                slots.append(_Slot(self.env, self.initializer))
            for s in slots:
                self._give(s, func, todo, timeout)
            while any(s.future is not None for s in slots):
                busy = [s.future for s in slots if s.future is not None]
                wait(busy, timeout=TICK, return_when=FIRST_COMPLETED)
                now = time.monotonic()
                for i, s in enumerate(slots):
                    outcome = self._check(s, now, timeout, memory_mib)
                    if outcome is None:
                        continue
                    if outcome[1] in ("failed", "timeout"):
                        # The worker may be mid-task or dead: a fresh one takes the next task.
                        s.stop(kill=True)
                        s = slots[i] = _Slot(self.env, self.initializer)
                    s.future = None
                    yield outcome
                    self._give(s, func, todo, timeout)
        finally:
            for s in slots:
                s.stop(kill=True)

    @staticmethod
    def _give(slot: _Slot, func: Callable[[Any], Any], todo: list, timeout: float | None) -> None:
        if not todo:
            return
        slot.key, arg = todo.pop()
        try:
            slot.future = slot.executor.submit(_call, func, arg)
        except BrokenProcessPool as exc:  # the worker died before it was given this task
            slot.future = Future()
            slot.future.set_exception(exc)
        slot.deadline = time.monotonic() + timeout if timeout else float("inf")

    @staticmethod
    def _check(s: _Slot, now: float, timeout: float | None, memory_mib: float | None) -> Outcome | None:
        """The outcome of a slot's task when it has one (finished, died, overdue, too big), else None."""
        if s.future is None:
            return None
        if s.future.done():
            try:
                status, value = s.future.result()
            except BrokenProcessPool:
                return s.key, "failed", exit_reason(s.exitcode())
            except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be pickled back
                return s.key, "error", f"{type(exc).__name__}: {exc}"
            return s.key, status, value
        if now > s.deadline:
            return s.key, "timeout", f"no result after {timeout:g} s (--timeout-per-run): worker killed"
        pid = s.pid
        if memory_mib and pid is not None and rss_mib(pid) > memory_mib:
            return s.key, "failed", f"worker memory above {memory_mib:g} MiB (--memory-per-run): killed"
        return None

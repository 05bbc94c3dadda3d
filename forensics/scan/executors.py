"""Run the per-run task over many runs: a local pool of worker processes (timeouts, memory bound, crash isolation) or Ray."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait

# How often the parent checks deadlines and workers' memory while waiting for answers.
_TICK = 0.2


def _serve(conn: Connection) -> None:
    """Worker main loop: task in, ("ok", result) or ("error", text) out, until the parent closes the pipe."""
    # Imported here, not at module level: polars must see POLARS_MAX_THREADS before its first import.
    from forensics.scan.worker import init_worker, run_task

    init_worker()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        answer = run_task(task)
        try:
            conn.send(answer)
        except (OSError, ValueError) as exc:
            conn.send(("error", f"result could not be sent back: {exc}"))


def _rss_mib(pid: int) -> float:
    """Resident memory of a process in MiB (0 when unknown: not Linux, or it just exited)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _exit_reason(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the kernel's OOM killer?)" if -code == signal.SIGKILL else ""
        return f"worker process killed by {name}{hint}"
    return f"worker process exited with status {code} without an answer"


class _Slot:
    """One worker process and the task it is running."""

    def __init__(self, ctx) -> None:
        parent, child = ctx.Pipe(duplex=True)
        # Environment for the child is set before start: spawn copies os.environ at that moment.
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.conn: Connection = parent
        self.task: tuple[object, dict] | None = None
        self.deadline = 0.0
        self.started = 0.0

    def stop(self, kill: bool = False) -> None:
        if kill and self.proc.is_alive():
            self.proc.kill()
        with contextlib.suppress(OSError):
            self.conn.close()
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)


Result = tuple[object, str, object]  # (key, "ok" | "failed" | "timeout", result dict or reason)


def run_local(tasks: list[tuple[object, dict]], jobs: int, timeout: float | None, memory_mib: float | None,
              on_start: Callable[[], None] | None = None) -> Iterator[Result]:
    """Run every task in `jobs` worker processes; yields each answer as it arrives.

    A worker that dies, runs past `timeout` seconds or grows past `memory_mib` is killed and replaced;
    its run comes back as ("failed" | "timeout", reason) and the scan goes on.
    """
    ctx = mp.get_context("spawn")
    todo = list(reversed(tasks))
    slots: list[_Slot] = []
    saved = {k: os.environ.get(k) for k in ("POLARS_MAX_THREADS",)}
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    try:
        for _ in range(min(jobs, len(tasks))):
            slots.append(_Slot(ctx))
        if on_start:
            on_start()

        def give(slot: _Slot) -> None:
            if todo:
                slot.task = todo.pop()
                slot.started = time.monotonic()
                slot.deadline = slot.started + timeout if timeout else float("inf")
                slot.conn.send(slot.task[1])
            else:
                slot.task = None

        for s in slots:
            give(s)
        while any(s.task is not None for s in slots):
            busy = [s for s in slots if s.task is not None]
            ready = wait([s.conn for s in busy] + [s.proc.sentinel for s in busy], timeout=_TICK)
            now = time.monotonic()
            for i, s in enumerate(slots):
                if s.task is None:
                    continue
                key = s.task[0]
                outcome: Result | None = None
                if s.conn in ready:
                    try:
                        status, value = s.conn.recv()
                        outcome = (key, "ok", value) if status == "ok" else (key, "failed", value)
                    except (EOFError, OSError):
                        s.proc.join(timeout=1)
                        outcome = (key, "failed", _exit_reason(s.proc.exitcode))
                elif s.proc.sentinel in ready or not s.proc.is_alive():
                    s.proc.join(timeout=1)
                    outcome = (key, "failed", _exit_reason(s.proc.exitcode))
                elif now > s.deadline:
                    outcome = (key, "timeout", f"no result after {timeout:g} s (--timeout-per-run): worker killed")
                elif memory_mib and _rss_mib(s.proc.pid) > memory_mib:
                    outcome = (key, "failed", f"worker memory above {memory_mib:g} MiB (--memory-per-run): killed")
                if outcome is None:
                    continue
                if outcome[1] != "ok":
                    # The worker may be mid-task or dead: replace it so that the next run starts clean.
                    s.stop(kill=True)
                    s = slots[i] = _Slot(ctx)
                yield outcome
                give(s)
    finally:
        for s in slots:
            s.stop(kill=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _ray_task(task: dict, memory_mib: float | None) -> tuple[str, object]:
    """Ray side of one run: the same task, with a memory watchdog thread (Ray workers are long-lived)."""
    import threading

    from forensics.scan.worker import init_worker, run_task

    init_worker()  # cheap after the first call in a worker: the playbook registry is loaded once
    done = threading.Event()
    if memory_mib:
        def watch() -> None:
            while not done.wait(_TICK):
                if _rss_mib(os.getpid()) > memory_mib:
                    os._exit(137)  # Ray reports the dead worker; the run becomes a failed row
        threading.Thread(target=watch, daemon=True).start()
    try:
        return run_task(task)
    finally:
        done.set()


def run_ray(tasks: list[tuple[object, dict]], jobs: int, timeout: float | None, memory_mib: float | None,
            address: str | None = None, on_start: Callable[[], None] | None = None) -> Iterator[Result]:
    """The same per-run task on a Ray cluster (`address`, default: a local one with `jobs` CPUs)."""
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("--executor ray needs Ray: pip install 'training-forensics[ray]'") from exc
    started_here = not ray.is_initialized()
    if started_here:
        env = {"env_vars": {"POLARS_MAX_THREADS": "1", "FORENSICS_WORKERS": "1"}}
        if address:
            ray.init(address=address, runtime_env=env, logging_level="ERROR", log_to_driver=False)
        else:
            ray.init(num_cpus=jobs, runtime_env=env, logging_level="ERROR", log_to_driver=False, include_dashboard=False)
    remote = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
    if on_start:
        on_start()
    todo = list(reversed(tasks))
    # At most `jobs` in flight: then submission time is start time, and a per-run deadline is meaningful.
    width = max(1, jobs)
    inflight: dict = {}
    try:
        while todo or inflight:
            while todo and len(inflight) < width:
                key, task = todo.pop()
                inflight[remote.remote(task, memory_mib)] = (key, time.monotonic())
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=_TICK)
            now = time.monotonic()
            for ref in ready:
                key, _ = inflight.pop(ref)
                try:
                    status, value = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - WorkerCrashedError, OutOfMemoryError, TaskCancelledError
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    yield key, "failed", f"Ray task failed: {type(exc).__name__}: {first}"
                    continue
                yield (key, "ok", value) if status == "ok" else (key, "failed", value)
            for ref, (key, t0) in list(inflight.items()):
                if timeout and now - t0 > timeout:
                    ray.cancel(ref, force=True)
                    inflight.pop(ref)
                    yield key, "timeout", f"no result after {timeout:g} s (--timeout-per-run): task cancelled"
    finally:
        for ref in inflight:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()

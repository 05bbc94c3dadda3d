"""Run the per-run task over many runs: a local pool of worker processes (timeouts, memory bound, crash isolation) or Ray."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

from forensics.pool import TICK, Pool, rss_mib
from forensics.scan.worker import init_worker, run_task

Result = tuple[object, str, object]  # (key, "ok" | "failed" | "timeout", result dict or reason)


def run_local(tasks: list[tuple[object, dict]], jobs: int, timeout: float | None, memory_mib: float | None,
              on_start: Callable[[], None] | None = None) -> Iterator[Result]:
    """Run every task in `jobs` worker processes (forensics.pool); yields each answer as it arrives.

    A worker that dies, runs past `timeout` seconds or grows past `memory_mib` is killed and replaced;
    its run comes back as ("failed" | "timeout", reason) and the scan goes on.
    """
    # One polars thread per worker: the workers already use every core.
    pool = Pool(jobs, init_worker, {"POLARS_MAX_THREADS": os.environ.get("POLARS_MAX_THREADS", "1")})
    if on_start:
        on_start()
    for key, status, value in pool.run(run_task, tasks, timeout, memory_mib):
        if status == "ok":
            inner, value = value
            status = "ok" if inner == "ok" else "failed"
        elif status == "error":
            status = "failed"
        yield key, status, value


def _ray_task(task: dict, memory_mib: float | None) -> tuple[str, object]:
    """Ray side of one run: the same task, with a memory watchdog thread (Ray workers are long-lived)."""
    import threading

    init_worker()  # cheap after the first call in a worker: the playbook registry is loaded once
    done = threading.Event()
    if memory_mib:
        def watch() -> None:
            while not done.wait(TICK):
                if rss_mib(os.getpid()) > memory_mib:
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
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=TICK)
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

"""Worker processes that parse files in parallel, talking to the parent over pipes.

Plain subprocesses rather than multiprocessing: a forked child would inherit polars' thread
pool mid-state, and a spawned one re-imports the caller's `__main__` (a script without a
`if __name__ == "__main__"` guard would run again in every worker). Each worker reads pickled
tasks from stdin and writes pickled answers to its own copy of stdout; anything a parser prints
goes to stderr, so it can never corrupt the stream.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

_HEADER = struct.Struct("<Q")
# The folder holding the `forensics` package, put first on the workers' path so that a folder
# named like one of our packages in the caller's working directory cannot shadow it.
_ROOT = str(Path(__file__).resolve().parent.parent)
_BOOT = f"import sys; sys.path.insert(0, {_ROOT!r}); from forensics.workers import serve; serve()"


def _send(fh: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_HEADER.pack(len(data)))
    fh.write(data)
    fh.flush()


def _recv(fh: BinaryIO) -> Any:
    head = fh.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("worker closed its pipe")
    (n,) = _HEADER.unpack(head)
    data = fh.read(n)
    if len(data) < n:
        raise EOFError("worker closed its pipe")
    return pickle.loads(data)  # noqa: S301 - our own child process, over a private pipe


def serve() -> None:
    """Worker main loop: (function path, argument) in, ("ok", result) or ("error", text) out."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints of parsers go to stderr, not into the answer stream
    inp = sys.stdin.buffer
    import importlib

    while True:
        try:
            func_path, arg = _recv(inp)
        except EOFError:
            return
        module, name = func_path.rsplit(":", 1)
        try:
            result = ("ok", getattr(importlib.import_module(module), name)(arg))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which falls back
            result = ("error", f"{type(exc).__name__}: {exc}")
        _send(out, result)


def run_tasks(func_path: str, tasks: list[tuple[int, Any]], workers: int, env: dict[str, str] | None = None) -> Iterator[tuple[int, Any]]:
    """Run `func(arg)` for every (key, arg) in `workers` processes, in the given order of dispatch.

    Yields (key, result) as answers arrive. A task whose worker died or raised is not yielded:
    the caller finds it missing and handles it itself.
    """
    todo: queue.Queue = queue.Queue()
    for item in tasks:
        todo.put(item)
    answers: queue.Queue = queue.Queue()
    child_env = dict(os.environ, **(env or {}))

    def work() -> None:
        try:
            proc = subprocess.Popen([sys.executable, "-c", _BOOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env)
        except OSError:
            answers.put(None)
            return
        try:
            while True:
                try:
                    key, arg = todo.get_nowait()
                except queue.Empty:
                    break
                try:
                    _send(proc.stdin, (func_path, arg))
                    status, value = _recv(proc.stdout)
                except (EOFError, OSError, pickle.UnpicklingError):
                    break  # the worker died (killed, out of memory): its remaining tasks fall to the caller
                if status == "ok":
                    answers.put((key, value))
        finally:
            for fh in (proc.stdin, proc.stdout):
                with contextlib.suppress(OSError):
                    fh.close()
            proc.wait()
            answers.put(None)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    running = len(threads)
    while running:
        item = answers.get()
        if item is None:
            running -= 1
            continue
        yield item
    for t in threads:
        t.join()

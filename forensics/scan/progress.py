"""Scan progress on stderr: a bar on a terminal, plain periodic lines otherwise; never anything on stdout."""

from __future__ import annotations

import time
from typing import TextIO

_PLAIN_EVERY = 5.0  # seconds between plain lines when stderr is not a terminal


class Progress:
    """Runs done / total, rate, ETA and failures so far."""

    def __init__(self, stream: TextIO | None, total: int, reused: int = 0) -> None:
        self.stream = stream
        self.total = total
        self.done = 0
        self.failures = 0
        self.reused = reused
        self.t0 = time.monotonic()
        self.last = 0.0
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())

    def _line(self) -> str:
        spent = time.monotonic() - self.t0
        rate = self.done / spent if spent > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        reused = f", {self.reused} unchanged" if self.reused else ""
        return (f"scan: {self.done}/{self.total} runs{reused}, {rate * 60:.0f} runs/min, "
                f"ETA {int(eta) // 60}:{int(eta) % 60:02d}, {self.failures} not scanned")

    def step(self, ok: bool) -> None:
        """One run finished."""
        self.done += 1
        self.failures += not ok
        if self.stream is None:
            return
        now = time.monotonic()
        if self.tty:
            width = 30
            fill = int(width * self.done / self.total) if self.total else width
            self.stream.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {self._line()}\033[K")
            self.stream.flush()
        elif now - self.last >= _PLAIN_EVERY or self.done == self.total:
            self.last = now
            self.stream.write(self._line() + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.tty and self.total:
            self.stream.write("\n")
            self.stream.flush()

"""driver-runtime-mismatch from Paddle's fatal-signal block: a segmentation fault with no frame inside Paddle."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.device.driver_runtime_mismatch import PLAYBOOK
from forensics.playbooks.evidence import combine, detection, events
from forensics.playbooks.fields import field

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# Paddle's handler prints `No stack trace in paddle, may be caused by external reasons.` in place of its C++ traceback
# when no frame of the fault is Paddle's, then its `Error Message Summary` with `FatalError: `Segmentation fault` is
# detected by the operating system.` and the SIGSEGV line. The fault is in a native library Paddle loaded; the public
# threads end with another paddlepaddle-gpu build for the installed CUDA/cuDNN (PaddlePaddle/PaddleOCR#16402: the cu118
# wheel; PaddlePaddle/PaddleSeg#2251: maintainer, paddle/CUDA/cuDNN versions do not match; opendatalab/PDF-Extract-Kit#74:
# another paddlepaddle version). The log cannot prove which library: a finding of low confidence that says so.
EXTERNAL_CODES = ("paddle_external_fault",)
SIGNAL_CODES = ("shell_signal_exit",)
PADDLE_FORM = "paddle"
SEGFAULT = r"(?i)segmentation fault|SIGSEGV"
# The summary follows the traceback section within a few lines (a blank line and the `Error Message Summary` banner).
BLOCK_LINES = 12


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """A Paddle segmentation fault whose traceback section says no frame was Paddle's: a native library of the
    environment (CUDA, cuDNN, another wheel's binary) crashed. Quiet when the C++ traceback lists Paddle's frames
    (PaddlePaddle/PaddleX#518: a fault inside Paddle's own operators) or the signal is another (a SIGBUS is /dev/shm)."""
    external = events(ctx, EXTERNAL_CODES)
    if external.height == 0:
        return None
    sig = events(ctx, SIGNAL_CODES)
    if sig.height == 0:
        return None
    sig = sig.filter((field("form").fill_null("") == PADDLE_FORM) & field("signal").fill_null("").str.contains(SEGFAULT))
    pairs = (external.select("file", pl.col("line").alias("_x"))
             .join(sig.select("file", "line"), on="file")
             .filter((pl.col("line") > pl.col("_x")) & (pl.col("line") - pl.col("_x") <= BLOCK_LINES)))
    if pairs.height == 0:
        return None
    keys = pl.concat([pairs.select("file", pl.col("_x").alias("line")), pairs.select("file", "line")]).unique()
    ev = combine(external.join(keys, on=["file", "line"], how="semi"), sig.join(keys, on=["file", "line"], how="semi"))
    return detection(ev, "a segmentation fault outside Paddle's own code (its handler found no Paddle frame: `No stack trace "
                         "in paddle, may be caused by external reasons`): a native library of the environment crashed, most "
                         "often a paddlepaddle-gpu build that does not match the installed CUDA/cuDNN (not proven by the log)",
                     {"framework_build_mismatch": 1.0}, confidence=0.4, severity=Severity.MEDIUM)

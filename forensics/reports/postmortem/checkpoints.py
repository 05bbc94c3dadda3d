"""Checkpoint saves found in the run's text logs (no signature table row: a save is not an error event)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from forensics.sources import make_source

# Literal needles found with bytes.find: a checkpoint line names one of them ("heckpoint" covers
# checkpoint and Checkpoint). Each needle is one pass over the log, so they are few.
NEEDLES = (b"heckpoint", b"HECKPOINT", b"ckpt")
# A save (started or done): "Saving model checkpoint to", "saving checkpoint at iteration 100",
# "successfully saved checkpoint from iteration", "Saved checkpoint ckpt.pt", "saving model to '...ckpt'",
# "Finished saving the checkpoint", "[Torch] Checkpoint global_step1000 is ready now!".
SAVE = re.compile(r"(?i)\b(?:sav(?:e|es|ed|ing)|wrote|writing|written)\b.{0,80}?(?:checkpoint|ckpt)"
                  r"|(?:checkpoint|ckpt)\S*\s.{0,60}?\b(?:saved|written|is ready)\b")
# Not a save: a load/resume line, the save failing, or source code quoted by a traceback (`torch.save(ckpt, ...)`).
NOT_SAVE = re.compile(r"(?i)\b(?:load|loading|loaded|resum\w*|restor\w*)\b|fail|error|exception|unable|could not|cannot|\w\(")
# The step a line names, most specific first.
STEP = (
    re.compile(r"(?i)checkpoint[-_](\d+)\b"),
    re.compile(r"(?i)global_step[_ ]?(\d+)"),
    re.compile(r"(?i)\biteration[: ]+(\d+)"),
    re.compile(r"(?i)@ ?(\d+) updates"),
    re.compile(r"(?i)\bstep[_=: -]?(\d+)"),
    re.compile(r"(?i)\b(?:ckpt|iter)[_-]?(\d+)"),
)
# Errors that mean a save started on the line before them did not complete.
FAIL_CODES = ("checkpoint_write_failed", "checkpoint_permission_denied", "no_space_left", "permission_denied")
# How many lines after a "saving" line a failure still belongs to it.
FAIL_WINDOW = 40
MAX_TEXT = 300


@dataclass(frozen=True)
class Save:
    """One checkpoint save line."""

    file: str
    line: int
    text: str
    step: int | None
    failed: bool


def _candidates(buf: bytes, first_line: int) -> list[tuple[int, str]]:
    """(line number, text) of the lines of `buf` holding a needle; `buf` starts at `first_line`."""
    starts: set[int] = set()
    for needle in NEEDLES:
        pos = buf.find(needle)
        while pos >= 0:
            start = buf.rfind(b"\n", 0, pos) + 1
            starts.add(start)
            end = buf.find(b"\n", pos)
            if end < 0:
                break
            pos = buf.find(needle, end)
    out = []
    line, at = first_line, 0
    for start in sorted(starts):
        line += buf.count(b"\n", at, start)  # counted between hits only: linear in the buffer
        at = start
        end = buf.find(b"\n", start)
        raw = buf[start:] if end < 0 else buf[start:end]
        out.append((line, raw.decode("utf-8", errors="replace").rstrip("\r")))
    return out


def scan_file(path: Path, rel: str) -> list[tuple[int, str]]:
    """Candidate lines of one (possibly compressed) log, streamed in blocks cut at line ends."""
    out: list[tuple[int, str]] = []
    line, carry = 1, b""
    try:
        for block in make_source(path, rel).chunks():
            buf = carry + block
            cut = buf.rfind(b"\n") + 1
            body, carry = buf[:cut], buf[cut:]
            out.extend(_candidates(body, line))
            line += body.count(b"\n")
        if carry:
            out.extend(_candidates(carry, line))
    except OSError:
        return out
    return out


def _step_of(text: str) -> int | None:
    for rx in STEP:
        m = rx.search(text)
        if m:
            return int(m.group(1))
    return None


def find_saves(root: Path, files: pl.DataFrame, events: pl.DataFrame) -> list[Save]:
    """Every checkpoint save line of the text logs, in file order (step None when the line names none)."""
    logs = files.filter((pl.col("parser") == "text_log") & pl.col("status").is_in(["parsed", "partial"]))
    saves: list[Save] = []
    fails = events.filter(pl.col("code").is_in(list(FAIL_CODES))).select("file", "line") if events.height else events
    for rel in sorted(logs.get_column("file").to_list()):
        path = root / rel if root.is_dir() else root
        for line, text in scan_file(path, rel):
            if not SAVE.search(text) or NOT_SAVE.search(text):
                continue
            failed = fails.height > 0 and fails.filter((pl.col("file") == rel) & pl.col("line").is_between(line + 1, line + FAIL_WINDOW)).height > 0
            saves.append(Save(rel, line, text.strip()[:MAX_TEXT], _step_of(text), failed))
    return saves

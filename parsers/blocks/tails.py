"""Tracebacks whose opener a paste left out: frames, then the exception line; only the `raise` statement
Python prints as the last frame's source line, then the exception line; or an exception line alone at the end
of a log."""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import polars as pl
from forensics.parsers.blocks.common import EXC_TYPE, FRAME, TB_START, WINDOW, block_text, event, opener_rows, rank_of

# An exception line as Python prints it last in a traceback (a dotted class name ending in Error/Exception).
_TAIL_EXC = r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt)(?::|$)"
_TAIL_FRAME = re.compile(r'^\s+File "[^"]+", line \d+')
# A frame line whose indentation the paste stripped: only with its `, in <function>` tail, the whole frame.
_BARE_FRAME = re.compile(r'^File "[^"]+", line \d+, in \S')
_TAIL_CODE = re.compile(r"^\s{4}|^\s+[~^]+\s*$")
# The source line of the innermost frame when it is a raise statement, as a paste that keeps only the last two
# lines of a traceback gives it (its indentation often stripped): `raise XError(f"…")`, then `pkg.XError: …`.
_TAIL_RAISE = re.compile(r"^\s*raise [A-Za-z_][\w.]*(?:\(|$)")
# An exception line as a log's last line (`AssertionError: label 12 >= num_classes`,
# `tensorflow.python…NanLossDuringTrainingError: …`, `torch.distributed.elastic…ChildFailedError:`) is how the
# process ended: Python prints it last, and a paste that keeps only that line still shows the failure. A log
# that goes on after such a line logged it and carried on; warnings are not failures.
# A fully qualified class whose name has no such suffix (`triton.runtime.autotuner.OutOfResources: out of resource: …`,
# `concurrent.futures.process.BrokenProcessPool: …`) counts too: two lowercase module parts before a CamelCase name
# of two words or more and a colon, which a log line's `word: text` or a logger name does not make.
_LAST_EXC = re.compile(r"^\s*(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::|$)|(?:[a-z_][a-z0-9_]*\.){2,}[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+: \S)")
# A row that continues an exception message printed over several lines: Python prints str(exc) whole after `Type: `,
# so the lines of a multi-line message follow the exception line, indented or as a heading that ends in `:` (xformers'
# dispatch report: `No operator found for `memory_efficient_attention_forward` with inputs:`, one indented row per
# input, then `` `cutlassF-pt` is not supported because:`` over its indented reasons [OBS facebookresearch/xformers#1263,
# sipie800/ComfyUI-PuLID-Flux-Enhanced#34]; omegaconf's `    full_key: …` / `    object_type=…` rows).
_CONTINUATION = r"^\s+\S|:\s*$"
# Lines a runner prints after the process's last output (an IDE's exit footer, Hydra's hint): not the log's last.
FOOTER = r"^\s*(?:Process finished with exit code|Set the environment variable HYDRA_FULL_ERROR=1)"


def read(frame: pl.DataFrame, cand: pl.DataFrame, found: list[dict]) -> list[dict]:
    """Tracebacks whose opener the log lacks (a paste that starts at a frame): frames, then the exception.

    `found` holds the blocks read before; an exception line inside one of them is that block's.
    """
    spans = [(r["line"], r["end_line"]) for r in found]
    text = frame.get_column("text")
    lines = frame.get_column("line")
    events = []
    for row, _ in opener_rows(frame, cand.filter(pl.col("msg").str.contains(_TAIL_EXC)), ""):
        ln = int(row["line"])
        if any(a <= ln <= b for a, b in spans):
            continue  # the exception line of a block already reported
        pos, msg = row["_pos"], row["msg"]
        full = row["text"]
        prefix = full[: len(full) - len(msg)] if full.endswith(msg) else ""
        # Walk back over the frame and source lines of the same stream.
        q, frames, raised = pos - 1, [], False
        while q >= 0 and pos - q <= WINDOW:
            t = str(text[q])
            if prefix and not t.startswith(prefix):
                break
            body = t[len(prefix) :]
            if _TAIL_FRAME.match(body) or _BARE_FRAME.match(body):
                frames.append(body)
            elif q == pos - 1 and _TAIL_RAISE.match(body):
                raised = True
            elif not (_TAIL_CODE.match(body) or (q > 0 and _BARE_FRAME.match(str(text[q - 1])[len(prefix) :]))):
                break  # neither a frame nor the source line under one (de-indented by the paste: the frame above says so)
            q -= 1
        if not (frames or raised) or TB_START.search(str(text[q]) if q >= 0 else ""):
            continue  # not after frames or a raise statement, or the opener is there (a block the traceback pass reads)
        if not frames and (not _raises_this(str(text[pos - 1])[len(prefix) :], msg) or _known(msg)):
            continue  # a raise of another exception, or a message the signature table reads as its own event
        fields: dict = {"frames": len(frames), "head_truncated": "true"}
        fm = FRAME.match(frames[0]) if frames else None  # the walk went backwards: the first found is the last frame
        if fm:
            fields.update(file=fm.group("file"), line=fm.group("line"), function=fm.group("function"))
        tm = EXC_TYPE.match(msg.strip())
        fields["exc_type"] = tm.group("type") if tm else None
        events.append(
            event(
                line=int(lines[q + 1]),
                end_line=ln,
                code="python_traceback",
                severity="error",
                message=msg.strip(),
                text=block_text(text, np.arange(q + 1, pos + 1)),
                fields=fields,
                rank=row["rank"] if row["rank"] is not None else rank_of(prefix),
                ts=row["ts"],
            )
        )
    return events


@lru_cache(maxsize=1)
def _signature_forms() -> tuple[re.Pattern, ...]:
    from forensics.parsers import signatures

    return tuple(re.compile(sig.regex) for sig in signatures.load() if sig.severity == "error")


# The signatures run here with `re`, which backtracks: an exception line is looked at up to this many characters,
# so a hostile near-miss line costs milliseconds, not minutes (the signature scan itself runs in polars, linear).
KNOWN_CHARS = 1000


def _known(msg: str) -> bool:
    """Whether an error signature reads this exception line (its event already says the process failed)."""
    msg = msg[:KNOWN_CHARS]
    return any(rx.search(msg) for rx in _signature_forms())


def lone_exceptions(last: pl.DataFrame) -> list[dict]:
    """An exception line that is a log's last line, with no frames above it, as its final error.

    `last`: each log's last non-blank line (prefix-split: `msg`, `rank`, `ts`), with `prev`, the text of the
    line before it (None when none). Not when the line above is another exception line (this one continues its
    message, as a wrapped cause after `BackendCompilerFailed: … raised:`) or a `raise` of another exception (quoted
    source: `_raises_this` decides a matching one inside a block). The caller drops the lines an event of the
    line-by-line pass already reads (a launcher's `SignalException` is the scheduler's stop, not a failure).
    """
    out = []
    rows = last.filter(pl.col("msg").str.contains(_LAST_EXC.pattern))
    for r in rows.iter_rows(named=True):
        msg, prev = r["msg"].strip(), (r["prev"] or "").strip()
        if prev and (EXC_TYPE.match(prev) or _TAIL_FRAME.match(r["prev"]) or TB_START.search(prev) or _TAIL_RAISE.match(prev)):
            continue
        tm = EXC_TYPE.match(msg)
        out.append(event(line=int(r["line"]), end_line=int(r["line"]), code="python_traceback", severity="error",
                         message=msg, text=r["text"], fields={"frames": 0, "head_truncated": "true",
                                                             "exc_type": tm.group("type") if tm else None},
                         rank=r["rank"], ts=r["ts"]))
    return out


def message_heads(rows: pl.DataFrame) -> pl.DataFrame:
    """Each log's last exception line whose message runs on to the log's end over continuation rows (indented, or a
    heading ending in `:`), when such rows follow it: that exception line is how the process ended, as a lone last
    line is. `rows`: each log's tail rows (`_f`, `line`, `text` without Markdown quote marks, `prev`), prefix-split
    (`msg`). A row that is neither (a progress line, a log record) after the exception line means the log went on."""
    breaks = (~pl.col("text").str.contains(_CONTINUATION)).cast(pl.Int32)
    later_breaks = (breaks.reverse().cum_sum().reverse() - breaks).over("_f")
    after = (pl.len() - 1 - pl.int_range(pl.len())).over("_f")
    # Python prints the exception line at the margin; an indented one is a row of some message, not its head.
    head = pl.col("msg").str.contains(_LAST_EXC.pattern) & ~pl.col("msg").str.contains(r"^\s")
    rows = rows.sort("line")
    heads = rows.filter(head & (later_breaks == 0) & (after > 0))
    heads = heads.filter(pl.col("line") == pl.col("line").max().over("_f"))
    # The event's text is the whole message, its continuation rows with it (what the lexicon and the reader weigh).
    block = (rows.join(heads.select("_f", pl.col("line").alias("_h")), on="_f").filter(pl.col("line") >= pl.col("_h"))
             .group_by("_f").agg(pl.col("text").str.join("\n").alias("_block")))
    return heads.join(block, on="_f").with_columns(pl.col("_block").alias("text")).drop("_block")


def _raises_this(raise_line: str, msg: str) -> bool:
    """Whether a `raise X(…)` line raises the exception the next line names (`pkg.mod.X: …` ends with X)."""
    rm = _TAIL_RAISE.match(raise_line)
    tm = EXC_TYPE.match(msg.strip())
    if not rm or not tm:
        return False
    raised = raise_line.strip()[len("raise ") :].split("(", 1)[0].strip()
    return tm.group("type").rsplit(".", 1)[-1] == raised.rsplit(".", 1)[-1]


# Fewest frames a log's trailing stack must hold: one frame line alone is too little to say where a process waited.
MIN_STACK_FRAMES = 2


def cut_stacks(tail: pl.DataFrame) -> list[dict]:
    """A log that ends in Python frames with neither the opener above them nor an exception line after them, as
    `python_stack` (warning): a stack a paste cut at both ends, as people paste the frames of the traceback that Ctrl-C
    printed to show where a run hung (dusty-nv/jetson-inference#782, the frames down to the DataLoader's queue poll).

    `tail`: each log's last non-blank rows (`_f` the log, `line`, `text`), in line order. A stack with its opener is
    the traceback pass's; one with an exception line is `read`'s; here nothing says how the process ended, so this is
    no failure sign: the innermost frame says where it was (playbooks/operations/silent_hang_interrupt.py).
    """
    out = []
    # The quote marks come off every log's rows in one pass (a folder of thousands of small logs: not one call each).
    tail = tail.with_columns(pl.col("text").str.replace(r"^(?:>\s?)+", "").alias("_bare"))
    for part in tail.partition_by("_f", maintain_order=True):
        text = [str(t) for t in part.get_column("_bare").to_list()]
        lines = part.get_column("line").to_list()
        if EXC_TYPE.match(text[-1].strip()):
            continue  # a traceback's exception line ends the log: `read` and `lone_exceptions` read it
        q, frames = len(text) - 1, []
        while q >= 0:
            body = text[q]
            if _TAIL_FRAME.match(body) or _BARE_FRAME.match(body):
                frames.append(q)
            elif not (_TAIL_CODE.match(body) or (q > 0 and _BARE_FRAME.match(text[q - 1]) and not EXC_TYPE.match(body.strip()))):
                break  # neither a frame nor the source line under one (de-indented by the paste: the frame above says so)
            q -= 1
        if len(frames) < MIN_STACK_FRAMES or (q >= 0 and TB_START.search(text[q])):
            continue
        fm = FRAME.match(text[frames[0]])  # the walk went backwards: the first found is the innermost frame
        fields = {"frames": len(frames), "head_truncated": "true", "truncated": "true"}
        if fm:
            fields.update(file=fm.group("file"), line=fm.group("line"), function=fm.group("function"))
        where = f" (innermost: {fields.get('function')} in {fields.get('file')}:{fields.get('line')})" if fm else ""
        out.append(event(line=int(lines[q + 1]), end_line=int(lines[-1]), code="python_stack", severity="warning",
                         message=f"Python stack of {len(frames)} frames with no exception line{where}",
                         text="\n".join(text[q + 1 :]), fields=fields))
    return out

"""Signature events completed from the lines around them: NCCL `Last error:` details, messages a paste
wrapped onto two lines, the ranks of torchrun report rows, the two lines of an old kernel's OOM kill, and what
the line after a message names (Dynamo's recompiled function, DDP's parameter marked ready twice, load_state_dict's
first mismatched key, Horovod's stalled-rank list).

The signature table matches one line at a time; a few messages carry their meaning on the next
line(s). Only the (sparse) events that can have such a continuation are looked at, so Python
iterates over a handful of events per chunk, never over the lines.
"""

from __future__ import annotations

import re
from functools import lru_cache

import orjson
import polars as pl
from forensics.parsers import signatures
from forensics.parsers.blocks import prefix_pattern
from forensics.parsers.prefixes import ANY_LOG_PREFIX

from forensics.contracts.fields import field_expr

# Events whose message may go on in the rows after it (the NCCL error-detail lines).
DETAIL_CODES = ("nccl_error", "nccl_error_detail")
# How many rows after an event are searched for the next lines of its stream (ranks interleave).
NEXT_ROWS = 24
_NCCL_CODE = re.compile(r"^\s*(?:\w+: )?(?P<code>nccl(?:SystemError|UnhandledCudaError|InternalError|InvalidArgument|InvalidUsage|RemoteError)): ")
_LAST_ERROR = re.compile(r"^\s*Last error:\s*(?P<detail>.*?)\s*$")
_LAST_INLINE = re.compile(r" Last error: (?P<detail>.+?)\s*$")
# A line that is not the detail of a `Last error:` with nothing after it: a C++ frame dump, a
# traceback, a new log record, another NCCL error.
_NOT_DETAIL = re.compile(rf"^(?:Exception raised from|Traceback \(|frame #\d|nccl\w+Error: |terminate called)|{ANY_LOG_PREFIX}")
_RANKED = re.compile(r"^\[(?:rank|default)\d+\]:")
_REPORT_PIDS = ("torchrun_worker_signal",)
# Messages whose next line (of the same stream) names what they are about: Dynamo's recompile-limit warning
# (`[0/8]    function: 'foo' (file.py:4)`), DDP's marked-ready-twice error (`Parameter at index 447 with name
# ....lora_B.default.weight has been marked as ready twice.`).
_NEXT_LINE = {
    "dynamo_recompile_limit": re.compile(r"^(?:\[\d+/\d+\])?\s*function: '(?P<function>[^']+)' \((?P<location>[^)]*)\)"),
    "ddp_marked_ready_twice": re.compile(
        r"^Parameter at index (?P<param_index>\d+)(?: with name (?P<param_name>\S+))? has been marked as ready twice"),
    # load_state_dict's first error line under `Error(s) in loading state_dict for X:` (tab-indented; spaces in pastes).
    "state_dict_mismatch": re.compile(
        r'^\s*(?:Missing key\(s\) in state_dict: "(?P<missing_key>[^"]*)"|Unexpected key\(s\) in state_dict: "(?P<unexpected_key>[^"]*)"'
        r"|size mismatch for (?P<param>\S+): copying a param with shape torch\.Size\((?P<ckpt_shape>\[[^\]]*\])\) from checkpoint, "
        r"the shape in current model is torch\.Size\((?P<model_shape>\[[^\]]*\])\))"),
}
# load_state_dict's detail lines read alone (signatures.toml, form `detail_only`): a header above them in the frame
# already stands for its list and names its first key, so only details with no header above stay events.
_DETAIL_ONLY = '"form":"detail_only"'
# Horovod's `Stalled ranks:` / `Missing ranks:` header is followed by one `<rank>[!]: [tensor, ... ...]` line per
# rank the others wait for (`!`: stalled past the shutdown time); a line of that shape alone proves nothing.
_RANK_LIST = re.compile(r"^\s*(?P<rank>\d+)(?P<shutdown>!)?: \[(?P<tensors>[^\]]*)\]\s*$")
_RANK_LIST_CODES = ("horovod_stall_list",)
# vLLM's record prefix (`ERROR 04-07 00:57:46 ray_utils.py:45] `), which the prefix splitter leaves on the
# message: part of the stream's prefix here, since each detail line repeats it.
_VLLM_RECORD = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d [\w.]+:\d+\] ")


@lru_cache(maxsize=1)
def _full_forms() -> dict[str, list[tuple[re.Pattern, dict]]]:
    """Per code, the compiled regexes (and constant fields) of its complete-message signatures."""
    out: dict[str, list[tuple[re.Pattern, dict]]] = {}
    for sig in signatures.load():
        if "partial" in sig.const or sig.derive:
            continue
        out.setdefault(sig.code, []).append((re.compile(sig.regex), dict(sig.const)))
    return out


def _prefix_re(prefix: str) -> re.Pattern | None:
    """A pattern for a prefix whose time stamp changes from line to line, else None."""
    pattern = prefix_pattern(prefix)
    return _compiled(pattern) if pattern is not None else None


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern:
    # A warning repeated thousands of times gives the same prefix shape each time.
    return re.compile(pattern)


def _stream(text: pl.Series, pos: int, prefix: str, want: int) -> list[tuple[int, str]]:
    """Up to `want` rows after `pos` of the same stream (the same prefix), as (row, body without the prefix)."""
    pattern = _prefix_re(prefix)
    out: list[tuple[int, str]] = []
    # One slice to Python strings: indexing a Series row by row costs far more than the matching.
    for q, t in enumerate(text.slice(pos + 1, NEXT_ROWS).to_list(), start=pos + 1):
        t = t or ""
        if pattern is not None:
            m = pattern.match(t)
            if not m:
                continue
            body = t[m.end() :]
        elif prefix:
            if not t.startswith(prefix):
                continue
            body = t[len(prefix) :]
        elif _RANKED.match(t):
            continue  # a line of a rank-prefixed stream inside an unprefixed one
        else:
            body = t
        out.append((q, body))
        if len(out) >= want:
            break
    return out


def _join_partial(ev: dict, text: pl.Series, pos: int) -> int:
    """Complete a message a paste wrapped onto the next line; returns the row the event now ends on."""
    if pos + 1 >= len(text):
        return pos
    head = ev["message"].rstrip()
    tail = (text[pos + 1] or "").strip()
    if not tail or _NOT_DETAIL.match(tail) or _RANKED.match(tail):
        return pos
    # A wrap inside a word or number leaves no space; one between words drops it: try both.
    for joined in (head + tail, head + " " + tail):
        for rx, const in _full_forms().get(ev["code"], []):
            m = rx.search(joined)
            if not m or m.start() >= len(head) or m.end() <= len(head):
                continue  # the match must start in the head and need the continuation
            found = {k: v for k, v in m.groupdict().items() if v}
            fields = {k: v for k, v in ev["_f"].items() if k != "partial"}
            fields.update(found)
            fields.update({k: str(v) for k, v in const.items()})
            if "rank" in found and ev["rank"] is None:
                ev["rank"] = int(found["rank"])
            ev["_f"] = fields
            ev["message"] = joined
            return pos + 1
    return pos


def _last_error(ev: dict, text: pl.Series, pos: int, prefix: str) -> int:
    """Attach the `Last error:` detail that NCCL prints on the lines after its error; returns the end row."""
    inline = _LAST_INLINE.search(ev["message"])
    if inline:
        ev["_f"]["last_error"] = inline.group("detail")
        return pos
    rows = _stream(text, pos, prefix, 3)
    end, k = pos, 0
    if ev["code"] == "nccl_error" and k < len(rows):
        cm = _NCCL_CODE.match(rows[k][1])
        if cm:
            ev["_f"].setdefault("nccl_code", cm.group("code"))
            end, k = rows[k][0], k + 1
            inline = _LAST_INLINE.search(rows[k - 1][1])
            if inline:
                ev["_f"]["last_error"] = inline.group("detail")
                return end
    if k < len(rows):
        lm = _LAST_ERROR.match(rows[k][1])
        if lm:
            end, k = rows[k][0], k + 1
            detail = lm.group("detail")
            if not detail and k < len(rows):
                nxt = rows[k][1].strip()
                if nxt and not _NOT_DETAIL.match(nxt):
                    detail, end = nxt, rows[k][0]
            if detail:
                ev["_f"]["last_error"] = detail
    return end


def _next_line_fields(ev: dict, text: pl.Series, pos: int, prefix: str) -> int:
    """Attach the fields the next line of the stream names (`_NEXT_LINE`); returns the row the event now ends on."""
    rows = _stream(text, pos, prefix, 1)
    if rows:
        m = _NEXT_LINE[ev["code"]].match(rows[0][1])
        if m:
            ev["_f"].update({k: v for k, v in m.groupdict().items() if v and k not in ev["_f"]})
            return rows[0][0]
    return pos


def _rank_lines(ev: dict, text: pl.Series, pos: int, prefix: str) -> int:
    """Read the `<rank>: [...]` lines under a rank-list header into `missing_ranks` (and `shutdown_ranks`, and the
    first rank's `tensors`); returns the row the event now ends on."""
    end, missing, shut = pos, [], []
    for row, body in _stream(text, pos, prefix, NEXT_ROWS):
        m = _RANK_LIST.match(body)
        if not m:
            break
        end = row
        missing.append(m.group("rank"))
        if m.group("shutdown"):
            shut.append(m.group("rank"))
        ev["_f"].setdefault("tensors", m.group("tensors"))
    if missing:
        ev["_f"]["missing_ranks"] = ", ".join(missing)
    if shut:
        ev["_f"]["shutdown_ranks"] = ", ".join(shut)
    return end


def _report_ranks(events: list[dict], reports: pl.DataFrame) -> None:
    """Give rank-less events inside a torchrun report the rank of the report row with their PID."""
    spans = []
    for r in reports.iter_rows(named=True):
        f = orjson.loads(r["fields"])
        pids = [f.get("pid"), *(f.get("other_pids") or "").split(",")]
        ranks = [f.get("rank"), *(f.get("other_ranks") or "").split(",")]
        by_pid = {p: int(k) for p, k in zip(pids, ranks, strict=False) if p and k and k.lstrip("-").isdigit()}
        spans.append((r["line"], r["end_line"], by_pid))
    for ev in events:
        pid = ev["_f"].get("pid")
        if ev["rank"] is not None or pid is None:
            continue
        for lo, hi, by_pid in spans:
            if lo <= ev["line"] <= hi and pid in by_pid:
                ev["rank"] = by_pid[pid]
                break


def stamp_inside_blocks(ev: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    """Signature events with no time of their own inside a block event that has one take the block's time.

    The exception line of a traceback (`torch.OutOfMemoryError: ...`) carries no stamp; the block does when
    its first line or the error record right above it has one (parsers/blocks/stamps.py). A block of another rank
    (ranks' tracebacks interleave) gives nothing. One as-of join, no per-event Python.
    """
    if ev.height == 0 or blocks.height == 0 or not ev.get_column("ts").is_null().any():
        return ev
    spans = blocks.filter(pl.col("ts").is_not_null()).select(
        pl.col("line").alias("_bl"), pl.col("end_line").alias("_be"), pl.col("ts").alias("_bts"), pl.col("rank").alias("_br")
    ).sort("_bl")
    if spans.height == 0:
        return ev
    need = ev.select("line", "rank").with_row_index("_i").filter(ev.get_column("ts").is_null()).sort("line")
    hit = need.join_asof(spans, left_on="line", right_on="_bl", strategy="backward").filter(
        (pl.col("line") <= pl.col("_be")) & (pl.col("rank").is_null() | pl.col("_br").is_null() | (pl.col("rank") == pl.col("_br")))
    )
    if hit.height == 0:
        return ev
    return ev.with_columns(ev.get_column("ts").scatter(hit.get_column("_i"), hit.get_column("_bts")))


def _merge_oom_pairs(ev: pl.DataFrame) -> pl.DataFrame:
    """One event per OOM kill: a kernel's second line (`Killed process N (x) total-vm:...`, form killed_line) is
    merged into the `Out of memory: Kill process N (x) score S or sacrifice child` line just before it."""
    if not ev.filter(pl.col("fields").str.contains('"form":"killed_line"', literal=True)).height:
        return ev
    ev = ev.with_row_index("_i")
    oom = ev.filter(pl.col("code") == "host_oom_killed").with_columns(field_expr("pid").alias("_pid"))
    second = oom.filter(pl.col("fields").str.contains('"form":"killed_line"', literal=True))
    first = oom.filter(~pl.col("fields").str.contains('"form":"killed_line"', literal=True))
    # The same pid a few lines on, or the very next lines whatever the pid (`or sacrifice child`: a child may die).
    pairs = second.join(first.select(pl.col("_pid").alias("_fpid"), pl.col("_i").alias("_first"), pl.col("line").alias("_fl")),
                        how="cross")
    gap = pl.col("line") - pl.col("_fl")
    pairs = pairs.filter((gap > 0) & (((pl.col("_pid") == pl.col("_fpid")) & (gap <= 3)) | (gap <= 1)))
    if pairs.height == 0:
        return ev.drop("_i")
    pairs = pairs.sort("_i", gap).unique("_i", keep="first").unique("_first", keep="first")
    merged = {}
    for r in pairs.iter_rows(named=True):
        extra = orjson.loads(r["fields"])
        if r["_pid"] != r["_fpid"]:
            extra["killed_pid"], extra["killed_process"] = extra.get("pid"), extra.get("process")
        merged[r["_first"]] = (extra, r["line"])
    out = []
    drop = set(pairs.get_column("_i").to_list())
    for r in ev.iter_rows(named=True):
        if r["_i"] in drop:
            continue
        if r["_i"] in merged:
            extra, end = merged[r["_i"]]
            f = orjson.loads(r["fields"])
            for k in ("total_vm", "anon_rss", "killed_pid", "killed_process"):
                if k in extra and k not in f:
                    f[k] = extra[k]
            r["fields"] = orjson.dumps(f).decode()
            r["end_line"] = end
        out.append(r)
    return pl.DataFrame(out, schema=ev.schema).drop("_i")


def _drop_listed_details(ev: pl.DataFrame) -> pl.DataFrame:
    """Drop load_state_dict detail-line events below a header of the same frame (the header stands for its list)."""
    mismatch = pl.col("code") == "state_dict_mismatch"
    detail = mismatch & pl.col("fields").str.contains(_DETAIL_ONLY, literal=True)
    first_header = ev.filter(mismatch & ~detail).get_column("line").min()
    if first_header is None:
        return ev
    return ev.filter(~(detail & (pl.col("line") > first_header)))


def complete(frame: pl.DataFrame, ev: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    """The signature events `ev` of one frame, completed from the lines after them and the block events."""
    return stamp_inside_blocks(_complete(frame, ev, blocks), blocks)


def _complete(frame: pl.DataFrame, ev: pl.DataFrame, blocks: pl.DataFrame) -> pl.DataFrame:
    if ev.height == 0:
        return ev
    ev = _drop_listed_details(_merge_oom_pairs(ev))
    partial = pl.col("fields").str.contains('"partial":"true"', literal=True)
    in_report = pl.col("code").is_in(list(_REPORT_PIDS)) & pl.col("rank").is_null()
    reports = blocks.filter(pl.col("code") == "torchrun_child_failed_report") if blocks.height else blocks
    todo = pl.col("code").is_in(list(DETAIL_CODES) + list(_NEXT_LINE) + list(_RANK_LIST_CODES)) | partial
    if reports.height:
        todo = todo | in_report
    sel = ev.with_row_index("_i").filter(todo)
    if sel.height == 0:
        return ev
    # Frame row of each event (rows are not lines: `\r` splits a line into several rows).
    # Only the frame rows on the events' lines are hashed (a whole chunk's text is megabytes).
    rows = frame.select("line", "text").with_row_index("_pos").filter(pl.col("line").is_in(sel.get_column("line").implode()))
    sel = sel.join(rows, on=["line", "text"], how="left").unique("_i", keep="first", maintain_order=True)
    text = frame.get_column("text")
    out = []
    for r in sel.iter_rows(named=True):
        r["_f"] = orjson.loads(r["fields"])
        pos = r["_pos"]
        if pos is not None:
            msg = r["message"] or ""
            prefix = r["text"][: len(r["text"]) - len(msg)] if msg and r["text"].endswith(msg) else ""
            vm = _VLLM_RECORD.match(msg)
            if vm:
                prefix += vm.group()
            end = pos
            if r["_f"].get("partial") == "true":
                end = _join_partial(r, text, pos)
            if r["code"] in DETAIL_CODES:
                end = _last_error(r, text, end, prefix)
            if r["code"] in _NEXT_LINE and r["_f"].get("form") != "detail_only":
                end = _next_line_fields(r, text, end, prefix)
            if r["code"] in _RANK_LIST_CODES:
                end = _rank_lines(r, text, end, prefix)
            if end != pos:
                r["end_line"] = int(frame.get_column("line")[end])
                r["text"] = "\n".join(text.slice(pos, end - pos + 1).to_list())
        out.append(r)
    if reports.height:
        _report_ranks(out, reports)
    for r in out:
        r["fields"] = orjson.dumps(r.pop("_f")).decode()
    done = pl.DataFrame([{k: r[k] for k in ev.columns} | {"_i": r["_i"]} for r in out],
                        schema={**ev.schema, "_i": pl.UInt32})
    rest = ev.with_row_index("_i").join(done.select("_i"), on="_i", how="anti").select(done.columns)
    return pl.concat([rest, done], how="vertical_relaxed").sort("_i").drop("_i")

"""Text logs (stdout/stderr of any trainer or launcher) into `events` and `metrics`.

The hot path per chunk: one Aho-Corasick prefilter over every line (the needles of
the metric grammars, the signature table and the block openers), prefix parsing
on the survivors only, then each extractor's regexes on those. No per-line Python.
"""

from __future__ import annotations

import datetime as dt
import os
import re

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from forensics.parsers import (
    bare_columns,
    blocks,
    followups,
    free_table,
    lightning_profile,
    metric_columns,
    metric_lines,
    nvsmi_table,
    profile_table,
    repeats,
    shapes,
    signatures,
    spool,
)
from forensics.parsers.base import Parser, ParseResult, Sniffed
from forensics.parsers.blocks import tails as tails_block
from forensics.parsers.lines import ReadStats, iter_frames
from forensics.parsers.prefixes import QUOTE_MARK, rank_from_path, split_prefixes

from forensics.contracts import tables as T
from forensics.contracts.tables import conform

NEEDLES: list[str] = sorted(
    set(metric_lines.NEEDLES) | set(signatures.needles()) | set(blocks.NEEDLES) | set(nvsmi_table.NEEDLES)
)

EVENT_COLS = ["line", "end_line", "ts", "rank", "step", "code", "severity", "message", "text", "fields"]
METRIC_COLS = ["line", "seg", "ts", "rank", "step", "name", "value", "source"]


# A full date and time near the top of the log (a record prefix, Megatron's stamp, a launcher's line).
_DATED = re.compile(r"\b(20\d{2})-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])[ T]\d{2}:\d{2}:\d{2}")


def _year_of(src, head: str = "") -> int:
    """The year of year-less stamps (glog's `E0626 06:24:44`): the log's own dated stamps say it best
    (a log copied or downloaded later has a new mtime); else the file's mtime, else now."""
    dated = _DATED.search(head)
    if dated:
        return int(dated.group(1))
    try:
        return dt.datetime.fromtimestamp(os.stat(src.path).st_mtime, dt.timezone.utc).year
    except OSError:
        return dt.datetime.now(dt.timezone.utc).year


def candidates(frame: pl.DataFrame, year: int) -> pl.DataFrame:
    """The lines any extractor may care about, with rank, ts and msg split off, and the shape of msg
    (parsers/shapes.py: the extractors run digit-blind regexes once per distinct shape)."""
    cand = frame.filter(pl.col("text").str.contains_any(NEEDLES, ascii_case_insensitive=True))
    return shapes.with_shape(split_prefixes(cand, year))


def carry_steps(rows: pl.DataFrame, anchors: pl.DataFrame) -> pl.DataFrame:
    """Fill a null `step` from the nearest preceding step line of the same rank, else of any rank."""
    if rows.height == 0 or anchors.height == 0:
        return rows
    step = rows.get_column("step")
    need = step.is_null()
    if not need.any():
        return rows
    # Logs parsed joined (parse_many) carry their file's index in `_f`: a step never crosses from one file to the next.
    fkey = ["_f"] if "_f" in rows.columns and "_f" in anchors.columns else []
    anchors = (
        anchors.select(pl.col("line"), *fkey, pl.col("rank").fill_null(-1).alias("_r"), pl.col("step").alias("_s"))
        .unique(subset=["line", *fkey, "_r"], keep="last")
        .sort("line")
    )
    # Only rows without a step are looked up (a row's lookup depends on nothing but its line and rank).
    pos = need.arg_true()
    sub = rows.select(pl.col("line"), *fkey, pl.col("rank").fill_null(-1).alias("_r")).gather(pos).with_row_index("_i").sort("line")
    same = sub.join_asof(anchors, on="line", by=["_r", *fkey], strategy="backward", check_sortedness=False)
    anyr = sub.select("_i", "line", *fkey).join_asof(anchors.drop("_r").rename({"_s": "_a"}), on="line", by=fkey or None,
                                                     strategy="backward", check_sortedness=False)
    found = (
        same.select("_i", "_s").join(anyr.select("_i", "_a"), on="_i").sort("_i")
        .select(pl.coalesce("_s", "_a").cast(step.dtype)).to_series()
    )
    return rows.with_columns(step.scatter(pos, found))


# Lines of context on each side of a batch of metric rows: metric_lines.finalize decides a row
# from rows at most this many physical lines away (HF dict steps come from bar states within two
# lines), so a batch finalized with this much context around it gives what the whole file would.
FINALIZE_CONTEXT_LINES = 64


class _Output:
    """Finishes metric and event rows batch by batch, so a file's memory does not grow with its length.

    Rows up to `cut` (the frame's last line less FINALIZE_CONTEXT_LINES) are finalized, given
    their steps (anchors: this batch's step lines plus the last step line per rank before it)
    and written to compact Arrow sinks that spill to disk; later rows wait for the next frame.
    """

    def __init__(self, rel: str, file_rank: int | None, starts: np.ndarray | None = None,
                 ranks: list[int | None] | None = None) -> None:
        self.rel = rel
        self.file_rank = file_rank
        # Joined logs (parse_many): the first line of each file in the stream, and each file's rank.
        self.starts = starts
        self.ranks = pl.Series("rank", ranks or [], dtype=pl.Int32)
        self.metrics_in: list[pl.DataFrame] = []
        self.events_in: list[pl.DataFrame] = []
        self.back: pl.DataFrame | None = None  # raw metric rows of the lines just before `done`
        self.anchors: pl.DataFrame | None = None  # the last step line of each rank so far
        self.done = 0  # rows with line <= done are written
        self.metrics = spool.TableSink(T.METRICS)
        self.events = spool.TableSink(T.EVENTS)
        # Budgets on rows one file repeats without end (parsers/repeats.py); joined small logs cannot meet them.
        self.event_budget = repeats.EventBudget() if starts is None else None
        self.step_budget = repeats.StepRepeatBudget() if starts is None else None

    def problems(self) -> list[str]:
        """What the budgets left out, for the file's row (empty when nothing)."""
        return [*(self.event_budget.problems() if self.event_budget else []),
                *(self.step_budget.problems() if self.step_budget else [])]

    def _with_file(self, df: pl.DataFrame) -> pa.Table:
        """The rows as Arrow with their `file` column, built dictionary-encoded (one value) at once."""
        table = df.to_arrow()
        file = pa.DictionaryArray.from_arrays(pa.array(np.zeros(table.num_rows, dtype=np.int32)), pa.array([self.rel], pa.string()))
        return table.append_column("file", file)

    def _segment(self, df: pl.DataFrame) -> pl.DataFrame:
        """The rows with `_f`, the index of the joined file each comes from (unchanged for a single file)."""
        if self.starts is None:
            return df
        seg = np.searchsorted(self.starts, df.get_column("line").to_numpy(), side="right") - 1
        return df.with_columns(pl.Series("_f", seg, dtype=pl.Int32))

    def _rank(self, df: pl.DataFrame) -> pl.DataFrame:
        if self.starts is not None and df.height:
            own = self.ranks.gather(self._segment(df).get_column("_f"))
            return df.with_columns(pl.col("rank").fill_null(own))
        return df.with_columns(pl.col("rank").fill_null(self.file_rank)) if self.file_rank is not None else df

    def add(self, metrics: pl.DataFrame, events: list[pl.DataFrame], last_line: int) -> None:
        if metrics.height:
            self.metrics_in.append(self._rank(metrics.select(METRIC_COLS)))
        self.events_in.extend(self._rank(e.select(EVENT_COLS)) for e in events if e.height)
        cut = last_line - FINALIZE_CONTEXT_LINES
        if cut > self.done:
            self._flush(cut)

    def close(self) -> None:
        self._flush(None)
        tail = self.event_budget.tail() if self.event_budget else None
        if tail is not None:
            self.events.add(conform("events", self._with_file(tail)))

    def _flush(self, cut: int | None) -> None:
        upto = (pl.col("line") <= cut) if cut is not None else pl.lit(True)
        raw = pl.concat(self.metrics_in, how="vertical_relaxed") if self.metrics_in else None
        anchors = self.anchors
        if raw is not None:
            context = raw if self.back is None else pl.concat([self.back, raw], how="vertical_relaxed")
            ready = metric_lines.finalize(context).filter((pl.col("line") > self.done) & upto)
            self.metrics_in = [raw.filter(~upto)] if cut is not None else []
            if cut is not None:
                self.back = context.filter(upto & (pl.col("line") > cut - FINALIZE_CONTEXT_LINES))
            new = self._segment(ready.filter(pl.col("step").is_not_null()).select("line", "rank", "step"))
            # One anchor per line and rank is enough (the last, as carry_steps keeps): a metric line
            # gives a dozen rows, and the rows come in line order.
            last_of_run = pl.col("line").ne_missing(pl.col("line").shift(-1)) | pl.col("rank").ne_missing(pl.col("rank").shift(-1))
            new = new.filter(last_of_run)
            if new.height:
                anchors = new if anchors is None else pl.concat([anchors, new], how="vertical_relaxed")
                by = ["_f"] if self.starts is not None else []
                self.anchors = anchors.sort("line", maintain_order=True).group_by(
                    *by, pl.col("rank").fill_null(-1).alias("_r"), maintain_order=True).last().drop("_r")
            if ready.height:
                ready = carry_steps(self._segment(ready), anchors).drop("_f", strict=False) if anchors is not None else ready
                ready = self.step_budget.keep(ready) if self.step_budget else ready
                self.metrics.add(conform("metrics", self._with_file(ready)))
        if self.events_in:
            evs = pl.concat(self.events_in, how="vertical_relaxed")
            self.events_in = [evs.filter(~upto)] if cut is not None else []
            # Events of one line in a fixed order (the extractors' own order of equal lines varies).
            ready_ev = evs.filter(upto).sort("line", "code", maintain_order=True)
            if ready_ev.height:
                ready_ev = carry_steps(self._segment(ready_ev), anchors).drop("_f", strict=False) if anchors is not None else ready_ev
                ready_ev = self.event_budget.keep(ready_ev) if self.event_budget else ready_ev
                self.events.add(conform("events", self._with_file(ready_ev)))
        if cut is not None:
            self.done = cut


def _column_rows(cols: pl.DataFrame) -> pl.DataFrame:
    """metric_columns rows in the metric_lines schema (no rank prefix, stamp or segment on a bare-number row)."""
    return cols.select(
        "line", pl.lit(0).alias("seg"), pl.lit(None).alias("ts"), pl.lit(None).alias("rank"), "step", "name", "value",
        pl.col("source") if "source" in cols.columns else pl.lit("columns").alias("source"),
    ).cast(metric_lines.SCHEMA)


# What a keyboard interrupt prints once the user stops a run that stopped making progress: the terminal's `^C` echo
# alone on its line, OpenSSH's client `Killed by signal 2.` (clientloop.c, one per ssh session of a launcher), the
# dmlc/MXNet launcher's SIGINT handler `Stop launcher` (`Stop luancher` in its 2016-2017 releases) [OBS
# apache/mxnet#3685].
STOP_LINES = r"^\s*\^C\s*$|^\s*Killed by signal \d+\.\s*$|(?:^|\s)Stop (?:launcher|luancher)\s*$"

# Rows kept from each log's end: its last line and the one before (the `at_end` signatures, a lone exception), and
# enough for the stack a paste ends on (tails_block.cut_stacks: a frame and its source line per two rows).
TAIL_ROWS = 64


def _last_lines(frame: pl.DataFrame, starts: np.ndarray | None, tails: pl.DataFrame | None) -> pl.DataFrame | None:
    """The last TAIL_ROWS non-blank rows of each file so far (`_f`: the file's index among joined logs, else 0); a
    runner's footer after the output does not count."""
    nonblank = (pl.col("text").str.strip_chars().str.len_chars() > 0) & ~pl.col("text").str.contains(tails_block.FOOTER)
    rows = frame.select("line", "seg", "text")
    # One log: only the frame's last rows can hold its last line (a big log's frames are not scanned whole).
    tail = rows.tail(256).filter(nonblank) if starts is None else None
    rows = tail if tail is not None and tail.height else rows.filter(nonblank)
    if rows.height == 0:
        return tails
    seg = np.zeros(rows.height, dtype=np.int32) if starts is None else \
        np.searchsorted(starts, rows.get_column("line").to_numpy(), side="right").astype(np.int32) - 1
    last = rows.with_columns(pl.Series("_f", seg, dtype=pl.Int32)).group_by("_f", maintain_order=True).tail(TAIL_ROWS)
    both = last if tails is None else pl.concat([tails, last], how="vertical_relaxed")
    return both.group_by("_f", maintain_order=True).tail(TAIL_ROWS)


def _end_events(tails: pl.DataFrame | None, year: int, read_lines: set[int]) -> pl.DataFrame:
    """The events of each file's last non-blank line: the `at_end` signatures' (where a hang's log stops: a progress
    bar that never advanced, a JIT build's `Using … as PyTorch extensions root...`), and a lone exception line there
    (how the process ended, when a paste keeps only that line) unless an event of the frames already reads it."""
    if tails is None or tails.height == 0:
        return pl.DataFrame(schema=signatures.SCHEMA)
    # The line before, without its Markdown quote marks (the last line's are peeled by split_prefixes).
    two = tails.sort("line").with_columns(pl.col("text").str.replace(QUOTE_MARK, "").shift(1).over("_f").alias("prev"))
    last = split_prefixes(two.filter(pl.col("line") == pl.col("line").max().over("_f")).drop("_f"), year)
    ends = signatures.extract_at_end(_end_rows(two, year))
    # An exception line whose multi-line message runs to the log's end ended the process as a last line does.
    heads = tails_block.message_heads(split_prefixes(two.with_columns(pl.col("text").str.replace(QUOTE_MARK, "")), year))
    last = pl.concat([last, heads.drop("_f")], how="diagonal_relaxed") if heads.height else last
    lone = [e for e in tails_block.lone_exceptions(last) if e["line"] not in read_lines]
    # A stack cut at both ends (no opener, no exception line), unless a block already ends on its last line.
    lone += [e for e in tails_block.cut_stacks(two) if e["end_line"] not in read_lines]
    if not lone:
        return ends
    return pl.concat([ends, pl.DataFrame(lone, schema=signatures.SCHEMA)], how="vertical_relaxed")


def _end_rows(two: pl.DataFrame, year: int) -> pl.DataFrame:
    """Each log's last few non-blank rows (as many as an `at_end` form reads), prefix-split, with `_after` (rows after
    it in its log) and `_digit_after` (whether one of those holds a digit: a step, a count or a metric). The lines a
    keyboard interrupt prints after the log stopped (STOP_LINES) are not where it stopped: a trailing run of them is
    left out."""
    stop = pl.col("text").str.contains(STOP_LINES).cast(pl.Int32)
    # Rows from which on every row to the log's end is such a line.
    two = two.filter(((1 - stop).reverse().cum_sum().reverse().over("_f")) > 0)
    digit = pl.col("text").str.contains(r"\d").cast(pl.Int32)
    rows = two.with_columns(
        (pl.len().over("_f") - 1 - pl.int_range(pl.len()).over("_f")).alias("_after"),
        ((digit.reverse().cum_sum().reverse() - digit).over("_f") > 0).alias("_digit_after"),
    ).filter(pl.col("_after") < signatures.at_end_reach())
    return split_prefixes(rows.drop("_f", "prev"), year)


def _read(src, year: int, out: _Output) -> tuple[ReadStats, dict]:
    """Every frame of the stream through the extractors into `out`; the read's anomalies and the extractors' state."""
    stats = ReadStats()
    state: dict = {}  # extractor state carried across chunks (e.g. last step per rank)
    tails: pl.DataFrame | None = None
    # Lines an event already reads: a signature's line, a block's last line (a log's last line may end a traceback).
    read_lines: set[int] = set()
    for frame in iter_frames(src, stats=stats):
        tails = _last_lines(frame, out.starts, tails)
        profile_table.from_log(frame, state)  # prof.key_averages().table() printouts -> counters
        lightning_profile.from_log(frame, state)  # Lightning SimpleProfiler reports -> counters
        # Column tables (a header row, then bare numbers): their rows hold no needle, so the whole frame is read.
        cols = metric_columns.from_log(frame, state)
        # `free` tables (host memory samples): their rows hold no needle either.
        host = free_table.from_log(frame, state)
        if host.height:
            cols = pl.concat([cols.with_columns(pl.lit("columns").alias("source")), host], how="vertical_relaxed").sort("line")
        # Headerless step/value lines (`76970 2.6265104`): only those no header table already read.
        bare = bare_columns.from_log(frame)
        if bare.height:
            bare = bare.join(cols.select("line"), on="line", how="anti").with_columns(pl.lit("bare_columns").alias("source"))
            if "source" not in cols.columns:
                cols = cols.with_columns(pl.lit("columns").alias("source"))
            cols = pl.concat([cols, bare], how="vertical_relaxed").sort("line")
        cand = candidates(frame, year)
        if cand.height == 0:
            if cols.height:
                out.add(_column_rows(cols), [], int(frame.get_column("line").max()))
            continue
        m = metric_lines.extract(cand, state)
        if cols.height:
            # A line a grammar already read (the HF notebook table's tab-separated copy) is not read twice.
            cols = cols.join(m.select("line").unique(), on="line", how="anti")
            m = pl.concat([m, _column_rows(cols)]).sort("line", "seg", maintain_order=True) if cols.height else m
        ev = signatures.extract(cand)
        bl = blocks.extract(frame, cand, year)
        read_lines.update(ev.filter(pl.col("severity") != "advice").get_column("line").to_list())
        read_lines.update(bl.get_column("end_line").to_list())
        ev = followups.complete(frame, ev, bl)  # details on the next lines, wrapped pastes, report ranks
        nvsmi_table.from_log(frame, cand, state)  # nvidia-smi tables pasted in the log -> gpu, gpu_procs
        out.add(m, [ev, bl], int(frame.get_column("line").max()))
    end = _end_events(tails, year, read_lines)
    if end.height:
        out.add(pl.DataFrame(schema=metric_lines.SCHEMA), [end], 0)
    out.close()
    return stats, state


def _counters(state: dict, rel: str, rank: int | None) -> dict:
    """The profiler summaries read from the log (key_averages tables, Lightning reports) as one counters table."""
    parts = [t["counters"] for t in (profile_table.log_tables(state, rel, rank), lightning_profile.log_tables(state, rel, rank)) if t]
    if not parts:
        return {}
    return {"counters": parts[0] if len(parts) == 1 else pa.concat_tables(parts)}


def parse(src, sn: Sniffed) -> ParseResult:
    """Parse one text log into events and metrics."""
    year = _year_of(src, sn.text if sn is not None else "")
    file_rank = rank_from_path(src.rel)
    out = _Output(src.rel, file_rank)
    stats, state = _read(src, year, out)
    result = ParseResult(rank=file_rank)
    result.tables["metrics"] = out.metrics.table()
    result.tables["events"] = out.events.table()
    result.tables.update(nvsmi_table.log_tables(state, src.rel))
    result.tables.update(_counters(state, src.rel, file_rank))
    left_out = out.problems()
    problems = stats.problems() + left_out + list(src.problems)
    if problems:
        result.status = "partial" if (src.truncated or stats.invalid_utf8 or stats.nul_bytes or stats.over_budget or left_out) else "parsed"
        result.error = "; ".join(problems)
    return result


# Blank lines put between two logs parsed joined: more than any extractor reads across lines (FINALIZE_CONTEXT_LINES,
# the follow-up and block readers), so no row of one file is decided by lines of another.
JOIN_GAP_LINES = 200


class _Joined:
    """Several small logs as one stream, read like a Source (bytes already in memory)."""

    rel = ""
    truncated = False

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.problems: list[str] = []

    def chunks(self, size: int = 32 * 1024 * 1024):
        for at in range(0, len(self.data), size):
            yield self.data[at:at + size]


def parse_many(logs: list[tuple[str, bytes]], year: int) -> tuple[dict[str, pa.Table], list[int]]:
    """Parse many small, clean logs (valid UTF-8, no NUL) of one year as one stream: a folder of 20,000 tiny logs
    pays the extractors' fixed cost once per batch, not once per file. Returns the tables, their rows in the order
    of `logs`, each with its own file name, line numbers and path rank (as `parse` gives them file by file), and
    each file's number of rows. Steps and ranks never cross files (`_f`), and the blank lines between files keep
    every look at neighbouring lines inside one file."""
    starts, parts, line = [], [], 1
    gap = b"\n" * JOIN_GAP_LINES
    for _, data in logs:
        starts.append(line)
        whole = data if data.endswith(b"\n") else data + b"\n"
        parts += [whole, gap]
        line += whole.count(b"\n") + JOIN_GAP_LINES
    ranks = [rank_from_path(rel) for rel, _ in logs]
    first = np.asarray(starts, dtype=np.int64)
    out = _Output("", None, first, ranks)
    _, state = _read(_Joined(b"".join(parts)), year, out)
    tables = {"metrics": out.metrics.table(), "events": out.events.table(), **nvsmi_table.log_tables(state, ""),
              **_counters(state, "", None)}
    rows = np.zeros(len(logs), dtype=np.int64)
    rels = pa.array([rel for rel, _ in logs], pa.string())
    for name, table in tables.items():
        tables[name], counts = _to_files(table, first, rels, ranks)
        rows += counts
    return tables, rows.tolist()


def _to_files(table: pa.Table, first: np.ndarray, rels: pa.Array, ranks: list[int | None]) -> tuple[pa.Table, np.ndarray]:
    """A table of joined logs in file order, each row with its file's name, own line number and rank; and the
    number of rows of each file."""
    if table.num_rows == 0:
        return table, np.zeros(len(first), dtype=np.int64)
    seg = np.searchsorted(first, table.column("line").to_numpy(), side="right") - 1
    order = np.argsort(seg, kind="stable")
    table, seg = table.take(pa.array(order)), seg[order]
    shift = pa.array(first[seg] - 1)

    def put(name: str, column) -> None:
        nonlocal table
        table = table.set_column(table.schema.get_field_index(name), name, column)

    put("line", pc.subtract(table.column("line"), shift))
    if "end_line" in table.column_names:
        put("end_line", pc.subtract(table.column("end_line"), shift))
    if "rank" in table.column_names:
        put("rank", pc.coalesce(table.column("rank"), pa.array(np.asarray(ranks, dtype=object)[seg], pa.int32())))
    put("file", pa.DictionaryArray.from_arrays(pa.array(seg.astype(np.int32)), rels).cast(table.schema.field("file").type))
    return table, np.bincount(seg, minlength=len(first))


def sniff(sn: Sniffed) -> int:
    """Any mostly-printable text is a log; other parsers outbid this for structured formats."""
    # A block of NUL bytes (a file preallocated, or a crash mid-write that left a hole) is no evidence either way:
    # the text around it decides. Reading drops the NULs and marks the file partial.
    sample = sn.head.replace(b"\x00", b"")[:8192] if b"\x00" in sn.head[:8192] else sn.head[:8192]
    if not sample:
        return 0
    bad = sum(1 for b in sample if b < 9 or (13 < b < 32 and b != 27))
    if bad > len(sample) * 0.05:
        return 0
    return 10


PARSER = Parser(kind="text_log", event_source=True, quotable=True, sniff=sniff, parse=parse, description="training / launcher stdout and stderr")

"""Text logs (stdout/stderr of any trainer or launcher) into `events` and `metrics`.

The hot path per chunk: one Aho-Corasick prefilter over every line (the needles of
the metric grammars, the signature table and the block openers), prefix parsing
on the survivors only, then each extractor's regexes on those. No per-line Python.
"""

from __future__ import annotations

import datetime as dt
import os

import polars as pl

from forensics.tables import conform
from parsers import blocks, metric_lines, nvsmi_table, profile_table, signatures
from parsers.base import Parser, ParseResult, Sniffed
from parsers.lines import ReadStats, iter_frames
from parsers.prefixes import rank_from_path, split_prefixes

NEEDLES: list[str] = sorted(
    set(metric_lines.NEEDLES) | set(signatures.needles()) | set(blocks.NEEDLES) | set(nvsmi_table.NEEDLES)
)

EVENT_COLS = ["line", "end_line", "ts", "rank", "step", "code", "severity", "message", "text", "fields"]
METRIC_COLS = ["line", "seg", "ts", "rank", "step", "name", "value", "source"]


def _year_of(src) -> int:
    try:
        return dt.datetime.fromtimestamp(os.stat(src.path).st_mtime, dt.timezone.utc).year
    except OSError:
        return dt.datetime.now(dt.timezone.utc).year


def candidates(frame: pl.DataFrame, year: int) -> pl.DataFrame:
    """The lines any extractor may care about, with rank, ts and msg split off."""
    cand = frame.filter(pl.col("text").str.contains_any(NEEDLES, ascii_case_insensitive=True))
    return split_prefixes(cand, year)


def carry_steps(rows: pl.DataFrame, anchors: pl.DataFrame) -> pl.DataFrame:
    """Fill a null `step` from the nearest preceding step line of the same rank, else of any rank."""
    if rows.height == 0 or anchors.height == 0:
        return rows
    anchors = (
        anchors.select(pl.col("line"), pl.col("rank").fill_null(-1).alias("_r"), pl.col("step").alias("_s"))
        .unique(subset=["line", "_r"], keep="last")
        .sort("line")
    )
    rows = rows.with_row_index("_i").with_columns(pl.col("rank").fill_null(-1).alias("_r")).sort("line")
    same = rows.join_asof(anchors, on="line", by="_r", strategy="backward", check_sortedness=False)
    anyr = rows.select("_i", "line").join_asof(anchors.drop("_r").rename({"_s": "_a"}), on="line", strategy="backward")
    out = same.join(anyr.select("_i", "_a"), on="_i").with_columns(pl.coalesce("step", "_s", "_a").alias("step"))
    return out.sort("_i").drop("_i", "_r", "_s", "_a")


def parse(src, sn: Sniffed) -> ParseResult:
    """Parse one text log into events and metrics."""
    stats = ReadStats()
    year = _year_of(src)
    ev_parts: list[pl.DataFrame] = []
    m_parts: list[pl.DataFrame] = []
    state: dict = {}  # extractor state carried across chunks (e.g. last step per rank)
    for frame in iter_frames(src, stats=stats):
        profile_table.from_log(frame, state)  # prof.key_averages().table() printouts -> counters
        cand = candidates(frame, year)
        if cand.height == 0:
            continue
        m = metric_lines.extract(cand, state)
        if m.height:
            m_parts.append(m.select(METRIC_COLS))
        ev = signatures.extract(cand)
        bl = blocks.extract(frame, cand, year)
        nvsmi_table.from_log(frame, cand, state)  # nvidia-smi tables pasted in the log -> gpu, gpu_procs
        for part in (ev, bl):
            if part.height:
                ev_parts.append(part.select(EVENT_COLS))
    file_rank = rank_from_path(src.rel)
    metrics = pl.concat(m_parts, how="vertical_relaxed") if m_parts else pl.DataFrame(schema=metric_lines.SCHEMA)
    events = pl.concat(ev_parts, how="vertical_relaxed") if ev_parts else pl.DataFrame(schema=signatures.SCHEMA)
    if file_rank is not None:
        metrics = metrics.with_columns(pl.col("rank").fill_null(file_rank))
        events = events.with_columns(pl.col("rank").fill_null(file_rank))
    metrics = metric_lines.finalize(metrics)
    anchors = metrics.filter(pl.col("step").is_not_null()).select("line", "rank", "step")
    metrics = carry_steps(metrics, anchors)
    events = carry_steps(events.sort("line"), anchors)
    result = ParseResult(rank=file_rank)
    result.tables["metrics"] = conform("metrics", metrics.with_columns(pl.lit(src.rel).alias("file")).to_arrow())
    result.tables["events"] = conform("events", events.with_columns(pl.lit(src.rel).alias("file")).to_arrow())
    result.tables.update(nvsmi_table.log_tables(state, src.rel))
    result.tables.update(profile_table.log_tables(state, src.rel, file_rank))
    problems = stats.problems() + list(src.problems)
    if problems:
        result.status = "partial" if (src.truncated or stats.invalid_utf8 or stats.nul_bytes) else "parsed"
        result.error = "; ".join(problems)
    return result


def sniff(sn: Sniffed) -> int:
    """Any mostly-printable text is a log; other parsers outbid this for structured formats."""
    if not sn.head:
        return 0
    sample = sn.head[:8192]
    bad = sum(1 for b in sample if b < 9 or (13 < b < 32 and b != 27))
    if bad > len(sample) * 0.05:
        return 0
    return 10


PARSER = Parser(kind="text_log", sniff=sniff, parse=parse, description="training / launcher stdout and stderr")

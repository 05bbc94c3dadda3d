"""Shared helpers for event-driven playbooks: select events, describe ranks, build detections."""

from __future__ import annotations

import polars as pl

from forensics.contracts.context import Context, event_count, evidence_rows, onset_of, sort_by_onset
from forensics.contracts.model import Detection, Severity


def events(ctx: Context, codes: tuple[str, ...], *, text: str | None = None) -> pl.DataFrame:
    """Events with one of `codes`, earliest first; advice lines never count as evidence.

    `text` optionally keeps only events whose message or block text matches that regex.
    """
    ev = ctx.events_of(*codes).filter(pl.col("severity") != "advice")
    if text is not None and ev.height:
        ev = ev.filter(pl.col("message").str.contains(text) | pl.col("text").str.contains(text))
    return ev


def combine(*frames: pl.DataFrame) -> pl.DataFrame:
    """Event frames of several kinds as one, each line once, earliest first (empty when all are)."""
    parts = [f for f in frames if f.height]
    if not parts:
        return frames[0].clear() if frames else pl.DataFrame()
    return sort_by_onset(pl.concat(parts, how="vertical_relaxed").unique(subset=["file", "line"], keep="first"))


def within(ctx: Context, ev: pl.DataFrame, context: str) -> pl.DataFrame:
    """Rows of `ev` whose own text, or the text of a multi-line block (a traceback) enclosing them, matches `context`.

    A generic OS error (`[Errno 28] No space left on device`) names its cause only through the frames above it.
    """
    if ev.height == 0:
        return ev
    own = ev.filter(pl.col("text").str.contains(context) | pl.col("message").str.contains(context))
    blocks = ctx.events_where((pl.col("end_line") > pl.col("line")) & pl.col("text").str.contains(context))
    if blocks.height == 0:
        return own
    joined = ev.join(blocks.select("file", pl.col("line").alias("b0"), pl.col("end_line").alias("b1")), on="file")
    inside = joined.filter((pl.col("line") >= pl.col("b0")) & (pl.col("line") <= pl.col("b1"))).select(ev.columns)
    return pl.concat([own, inside], how="vertical_relaxed").unique(subset=["file", "line"])


def ranks_of(ev: pl.DataFrame) -> list[int]:
    """The distinct ranks of some rows, sorted."""
    if "rank" not in ev.columns:
        return []
    return sorted({int(r) for r in ev.get_column("rank").unique().to_list() if r is not None})


def ranks_text(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> 'ranks 0-2, 5'; [3] -> 'rank 3'; [] -> ''."""
    if not ranks:
        return ""
    spans: list[str] = []
    start = prev = ranks[0]
    for r in ranks[1:] + [None]:  # type: ignore[list-item]
        if r is not None and r == prev + 1:
            prev = r
            continue
        spans.append(f"{start}" if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(spans)


def where(row: dict) -> str:
    """' on rank 3 at step 120' from a row's rank and step (parts omitted when unknown)."""
    out = ""
    if row.get("rank") is not None:
        out += f" on rank {row['rank']}"
    if row.get("step") is not None:
        out += f" at step {row['step']}"
    return out


def detection(ev: pl.DataFrame, summary: str, causes: dict[str, float], *, confidence: float = 0.9,
              severity: Severity | None = None, facts: dict | None = None, lead: pl.DataFrame | None = None) -> Detection:
    """A Detection whose onset and evidence are the (onset-sorted) events `ev`.

    `lead`: rows of `ev` to quote first because they prove most (a limit hit before the many
    recompiles that led to it); without one, the first row of each event code leads. The onset
    stays the earliest row of `ev`.
    """
    quoted = ev
    if (lead is None or lead.height == 0) and "code" in ev.columns and ev.height > 1:
        # The first line of each kind before the repeats: 64 identical kernel asserts must not crowd
        # out the error they caused.
        lead = ev.unique("code", keep="first", maintain_order=True)
    if lead is not None and lead.height:
        rest = ev.join(lead.select("file", "line"), on=["file", "line"], how="anti")
        quoted = pl.concat([lead.select(ev.columns), rest], how="vertical_relaxed")
    return Detection(
        summary=summary,
        onset=onset_of(ev),
        evidence=evidence_rows(quoted),
        evidence_count=event_count(ev),
        causes=causes,
        confidence=confidence,
        severity=severity,
        facts=facts or {},
        ranks=ranks_of(ev),
    )


def first_message(ev: pl.DataFrame) -> str:
    """The message of the first event, trimmed for a summary."""
    msg = str(ev.get_column("message")[0] or "")
    return msg if len(msg) <= 160 else msg[:157] + "..."

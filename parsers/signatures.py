"""The signature table (signatures.toml) applied to candidate lines: one event per match.

Work per chunk: one Aho-Corasick pass finds which needles each candidate line holds,
then each signature's regex runs only on the lines holding one of its needles. The
named groups become the `fields` JSON object; `fallback` and `advice` signatures give
way to more specific matches on the same line (see the header of signatures.toml).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import polars as pl
from forensics.parsers import shapes

from forensics.contracts.fields import size_to_mib

SCHEMA = {
    "line": pl.Int64,
    "end_line": pl.Int64,
    "ts": pl.Datetime("us", "UTC"),
    "rank": pl.Int32,
    "step": pl.Int64,
    "code": pl.String,
    "severity": pl.String,
    "message": pl.String,
    "text": pl.String,
    "fields": pl.String,
}

TABLE = Path(__file__).with_name("signatures.toml")
SEVERITIES = ("error", "warning", "info", "advice")
# A Python source line as a traceback quotes it: indented `raise` / `assert`.
SOURCE_LINE = r"(?:^|\s)\s{3}(?:raise|assert) "
# Worker prefixes that name a rank but that the prefix splitter leaves on the line: vLLM `(VllmWorker rank=3 pid=4665) `.
RANK_IN_LINE = r"^\(\w+ rank=(\d+) pid=\d+\)"
_CODE_RE = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Signature:
    """One recognisable message form."""

    code: str
    severity: str
    needles: tuple[str, ...]
    regex: str
    source: str = ""
    fallback: bool = False
    unless: str | None = None  # a line that also matches this regex is not this form
    const: dict = field(default_factory=dict, hash=False, compare=False)
    derive: dict = field(default_factory=dict, hash=False, compare=False)
    at_end: bool = False  # matched only against a log's last non-blank line (extract_at_end), never line by line
    # An `at_end` form may also stand this many lines from the end (a paste's last stray prints after it), when no
    # line after it holds a digit: a line without a number reports no step, count or metric (extract_at_end).
    within: int = 1

    @property
    def groups(self) -> list[str]:
        """Named capture groups of the regex, in order."""
        return list(re.compile(self.regex).groupindex)


def _expand(regex: str, macros: dict[str, str]) -> str:
    for name, value in macros.items():
        regex = regex.replace(f"%{name}%", value)
    return regex


def _check(sig: Signature) -> None:
    """Reject table rows that would silently misbehave (a typo in data is a bug too)."""
    where = f"signature {sig.code!r} ({sig.source})"
    if not _CODE_RE.match(sig.code):
        raise ValueError(f"{where}: code must be snake_case")
    if sig.severity not in SEVERITIES:
        raise ValueError(f"{where}: severity must be one of {SEVERITIES}")
    if not sig.needles or any(not n for n in sig.needles):
        raise ValueError(f"{where}: needs at least one non-empty needle")
    if sig.unless is not None and re.compile(sig.unless).groups:
        raise ValueError(f"{where}: `unless` must not capture; use (?:...)")
    if sig.within != 1 and not (sig.at_end and sig.within > 1):
        raise ValueError(f"{where}: `within` is for `at_end` forms only, and counts lines (> 1)")
    compiled = re.compile(sig.regex)
    if compiled.groups != len(compiled.groupindex):
        raise ValueError(f"{where}: only named groups may capture; use (?:...)")


@lru_cache(maxsize=1)
def load() -> tuple[Signature, ...]:
    """The signature table, in file order (every match is kept, subject to fallback/advice rules)."""
    data = tomllib.loads(TABLE.read_text(encoding="utf-8"))
    macros = data.get("macros", {})
    out = []
    for s in data["signature"]:
        sig = Signature(
            code=s["code"],
            severity=s["severity"],
            needles=tuple(s["needles"]),
            regex=_expand(s["regex"], macros),
            source=s.get("source", ""),
            fallback=bool(s.get("fallback", False)),
            unless=_expand(s["unless"], macros) if "unless" in s else None,
            const=dict(s.get("const", {})),
            derive={k: dict(v) for k, v in s.get("derive", {}).items()},
            at_end=bool(s.get("at_end", False)),
            within=int(s.get("within", 1)),
        )
        _check(sig)
        out.append(sig)
    return tuple(out)


def codes() -> list[str]:
    """Every event code of the table."""
    return sorted({s.code for s in load()})


def needles() -> list[str]:
    """First-stage prefilter needles: the table's families plus every needle no family covers.

    Every line that holds a signature needle holds one of these (a superset, by construction).
    """
    return list(_stage_one())


@lru_cache(maxsize=1)
def _stage_one() -> tuple[str, ...]:
    data = tomllib.loads(TABLE.read_text(encoding="utf-8"))
    families = [f.lower() for f in data.get("prefilter", {}).get("families", [])]
    uncovered = {n.lower() for s in load() if not s.at_end for n in s.needles if not any(f in n.lower() for f in families)}
    return tuple(sorted(set(families) | uncovered))


@lru_cache(maxsize=1)
def _needle_index() -> tuple[list[str], pl.DataFrame]:
    """Distinct needles (case-folded) and the (needle, signature index) pairs they select."""
    pairs = [(n.lower(), i) for i, s in enumerate(load()) if not s.at_end for n in s.needles]
    uniq = sorted({n for n, _ in pairs})
    return uniq, pl.DataFrame(pairs, schema={"_n": pl.String, "_sig": pl.Int32}, orient="row").unique()


# ---------------------------------------------------------------------------------------------
# Sizes: "20.00 MiB", "0 bytes", "4.00 GiB" -> MiB (vectorised), for playbooks and `derive.sub`.
# ---------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------


def _json_object(names: list[str]) -> pl.Expr:
    """A JSON object {name: value} of the string columns `f_<name>`, leaving out nulls."""
    if not names:
        return pl.lit("{}")
    # Each member is encoded by polars' JSON writer (correct escaping), then its braces dropped.
    members = [
        pl.when(pl.col(f"f_{n}").is_not_null()).then(
            pl.struct(pl.col(f"f_{n}").alias(n)).struct.json_encode().str.slice(1).str.strip_suffix("}")
        )
        for n in names
    ]
    return pl.lit("{") + pl.concat_str(members, separator=",", ignore_nulls=True) + pl.lit("}")


def _derive(rows: pl.DataFrame, sig: Signature) -> pl.DataFrame:
    """Add the signature's derived fields (columns `f_<name>`)."""
    exprs = []
    for name, spec in sig.derive.items():
        if "sub" in spec:
            a, b = (pl.col(f"f_{x}") for x in spec["sub"])
            mib = size_to_mib(a) - size_to_mib(b)
            value = pl.format("{} MiB", mib.round(2))
        elif spec.get("all"):
            pattern = spec["regex"]
            value = (
                pl.col(f"f_{spec['from']}")
                .str.extract_all(pattern)
                .list.eval(pl.element().str.extract(pattern, 1))
                .list.join(",")
            )
            value = pl.when(value.str.len_bytes() > 0).then(value)
        else:
            value = pl.col(f"f_{spec['from']}").str.extract(spec["regex"], 1)
        col = f"f_{name}"
        if col in rows.columns:
            value = pl.coalesce(pl.col(col), value)
        exprs.append(value.cast(pl.String).alias(col))
    return rows.with_columns(exprs) if exprs else rows


def _apply(rows: pl.DataFrame, sig: Signature) -> pl.DataFrame:
    """Rows (candidate lines holding a needle) that match `sig`, as event rows."""
    rows = rows.filter(pl.col("msg").str.contains(sig.regex))
    if sig.unless is not None and rows.height:
        rows = rows.filter(~pl.col("msg").str.contains(sig.unless))
    if rows.height == 0:
        return rows
    groups = sig.groups
    if groups:
        extracted = pl.col("msg").str.extract_groups(sig.regex).struct.rename_fields([f"f_{g}" for g in groups])
        rows = rows.with_columns(extracted.alias("_g")).unnest("_g")
        # An empty capture carries nothing; treat it as absent.
        rows = rows.with_columns(
            [pl.when(pl.col(f"f_{g}").str.len_bytes() > 0).then(pl.col(f"f_{g}")).alias(f"f_{g}") for g in groups]
        )
    rows = rows.with_columns([pl.lit(str(v)).alias(f"f_{k}") for k, v in sig.const.items()])
    rows = _derive(rows, sig)
    names = list(dict.fromkeys([*groups, *sig.derive, *sig.const]))
    # A rank / step named in the text fills the event's own when the line's prefix gave none.
    rank = pl.coalesce("rank", pl.col("text").str.extract(RANK_IN_LINE, 1).cast(pl.Int32, strict=False))
    if "rank" in names:
        # The prefix splitter peels a leading `[Rank N] `; keep the rank in the fields all the same.
        named = pl.col("f_rank").cast(pl.Int32, strict=False)
        if "pg" in names:
            # ProcessGroupNCCL's `Rank N` of a group other than the default one (`pg` 0) is a rank within that
            # group, not a global rank (see prefixes._PG_RANK): it stays in the fields only.
            named = pl.when(pl.col("f_pg").fill_null("0") == "0").then(named)
        rank = pl.coalesce(rank, named)
        rows = rows.with_columns(pl.coalesce("f_rank", pl.col("rank").cast(pl.String)).alias("f_rank"))
    step = pl.col("f_step").cast(pl.Int64, strict=False) if "step" in names else pl.lit(None, pl.Int64)
    ts = pl.col("ts")
    if "kernel_time" in names:
        # `dmesg -T` prints local wall-clock time in ctime form; like other zone-less stamps it is read as UTC.
        ctime = pl.col("f_kernel_time").str.replace_all(r"\s+", " ").str.to_datetime("%a %b %d %H:%M:%S %Y", strict=False)
        ts = pl.coalesce(ts, ctime.dt.replace_time_zone("UTC"))
    return rows.select(
        "line",
        "seg",
        pl.col("line").alias("end_line"),
        ts.alias("ts"),
        rank.cast(pl.Int32).alias("rank"),
        step.alias("step"),
        pl.lit(sig.code).alias("code"),
        pl.lit(sig.severity).alias("severity"),
        pl.col("msg").alias("message"),
        "text",
        _json_object(names).alias("fields"),
        pl.lit(sig.fallback).alias("_fallback"),
    )


def _resolve(events: pl.DataFrame) -> pl.DataFrame:
    """Apply the precedence rules: fallback gives way to specific, advice to any non-advice match."""
    key = ["line", "seg"]
    specific = events.filter(~pl.col("_fallback") & (pl.col("severity") != "advice")).select(key).unique()
    non_advice = events.filter(pl.col("severity") != "advice").select(key).unique()
    fallback = events.filter(pl.col("_fallback") & (pl.col("severity") != "advice")).join(specific, on=key, how="anti")
    advice = events.filter(pl.col("severity") == "advice").join(non_advice, on=key, how="anti")
    kept = events.filter(~pl.col("_fallback") & (pl.col("severity") != "advice"))
    # Stable: events of one line keep the signature table's order (a plain sort breaks ties differently per run).
    return pl.concat([kept, fallback, advice]).sort("line", "seg", maintain_order=True)


def extract(cand: pl.DataFrame) -> pl.DataFrame:
    """One event row per (line, signature) match among the candidate lines.

    `cand` has columns line, seg, text, rank, ts, msg (the line without its prefixes).
    """
    uniq, pairs = _needle_index()
    # Two stages: the few family words over every candidate line, then the full needle list on the survivors.
    hits = cand.filter(shapes.contains_any(cand, list(_stage_one()), ascii_case_insensitive=True))
    hits = hits.filter(shapes.contains_any(hits, uniq, ascii_case_insensitive=True))
    # Source lines quoted in a traceback (`    raise RuntimeError("... out of memory")`) are code, not events.
    # (A second pass over the few hits only: the regex is costlier than the Aho-Corasick scan.)
    hits = hits.filter(~pl.col("msg").str.contains(SOURCE_LINE))
    if hits.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    hits = hits.with_row_index("_i")
    # Which signatures each line can match: the needles it holds, folded, joined to their signatures.
    found = (
        hits.select("_i", pl.col("msg").str.extract_many(uniq, ascii_case_insensitive=True, overlapping=True).alias("_n"))
        .explode("_n")
        .drop_nulls("_n")
        .with_columns(pl.col("_n").str.to_lowercase())
        .join(pairs, on="_n")
        .select("_i", "_sig")
        .unique()
        .sort("_sig", "_i")  # table order, so one line's events come out in the same order on every run
    )
    sigs = load()
    parts = []
    for (sig_idx,), idx in found.group_by("_sig", maintain_order=True):
        rows = hits.join(idx.select("_i"), on="_i", how="semi")
        part = _apply(rows, sigs[sig_idx])
        if part.height:
            parts.append(part)
    if not parts:
        return pl.DataFrame(schema=SCHEMA)
    events = _resolve(pl.concat(parts, how="vertical_relaxed"))
    return events.select(list(SCHEMA)).cast(SCHEMA)


def at_end_reach() -> int:
    """How many of a log's last non-blank lines the `at_end` forms read."""
    return max([s.within for s in load() if s.at_end], default=1)


def extract_at_end(last: pl.DataFrame) -> pl.DataFrame:
    """Events of the `at_end` signatures on the last non-blank line of each log (`last`: prefix-split rows, as for
    `extract`): where a log stops is evidence only there (a bar at 0 items mid-log is every epoch's start).

    `last` may hold a log's last few lines, with `_after` (non-blank lines after the row in its log) and
    `_digit_after` (whether one of them holds a digit): a form with `within` > 1 also reads a row up to that many
    lines from the end when nothing after it holds a number; every other form reads the last line only.
    """
    sigs = [s for s in load() if s.at_end]
    if last.height == 0 or not sigs:
        return pl.DataFrame(schema=SCHEMA)
    if "_after" not in last.columns:
        last = last.with_columns(pl.lit(0).alias("_after"), pl.lit(False).alias("_digit_after"))
    found = []
    for sig in sigs:
        reach = (pl.col("_after") == 0) | ((pl.col("_after") < sig.within) & ~pl.col("_digit_after"))
        rows = last.filter(reach & pl.col("msg").str.contains_any(list(sig.needles), ascii_case_insensitive=True))
        if rows.height:
            found.append(_apply(rows, sig))
    found = [f for f in found if f.height]
    if not found:
        return pl.DataFrame(schema=SCHEMA)
    return _resolve(pl.concat(found, how="vertical_relaxed")).select(list(SCHEMA)).cast(SCHEMA)

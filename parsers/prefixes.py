"""Log-record and rank prefixes: peel them off a line, keeping the rank and the timestamp.

Formats follow reference/formats.md §0.1 and §2.5 (DeepSpeed, torch logging old and
glog-style, c10 C++ logging old and new, torchtitan, fairseq, HF example scripts,
mmengine, Python logging defaults, torchrun `--tee` and excepthook rank prefixes).
Timestamps without a zone are taken as UTC; glog-style `MMDD` stamps get their year
from the caller (the file's modification time).
"""

from __future__ import annotations

import re

import polars as pl

_LVL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
# Leading rank prefixes: `[rank3]:`, `[rank3]: `, `[default3]:`, `[Rank 3] `, `[RANK:3] `; may repeat.
# Pasted logs may put a line counter (`[80746] [rank0]:`, LlamaFactory#7396) or indentation before them.
RANK_PREFIX = r"^(?:\s+|\[\d+\] )?\[(?:rank|default|Rank |RANK:|RANK )(\d+)\]:?\s?"
# Rank markers inside a message: ProcessGroupNCCL's `[PG 0 Rank 3]`, `[PG ID 0 PG GUID 0(default_pg) Rank 3]`.
INNER_RANK = r"\[PG (?:ID )?\d+ (?:PG GUID \S+ )?Rank (\d+)\]|^\[Rank (\d+)\]"

# (name, pattern with a `ts` group where the prefix has a time, kind of time stamp)
LOG_PREFIXES: list[tuple[str, str, str]] = [
    ("bracket_iso", rf"^\[(?P<ts>\d{{4}}-\d{{2}}-\d{{2}}[ T]\d{{2}}:\d{{2}}:\d{{2}}(?:[.,]\d{{1,9}})?)\]\s*(?:\[{_LVL}\]\s*(?:\[[^\]]*\]\s*)*|[\w.]+: \[{_LVL}\]\s*)?", "ymd"),
    ("glog", r"^[VIWEFC](?P<ts>\d{3,4} \d{2}:\d{2}:\d{2}\.\d{6}) +\d+ [^\]\s]+:\d+\] ", "md"),
    ("c10_new", r"^\[[VIWEFC](?P<ts>\d{3,4} \d{2}:\d{2}:\d{2}\.\d{6,9}) [^\]\s]+:\d+\] ", "md"),
    ("c10_old", r"^\[[VIWEFC] [^\]\s]+:\d+\] ", ""),
    ("titan", rf"^\[titan\] (?P<ts>\d{{4}}-\d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}},\d{{3}}) - \S+ - {_LVL} - ", "ymd"),
    ("fairseq", rf"^(?P<ts>\d{{4}}-\d{{2}}-\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}) \| {_LVL} \| [\w.]+ \| ", "ymd"),
    ("hf_example", rf"^(?P<ts>\d{{2}}/\d{{2}}/\d{{4}} \d{{2}}:\d{{2}}:\d{{2}}) - {_LVL} - \S+ -\s+", "mdy"),
    ("mmengine", rf"^(?P<ts>\d{{2}}/\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}) - \S+ - {_LVL} - ", "md_slash"),
    ("iso", rf"^(?P<ts>\d{{4}}-\d{{2}}-\d{{2}}[T ]\d{{2}}:\d{{2}}:\d{{2}}(?:[.,]\d{{1,9}})?(?:Z|[+-]\d{{2}}:?\d{{2}})?)(?:\s*[|-]\s*|\s+)(?:\[?{_LVL}\]?\s*[:|-]?\s*(?:[\w.]+\s*[:|-]\s+)?)?", "ymd"),
    ("pylogging", rf"^{_LVL}:[\w.]+:", ""),
    ("colossalai", rf"^colossalai - \S+ - {_LVL}: ", ""),
]

_ALL = "|".join(f"(?:{p})" for _, p, _ in LOG_PREFIXES)
ANY_LOG_PREFIX = re.sub(r"\?P<ts>", "?:", _ALL)


def _ts_expr(raw: pl.Expr, kind: str, year: int) -> pl.Expr:
    """Turn the captured stamp into ISO `YYYY-MM-DD HH:MM:SS.ffffff` text, by stamp kind."""
    if kind == "ymd":
        iso = raw.str.replace("T", " ", literal=True).str.replace(",", ".", literal=True)
    elif kind == "md":
        # c10 logging prints the month without zero padding (`E810` is 10 August).
        raw = raw.str.replace(r"^(\d{3}) ", "0$1 ")
        iso = pl.lit(f"{year}-") + raw.str.slice(0, 2) + pl.lit("-") + raw.str.slice(2, 2) + raw.str.slice(4)
    elif kind == "mdy":
        iso = raw.str.slice(6, 4) + pl.lit("-") + raw.str.slice(0, 2) + pl.lit("-") + raw.str.slice(3, 2) + raw.str.slice(10)
    elif kind == "md_slash":
        iso = pl.lit(f"{year}-") + raw.str.slice(0, 2) + pl.lit("-") + raw.str.slice(3, 2) + raw.str.slice(5)
    else:
        return pl.lit(None, pl.String)
    return iso


_ZONE_RE = r"(?:Z|[+-]\d{2}:?\d{2})$"


def parse_iso(iso: pl.Expr) -> pl.Expr:
    """ISO-ish text (optional fraction of up to 9 digits, optional Z or ±hh:mm) to UTC microseconds."""
    offset = iso.str.extract(r"([+-]\d{2}):?(\d{2})$", 1).cast(pl.Int64, strict=False)
    offset_m = iso.str.extract(r"[+-]\d{2}:?(\d{2})$", 1).cast(pl.Int64, strict=False)
    base = iso.str.replace(_ZONE_RE, "").str.replace(r"(\.\d{6})\d+$", "$1")
    naive = base.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    naive = pl.coalesce(naive, base.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us"))
    minutes = offset * 60 + offset.sign() * offset_m
    shifted = naive - pl.duration(minutes=minutes.fill_null(0))
    return shifted.dt.replace_time_zone("UTC")


def _parse_iso_series(iso: pl.Series) -> pl.Series:
    """`parse_iso` on a materialised column, skipping the zone and long-fraction work when no row needs it."""
    if iso.null_count() == iso.len():
        return pl.Series(iso.name, [None] * iso.len(), dtype=pl.Datetime("us", "UTC"))
    if iso.str.contains(_ZONE_RE).any():
        return iso.to_frame("iso").select(parse_iso(pl.col("iso"))).to_series().alias(iso.name)
    # No zone suffix anywhere: parse_iso reduces to the naive parse (same formats, same fallbacks).
    base = iso.str.replace(r"(\.\d{6})\d+$", "$1") if iso.str.contains(r"\.\d{7}").any() else iso
    naive = base.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    missing = naive.is_null() & base.is_not_null()
    if missing.any():
        naive = pl.coalesce(naive, base.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us"))
    return naive.dt.replace_time_zone("UTC").alias(iso.name)


# For each prefix, a regex whose group 1 is exactly the `ts` group of the full pattern whenever
# the full pattern matches: it stops right after the stamp, at a character the stamp cannot
# contain, so no backtracking of the rest could give the group another extent. Capturing on
# this short span costs a fraction of capturing the whole prefix. (`iso` is not listed: its
# optional zone can be given back to its separator, so it is captured with the full pattern.)
_TS_NARROW = {
    "bracket_iso": r"^\[(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?)\]",
    "glog": r"^[VIWEFC](\d{3,4} \d{2}:\d{2}:\d{2}\.\d{6}) ",
    "c10_new": r"^\[[VIWEFC](\d{3,4} \d{2}:\d{2}:\d{2}\.\d{6,9}) ",
    "titan": r"^\[titan\] (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) ",
    "fairseq": r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) ",
    "hf_example": r"^(\d{2}/\d{2}/\d{4} \d{2}:\d{2}:\d{2}) ",
    "mmengine": r"^(\d{2}/\d{2} \d{2}:\d{2}:\d{2}) ",
}
# INNER_RANK without its second alternative (`^\[Rank N\]`), which RANK_PREFIX always claims first.
_PG_RANK = r"\[PG (?:ID )?\d+ (?:PG GUID \S+ )?Rank (\d+)\]"


def _peel_rank(msg: pl.Series, ranks: list[pl.Series]) -> tuple[pl.Series, bool]:
    """Remove one leading rank prefix where there is one, noting its rank; False when no row had one."""
    found = msg.str.extract(RANK_PREFIX, 1)
    if found.null_count() == found.len():
        return msg, False
    ranks.append(found.cast(pl.Int32, strict=False))
    return msg.str.replace(RANK_PREFIX, ""), True


# The characters a line can start with for each time-stamped prefix to match (a prefix whose
# first character is absent from a frame is not tried). A prefix not listed is always tried.
_FIRST_CHARS = {
    "bracket_iso": "[",
    "glog": "VIWEFC",
    "c10_new": "[",
    "titan": "[",
    "fairseq": "0123456789",
    "hf_example": "0123456789",
    "mmengine": "0123456789",
    "iso": "0123456789",
}


def _stamps(msg: pl.Series, year: int) -> pl.Series:
    """Each line's time stamp from the first log-record prefix (in LOG_PREFIXES order) that matches it.

    A prefix is tried only on the lines no earlier prefix claimed, and stamps are converted and
    parsed only for the lines that have one.
    """
    n = msg.len()
    firsts = set(msg.str.slice(0, 1).unique().drop_nulls().to_list())
    rest_idx: pl.Series | None = None  # rows not yet claimed (None: all rows)
    rest = msg
    idx_parts: list[pl.Series] = []
    iso_parts: list[pl.Series] = []
    for name, pattern, kind in LOG_PREFIXES:
        if not kind or rest.len() == 0:
            continue
        chars = _FIRST_CHARS.get(name)
        if chars is not None and not firsts.intersection(chars):
            continue
        hit = rest.str.contains(pattern)
        if not hit.any():
            continue
        pos = hit.arg_true()
        raw = rest.gather(pos).str.extract(_TS_NARROW.get(name) or pattern, 1)
        iso_parts.append(pl.select(_ts_expr(pl.lit(raw), kind, year)).to_series())
        idx_parts.append(pos if rest_idx is None else rest_idx.gather(pos))
        keep = ~hit
        rest_idx = keep.arg_true() if rest_idx is None else rest_idx.filter(keep)
        rest = rest.filter(keep)
    ts = pl.Series("ts", [None] * n, dtype=pl.Datetime("us", "UTC"))
    if idx_parts:
        idx = pl.concat(idx_parts)
        ts = ts.scatter(idx, _parse_iso_series(pl.concat(iso_parts).alias("iso")))
    return ts


def split_prefixes(df: pl.DataFrame, year: int) -> pl.DataFrame:
    """Add `rank`, `ts` and `msg` (the text without its prefixes) to a frame with `text`.

    Work is per column, and a step no row of the frame needs is skipped (a file without
    rank prefixes never pays for them), so the cost follows what the lines contain.
    """
    msg = df.get_column("text")
    ranks: list[pl.Series] = []
    # Rank prefixes may stack (`[default0]:[rank0]: `), so peel twice.
    msg, more = _peel_rank(msg, ranks)
    if more:
        msg, _ = _peel_rank(msg, ranks)
    ts = _stamps(msg, year)
    msg = msg.str.replace(ANY_LOG_PREFIX, "")
    # After the record prefix: another rank prefix, or ProcessGroupNCCL's rank marker.
    pg = msg.str.extract(_PG_RANK, 1).cast(pl.Int32, strict=False) if msg.str.contains("[PG ", literal=True).any() else None
    msg, _ = _peel_rank(msg, ranks)
    if pg is not None:
        ranks.append(pg)
    if ranks:
        rank = pl.select(pl.coalesce(ranks)).to_series() if len(ranks) > 1 else ranks[0]
    else:
        rank = pl.Series([None] * msg.len(), dtype=pl.Int32)
    return df.with_columns(msg.alias("msg"), rank.alias("rank"), ts.alias("ts"))


# File names that carry a rank: rank3.log, node1-rank12.out, worker_3.err, torchrun --log-dir `attempt_0/3/stderr.log`.
_PATH_RANK = [
    re.compile(r"(?:^|[^a-z])(?:global_?)?rank[_-]?(\d+)(?![0-9])", re.I),
    re.compile(r"(?:^|[^a-z])(?:worker|proc|process|gpu|device)[_-]?(\d+)(?![0-9])", re.I),
    re.compile(r"attempt_\d+/(\d+)/(?:stdout|stderr|error)\.(?:log|json)$"),
    re.compile(r"(?:^|/)(?:default|trainer)(\d+)[./]"),
]


def rank_from_path(rel: str) -> int | None:
    """The rank a file belongs to, from its path, or None."""
    name = rel.replace("\\", "/")
    base = name.rsplit("/", 1)[-1]
    for pattern in _PATH_RANK:
        m = pattern.search(base) or pattern.search(name)
        if m:
            return int(m.group(1))
    return None

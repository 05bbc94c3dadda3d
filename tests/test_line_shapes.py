"""Regex work done once per line shape (parsers/shapes.py) gives exactly what it gives line by line."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from forensics.parsers import metric_lines, shapes, signatures
from forensics.parsers.metric_grammars import tqdm as tqdm_grammar

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


@pytest.fixture(scope="module")
def sample_lines() -> pl.DataFrame:
    """Every distinct line of the sample logs (real formats of every family), with its shape."""
    seen: set[str] = set()
    for path in sorted(SAMPLES.rglob("*.log")):
        for raw in path.read_text(encoding="utf-8", errors="replace").replace("\r", "\n").split("\n"):
            seen.add(raw)
    df = pl.DataFrame({"msg": sorted(seen)})
    return shapes.with_shape(df)


def test_shape_keeps_length_and_masks_only_digits() -> None:
    s = pl.Series(["iter 1234: loss 9.87, lr 3e-05 █▌ 12/50", "no digits", "٣ arabic-indic ٣"])
    shaped = shapes.mask(s).cast(pl.String)
    assert shaped.to_list() == ["iter 0000: loss 0.00, lr 0e-00 █▌ 00/00", "no digits", "٣ arabic-indic ٣"]


@pytest.mark.parametrize(
    ("pattern", "blind"),
    [
        (r"iteration\s+(\d+)/\s*(\d+) \|", True),
        (r"(?P<v>[-+]?[\d.]+(?:[eE][-+]?\d+)?)", True),
        (r"[0-9a-f]+|\w+", True),
        (r"\b(20\d{2})-", False),  # a literal digit
        (r"[1-9]\d*", False),  # a class holding some digits only
        (r"fp16", False),
        (r"(a)\1", False),  # a back-reference
    ],
)
def test_digit_blind(pattern: str, blind: bool) -> None:
    assert shapes.digit_blind(pattern) is blind


def test_contains_by_shape_equals_line_by_line(sample_lines: pl.DataFrame) -> None:
    patterns = [metric_lines._MATCH[g] for g in metric_lines._MATCH] + [s.regex for s in signatures.load()]
    used = 0
    for pattern in patterns:
        direct = sample_lines.get_column("msg").str.contains(pattern)
        assert shapes.contains(sample_lines, pattern).to_list() == direct.to_list(), pattern
        used += shapes.digit_blind(pattern)
    assert used > len(patterns) // 2  # most of the table does run by shape


def test_contains_any_by_shape_equals_line_by_line(sample_lines: pl.DataFrame) -> None:
    uniq, _ = signatures._needle_index()
    for needles in (uniq, list(signatures._stage_one()), metric_lines.NEEDLES, ["fp16", "2-d", "NVIDIA-SMI 5"]):
        direct = sample_lines.get_column("msg").str.contains_any(needles, ascii_case_insensitive=True)
        assert shapes.contains_any(sample_lines, needles, ascii_case_insensitive=True).to_list() == direct.to_list()


def test_digit_needle_near_miss_stays_quiet() -> None:
    df = shapes.with_shape(pl.DataFrame({"msg": ["cast to fp32 done", "cast to fp16 done", "bf16"]}))
    assert shapes.contains_any(df, ["fp16"]).to_list() == [False, True, False]


def test_extract_groups_by_shape_equals_line_by_line(sample_lines: pl.DataFrame) -> None:
    patterns = [tqdm_grammar.BAR] + [s.regex for s in signatures.load() if s.groups]
    done = 0
    for pattern in patterns:
        got = shapes.extract_groups(sample_lines, pattern)
        if got is None:
            continue
        done += 1
        direct = sample_lines.select(pl.col("msg").str.extract_groups(pattern).alias("_g")).unnest("_g")
        assert got.equals(direct), pattern
    assert done > len(patterns) // 2

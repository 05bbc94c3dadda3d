"""Line shapes: a line with every ASCII digit written as `0`, so regex work runs once per distinct shape.

A log repeats a few hundred shapes in millions of lines. A regex whose every literal and character
class treats the ten digits alike (`\\d`, `[\\d.]`, `\\w`, `.`, no literal digit, no `[1-9]`) cannot
tell a line from its shape: it matches both or neither, at the same offsets, with the same capture
offsets. Such a regex is run on the distinct shapes only; its answer is broadcast to every line of
a shape, and captures are cut from each line at the offsets found in its shape. Any other regex
(and any needle holding a digit) runs on the lines themselves, so results never differ.
"""

from __future__ import annotations

import re
from functools import lru_cache

import polars as pl
import pyarrow as pa

SHAPE = "_shape"
_DIGITS = frozenset("0123456789")
_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_TO_ZERO_STR = str.maketrans("123456789", "000000000")


def mask(text: pl.Series) -> pl.Series:
    """The shape of every line: ASCII digits 1-9 become `0` (same length, same byte offsets).

    Done on the Arrow data buffer in one `bytes.translate`: no regex, no per-line Python. The result is
    categorical: each distinct shape is hashed once here, and `unique` / `is_in` then work on its codes.
    Its categories are private to this call (polars' global ones would keep every shape of the process).
    """
    arr = text.to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    validity, offsets, data = arr.buffers()
    if data is None:
        return text.alias(SHAPE).cast(pl.Categorical(pl.Categories.random()))
    shaped = pa.py_buffer(data.to_pybytes().translate(_TO_ZERO))
    out = pa.LargeStringArray.from_buffers(len(arr), offsets, shaped, validity, arr.null_count, arr.offset)
    return pl.Series(SHAPE, out).cast(pl.Categorical(pl.Categories.random()))


def with_shape(df: pl.DataFrame, col: str = "msg") -> pl.DataFrame:
    """`df` with the SHAPE column of `col`."""
    return df.with_columns(mask(df.get_column(col)))


def _digits_alike(items: list, negated: bool = False) -> bool:
    """Whether a parsed character class holds all ten digits or none of them."""
    held = set()
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            if chr(arg) in _DIGITS:
                held.add(chr(arg))
        elif name == "RANGE":
            held.update(d for d in _DIGITS if arg[0] <= ord(d) <= arg[1])
        elif name == "CATEGORY":
            continue  # \d \D \w \W \s \S: each treats every digit alike
        elif name == "NEGATE":
            continue
        else:
            return False
    return len(held) in (0, 10)


def _alike(tree) -> bool:
    """Whether a parsed regex (re._parser) treats the ten ASCII digits alike everywhere."""
    for op, arg in tree:
        name = str(op)
        if name in ("LITERAL", "NOT_LITERAL"):
            if chr(arg) in _DIGITS:
                return False
        elif name == "IN":
            if not _digits_alike(arg):
                return False
        elif name in ("ANY", "AT", "CATEGORY"):
            continue
        elif name == "SUBPATTERN":
            if not _alike(arg[-1]):
                return False
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            if not _alike(arg[2]):
                return False
        elif name == "BRANCH":
            if not all(_alike(b) for b in arg[1]):
                return False
        elif name == "ATOMIC_GROUP":
            if not _alike(arg):
                return False
        else:  # back-references, look-around: not in Rust regex, never shaped
            return False
    return True


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern | None:
    """`pattern` compiled by Python when it is digit-blind (see the module doc), else None."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        tree = _parser.parse(pattern)
        compiled = re.compile(pattern)
    except (re.error, ImportError, OverflowError, RecursionError):
        return None
    return compiled if _alike(tree) else None


def digit_blind(pattern: str) -> bool:
    """Whether `pattern` gives a line and its shape the same answer (see the module doc)."""
    return _compiled(pattern) is not None


def contains(df: pl.DataFrame, pattern: str, col: str = "msg") -> pl.Series:
    """`df[col].str.contains(pattern)`, run on the distinct shapes when `df` has them and the regex allows."""
    if SHAPE not in df.columns or not digit_blind(pattern):
        return df.get_column(col).str.contains(pattern)
    return _broadcast(df, lambda uniq: uniq.str.contains(pattern))


def _broadcast(df: pl.DataFrame, test) -> pl.Series:
    """`test` (a String series -> Boolean series) of each distinct shape, given to every line of that shape."""
    shapes = df.get_column(SHAPE)
    uniq = shapes.unique()
    return shapes.is_in(uniq.filter(test(uniq.cast(pl.String))).implode())


def contains_any(df: pl.DataFrame, needles: list[str], col: str = "msg", ascii_case_insensitive: bool = False) -> pl.Series:
    """`df[col].str.contains_any(needles)`: needles without a digit on the distinct shapes, the others on the lines."""
    if SHAPE not in df.columns:
        return df.get_column(col).str.contains_any(needles, ascii_case_insensitive=ascii_case_insensitive)
    plain = [n for n in needles if not _DIGITS & set(n)]
    digital = [n for n in needles if _DIGITS & set(n)]
    out = (_broadcast(df, lambda uniq: uniq.str.contains_any(plain, ascii_case_insensitive=ascii_case_insensitive))
           if plain else pl.Series(SHAPE, [False] * df.height, pl.Boolean))
    if digital:
        # A line holding a needle has the needle's shape in its shape: only those lines are searched.
        shaped = [n.translate(_TO_ZERO_STR) for n in digital]
        maybe = _broadcast(df, lambda uniq: uniq.str.contains_any(shaped, ascii_case_insensitive=ascii_case_insensitive))
        if maybe.any():
            pos = maybe.arg_true()
            found = df.get_column(col).gather(pos).str.contains_any(digital, ascii_case_insensitive=ascii_case_insensitive)
            out = out.scatter(pos.filter(found), True)
    return out


def extract_groups(df: pl.DataFrame, pattern: str, col: str = "msg") -> pl.DataFrame | None:
    """The named groups of `pattern`'s first match in `df[col]` as String columns (null where absent), one
    row per row of `df`; None when it cannot be done by shape (the caller runs `str.extract_groups`).

    Capture offsets are found once per distinct shape (Python's `re`, checked against polars' own
    captures of the shapes) and the captures are cut from each line at those offsets.
    """
    compiled = _compiled(pattern) if SHAPE in df.columns else None
    if compiled is None or compiled.groups != len(compiled.groupindex) or not compiled.groups:
        return None
    names = list(compiled.groupindex)
    uniq = df.get_column(SHAPE).unique().cast(pl.String)
    shapes = uniq.to_list()
    spans: list[list[int | None]] = [[] for _ in range(2 * len(names))]
    texts: list[list[str | None]] = [[] for _ in names]
    for s in shapes:
        m = compiled.search(s) if s is not None else None
        for k, name in enumerate(names):
            start, end = m.span(name) if m else (-1, -1)
            ok = start >= 0
            spans[2 * k].append(start if ok else None)
            spans[2 * k + 1].append(end - start if ok else None)
            texts[k].append(s[start:end] if ok else None)
    # Python's `re` and Rust's regex agree on these patterns; the check proves it for these shapes.
    rust = uniq.to_frame().select(pl.col(SHAPE).str.extract_groups(pattern).alias("_g")).unnest("_g")
    for k, name in enumerate(names):
        if rust.get_column(name).to_list() != texts[k]:
            return None
    table = pl.DataFrame(
        {SHAPE: uniq, **{f"_o{k}": spans[2 * k] for k in range(len(names))}, **{f"_l{k}": spans[2 * k + 1] for k in range(len(names))}},
        schema={SHAPE: pl.String, **{f"_o{k}": pl.Int64 for k in range(len(names))}, **{f"_l{k}": pl.Int64 for k in range(len(names))}},
    )
    joined = df.select(col, pl.col(SHAPE).cast(pl.String)).join(table, on=SHAPE, how="left", maintain_order="left")
    return joined.select(pl.col(col).str.slice(pl.col(f"_o{k}"), pl.col(f"_l{k}")).alias(name) for k, name in enumerate(names))

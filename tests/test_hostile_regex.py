"""Every regex that runs on input text, fed long near-miss lines (a repeated prefix that never completes):
none may backtrack into quadratic or worse time. Python `re` patterns are found at import (module-level
compiled patterns) and in the source (literal patterns of `re.*` calls); the signature table runs in both
engines; polars (Rust regex, linear by design) is checked on the signature, grammar and module-level patterns."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import time
from pathlib import Path

import forensics.parsers as parsers_pkg
import polars as pl
import pytest
from forensics.parsers import metric_lines, signatures

try:
    from re import _parser as sre_parse  # Python 3.11+
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

LONG = 16 * 1024  # long enough to tell linear from quadratic; real lines are cut at 64 KiB before matching
SHORT = LONG // 4
# A search over LONG characters slower than this, and more than 8x slower than over a quarter of them (linear
# gives 4x, quadratic 16x), is a blow-up.
SLOW_S = 0.05
GENERIC = ["1", " ", "a", "a:1 (", "=1, ", "[", "-", "1.", "x (", ": ", "'a', "]


def _modules() -> list:
    return [importlib.import_module(i.name) for i in pkgutil.walk_packages(parsers_pkg.__path__, "forensics.parsers.")]


def _literal_runs(pattern: str) -> list[str]:
    """The literal pieces of a pattern, in order (one representative character for a class or category)."""
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, TypeError, ValueError):
        return re.findall(r"[A-Za-z_][A-Za-z_ ]{2,}", pattern)
    runs: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            runs.append("".join(cur))
            cur.clear()

    def walk(items) -> None:
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                cur.append(chr(av))
                continue
            flush()
            if name == "SUBPATTERN":
                walk(av[-1])
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                walk(av[2])
            elif name == "BRANCH":
                for branch in av[1][:4]:
                    walk(branch)
            elif name == "IN":
                kind, arg = av[0]
                runs.append(chr(arg) if str(kind) == "LITERAL" else chr(arg[0]) if str(kind) == "RANGE" else "1")
        flush()

    walk(tree)
    return [r for r in runs if r]


def near_misses(pattern: str, size: int) -> list[str]:
    """Lines of `size` characters: the pattern's literal prefix repeated (it never completes), each literal piece
    repeated alone and with spaces, and generic runs (digits, spaces, brackets, `key=value, `)."""
    frags = _literal_runs(pattern)
    seeds = list(GENERIC)
    if frags:
        seeds.append("".join(frags[:-1]) or frags[0])
        for f in frags[:6]:
            seeds += [f, f + " "]
    return [(s * (size // len(s) + 1))[:size] for s in dict.fromkeys(seeds)]


ANCHORED = {"match", "fullmatch"}


def _python_patterns() -> dict[str, tuple[re.Pattern, str]]:
    """Every `re` pattern of the parsers with the way the code runs it: `match` when every use of it is anchored
    (`re.match(...)`, `NAME.match(...)`), else `search` (the costlier, unanchored scan)."""
    found: dict[str, tuple[re.Pattern, str]] = {}
    for module in _modules():
        source = Path(module.__file__).read_text(encoding="utf-8")
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                uses = set(re.findall(rf"\b{re.escape(name)}\.(\w+)\(", source))
                found[f"{module.__name__}.{name}"] = (value, "match" if uses and uses <= ANCHORED else "search")
        tree = ast.parse(source)
        # `re.compile(...).match(...)` inline: the method is the one called on the compiled pattern.
        method_of = {id(n.func.value): n.func.attr for n in ast.walk(tree)
                     if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Call)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re" and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, (str, bytes))):
                try:
                    compiled = re.compile(node.args[0].value)
                except re.error:
                    continue
                how = method_of.get(id(node), "search") if node.func.attr == "compile" else node.func.attr
                found[f"{module.__name__}:{node.lineno}"] = (compiled, "match" if how in ANCHORED else "search")
    return found


def _polars_patterns() -> dict[str, str]:
    found = {f"signature {s.code}": s.regex for s in signatures.load()}
    found.update({f"grammar {name}": p for name, p in metric_lines._MATCH.items()})
    for module in _modules():
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str) and any(c in value for c in "\\[(*+?") and len(value) > 3:
                try:
                    pl.Series(["x"]).str.contains(value)
                except pl.exceptions.PolarsError:
                    continue
                found[f"{module.__name__}.{name}"] = value
    return found


def _worst(run, lines: list[str]) -> tuple[float, str]:
    worst, which = 0.0, ""
    for line in lines:
        t = time.perf_counter()
        run(line)
        took = time.perf_counter() - t
        if took > worst:
            worst, which = took, line[:40]
    return worst, which


def _blowups(patterns: dict, run_of) -> list[str]:
    bad = []
    for name, pattern in patterns.items():
        compiled = pattern[0] if isinstance(pattern, tuple) else pattern
        text = compiled.pattern if isinstance(compiled, re.Pattern) else compiled
        text = text.decode("latin-1") if isinstance(text, bytes) else text
        run = run_of(pattern)
        long_lines = near_misses(text, LONG)
        took, line = _worst(run, long_lines)
        if took < SLOW_S:
            continue
        # Slow on the long line: compare with the same line four times shorter, each the fastest of a few runs (a
        # busy machine only ever adds time).
        slow = next(x for x in long_lines if x.startswith(line))
        t_long = min(_worst(run, [slow])[0] for _ in range(2))
        t_short = min(_worst(run, [slow[:SHORT]])[0] for _ in range(5))
        if t_long >= SLOW_S and t_long >= 8 * t_short:
            bad.append(f"{name}: {took:.2f} s on {line!r}...")
    return bad


def _python_run(p: re.Pattern | tuple[re.Pattern, str]):
    p, how = p if isinstance(p, tuple) else (p, "search")
    run = getattr(p, how)
    if isinstance(p.pattern, bytes):
        return lambda line: run(line.encode("latin-1", "replace"))
    return run


def test_python_regexes_on_long_near_miss_lines_stay_linear():
    patterns = _python_patterns()
    assert len(patterns) > 100  # the collection itself works: module constants and literal calls
    assert _blowups(patterns, _python_run) == []


def test_error_signatures_run_with_python_re_are_bounded():
    from forensics.parsers.blocks import tails

    # A traceback's last line is checked against every error signature with `re` (blocks/tails.py), cut to
    # KNOWN_CHARS first: even a quadratic signature stays cheap there.
    bad = []
    for sig in signatures.load():
        if sig.severity != "error":
            continue
        rx = re.compile(sig.regex)
        run = lambda text, rx=rx: rx.search(text[:tails.KNOWN_CHARS])  # noqa: E731
        lines = near_misses(sig.regex, LONG)
        took, line = _worst(run, lines)
        if took > 5 * SLOW_S:
            # Time the slowest line again, the fastest of three: a busy machine only ever adds time.
            slow = next(x for x in lines if x.startswith(line))
            took = min(_worst(run, [slow])[0] for _ in range(3))
        if took > 5 * SLOW_S:  # an absolute bound: the cut makes every pattern's worst case small
            bad.append(f"signature {sig.code}: {took:.2f} s on {line!r}")
    assert bad == []


def test_polars_regexes_on_long_near_miss_lines_stay_linear():
    patterns = _polars_patterns()
    assert len(patterns) > 100
    assert _blowups(patterns, lambda p: lambda line: pl.Series([line]).str.contains(p)) == []


@pytest.mark.parametrize("pattern", [
    r"^(.*) \((.*):(\d+)\)$",  # the VizTracer function-name form (now split without a regex), quadratic in `re`
    r"\s*\[[^\]]*\]\s*$",  # the nvidia-smi CSV unit suffix (now dropped without a regex)
])
def test_the_check_catches_a_known_blowup(pattern):
    assert _blowups({"known": re.compile(pattern)}, _python_run) != []

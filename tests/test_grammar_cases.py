"""The metric-grammar cases of tests/cases/grammars (format in tests/cases/README.md), one test per case."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

from tests.metrics_util import metrics

CASES_DIR = Path(__file__).resolve().parent / "cases" / "grammars"
GRAMMARS_DIR = Path(__file__).resolve().parent.parent / "parsers" / "metric_grammars"
# Column order of a compared row; a case's rows name a subset (or `columns` lists them).
ORDER = ("file", "line", "rank", "step", "name", "value", "source")


def _load() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(CASES_DIR.glob("*.toml")):
        for case in tomllib.loads(path.read_text(encoding="utf-8"))["case"]:
            out.append((f"{path.stem}:{case['id']}", case))
    return out


CASES = _load()


def _cell(value: object) -> object:
    # NaN never equals itself: compare it as a marker.
    return "nan" if isinstance(value, float) and math.isnan(value) else value


def test_case_ids_are_unique_and_files_are_named_by_a_grammar_module():
    ids = [i for i, _ in CASES]
    assert len(ids) == len(set(ids))
    for family in {i.split(":", 1)[0] for i in ids}:
        assert (GRAMMARS_DIR / f"{family}.py").is_file(), family


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[i for i, _ in CASES])
def test_grammar_case(tmp_path, case):
    text = "\n".join(case["lines"]) + ("\n" if case.get("final_newline", True) else "")
    m = metrics(tmp_path, {case.get("file", "train.log"): text})
    used = {key for row in case["rows"] for key in row}
    columns = case.get("columns") or [c for c in ORDER if c in used] + sorted(used - set(ORDER))
    if columns:
        got = [tuple(_cell(r[c]) for c in columns) for r in m.select(columns).iter_rows(named=True)]
        want = [tuple(_cell(row.get(c)) for c in columns) for row in case["rows"]]
        assert got == want, case["source"]
    else:
        assert m.height == 0, m.rows()
    names = set(m.get_column("name").to_list())
    assert not names & set(case.get("absent", [])), case["source"]

"""PyTorch Lightning `SimpleProfiler` reports (`FIT Profiler Report`) found in text logs, as rows of `counters`.

Layout (lightning/pytorch/profilers/simple.py `summary`, pytorch_lightning/profiler/simple.py before 1.8): a
dash line, the header row `|  Action\t|  Mean duration (s)\t|  Num calls\t|  Total time (s)\t|  Percentage %\t|`,
a dash line, a `Total` row (`-`, total calls, total seconds, `100 %`), a dash line, then one row per action
(`run_training_epoch`, `run_training_batch`, `[_TrainingEpochLoop].train_dataloader_next`, hooks...), cells
separated by `|` and tabs. The older form (`extended=False`, and Lightning < 1.3) has only `Action | Mean duration
(s) | Total time (s)`; 1.x prints `_` for the total calls. Pasted into GitHub the table is often turned into a
Markdown table (`--- | ---` rule, leading `|` dropped), so cells are split on `|` whatever the spacing. Each numeric
cell becomes one counters row: `name` = `mean_s` / `calls` / `total_s` / `pct`, `series` = the action,
`source` = `lightning_profiler`, `line` = the row's line in the log.
"""

from __future__ import annotations

import re

import polars as pl
from forensics.parsers.profile_table import counters_of, header_rows

SOURCE = "lightning_profiler"
# Header title -> measure name; a table is read only when its header has the Action, mean and total columns.
_COLUMNS = {"Mean duration (s)": "mean_s", "Num calls": "calls", "Total time (s)": "total_s", "Percentage %": "pct"}
_RULE = re.compile(r"^[\s|:-]*$")  # dash lines and Markdown `--- | ---` rules inside the table
_PCT = re.compile(r"^(-?[\d.]+(?:e[-+]?\d+)?)\s*%?$")
MAX_ROWS = 2000  # a profiler report has one row per hook and action: a few hundred at most


def _cells(text: str) -> list[str]:
    """The `|`-separated cells of one row, stripped, without the empty cells of a leading/trailing `|`."""
    cells = [c.strip() for c in text.strip().split("|")]
    if cells and cells[0] == "":
        cells = cells[1:]
    if cells and cells[-1] == "":
        cells = cells[:-1]
    return cells


def _number(cell: str) -> float | None:
    """`84.689` -> 84.689; `100 %` -> 100.0; `3.308e-05` -> 3.308e-05; `-` / `_` -> None."""
    m = _PCT.match(cell)
    return float(m.group(1)) if m else None


def parse_table(lines: list[tuple[int, str]]) -> list[dict]:
    """Counter rows of one report: `lines` = (line number, text) from the header row on, the table's end not cut."""
    titles = _cells(lines[0][1])
    if not titles or titles[0] != "Action":
        return []
    measures = [_COLUMNS.get(t) for t in titles[1:]]
    if "mean_s" not in measures or "total_s" not in measures:
        return []
    out: list[dict] = []
    for lineno, text in lines[1:MAX_ROWS]:
        if _RULE.match(text):
            continue
        cells = _cells(text)
        if len(cells) != len(titles):
            break  # the first line that is not a row of this table ends it
        for cell, measure in zip(cells[1:], measures, strict=True):
            v = _number(cell) if measure else None
            if v is not None:
                out.append({"line": lineno, "name": measure, "series": cells[0], "value": v})
    return out


def from_log(frame: pl.DataFrame, state: dict) -> None:
    """Text-log hook: collect the SimpleProfiler reports of one frame into `state["lightning_profile"]`."""
    texts, numbers, heads = header_rows(frame, pl.col("text").str.contains("Mean duration (s)", literal=True)
                                        & pl.col("text").str.contains("Total time (s)", literal=True)
                                        & pl.col("text").str.contains(r"^[\s|]*Action\b"))
    if not heads:
        return
    rows = state.setdefault("lightning_profile", [])
    for i in heads:
        rows.extend(parse_table([(numbers[k], texts[k]) for k in range(i, min(i + MAX_ROWS, len(texts)))]))


def log_tables(state: dict, rel: str, rank: int | None) -> dict:
    """The collected report rows as a counters table (empty dict when the log had none)."""
    return counters_of(state.get("lightning_profile"), rel, SOURCE, rank)

"""OpenAI `logger.dumpkvs()` tables (baselines, stable-baselines, guided/improved-diffusion): one record per dashed box.

[OBS] `HumanOutputFormat.writekvs` in openai/baselines, openai/guided-diffusion and openai/improved-diffusion
`logger.py`: a border of dashes (`"-" * (keywidth + valwidth + 7)`; rllab-style forks put a timestamp in the
middle of the top one), one `| key<pad> | value<pad> |` row per key sorted by name, a border again. Numbers are
printed `%-8.3g` (`| step | 1.53e+05 |`, openai/guided-diffusion#50), other values with `str()`.

    -------------------------------------          (openai/baselines#758, PPO2)
    | eplenmean          | 106          |
    | nupdates           | 6990         |
    | total_timesteps    | 143155200    |
    | value_loss         | 35.016712    |
    -------------------------------------

A box is a run of consecutive rows between two borders; it is read only when it holds a step key (`step`,
`total_timesteps`, `misc/total_timesteps`, `steps`, `iteration`, first found in that order), whose value is
the step of all its rows. So a Markdown table (`|---|---|` separators, no dashed borders) or a settings box
with no step gives nothing. Counters are not measurements and give no row (`samples`, `nupdates`,
`serial_timesteps`, `time_elapsed`, `episodes`, ...). stable-baselines3 boxes (section rows, indented keys)
are sb3.py's.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import Grammar, canonical, empty_rows, num, shape

# The border: dashes only, or dashes around a timestamp (rllab / garage forks of the logger).
BORDER = r"^\s*-{8,}(?:\s+\d{4}-\d\d-\d\d [\d:.]+(?: \w+)?\s+-+)?\s*$"
# A row: two cells, the key starting with a letter or `%` (deepq's `% time spent exploring`), a value present.
ROW = r"^\s*\| [A-Za-z%][^|]*? +\| +[^|\s][^|]*\|\s*$"
MATCH = f"{BORDER}|{ROW}"
STEP_KEYS = ["step", "total_timesteps", "misc/total_timesteps", "steps", "iteration"]
COUNTERS = STEP_KEYS + ["samples", "nupdates", "misc/nupdates", "n_updates", "serial_timesteps", "misc/serial_timesteps",
                        "time_elapsed", "misc/time_elapsed", "episodes", "iterations"]
NAMES = {"loss/policy_loss": "policy_loss", "loss/value_loss": "value_loss"}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Rows of the bordered boxes that hold a step key, stepped by it."""
    t = df.sort("line").with_columns(pl.col("msg").str.contains(BORDER).alias("_border"))
    # A box: rows with no gap, opened by a border on the line just above its first row and closed by one just below.
    t = t.with_columns(
        ((pl.col("line").diff().fill_null(2) > 1) | pl.col("_border")).cum_sum().alias("_box"),
        (pl.col("_border").shift(1).fill_null(False) & (pl.col("line").diff() == 1)).alias("_opened"),
    )
    rows = t.filter(~pl.col("_border"))
    if rows.height == 0:
        return empty_rows()
    closed = t.filter(pl.col("_border")).select((pl.col("line") - 1).alias("line"), pl.lit(True).alias("_closes"))
    rows = rows.join(closed, on="line", how="left", maintain_order="left")
    boxes = rows.group_by("_box").agg(pl.col("_opened").first().alias("_o"), pl.col("_closes").last().fill_null(False).alias("_c"))
    rows = rows.join(boxes.filter(pl.col("_o") & pl.col("_c")).select("_box"), on="_box", how="semi", maintain_order="left")
    cells = pl.col("msg").str.strip_chars().str.strip_chars("|").str.split("|")
    rows = rows.with_columns(
        cells.list.first().str.strip_chars().alias("_k"),
        num(cells.list.get(1, null_on_oob=True).str.strip_chars()).alias("value"),
    )
    rank = pl.col("_k").replace_strict({k: i for i, k in enumerate(STEP_KEYS)}, default=None, return_dtype=pl.Int32)
    steps = (
        rows.filter(rank.is_not_null() & pl.col("value").is_not_null())
        .sort(rank).group_by("_box").agg(pl.col("value").first().round().cast(pl.Int64).alias("step"))
    )
    out = rows.join(steps, on="_box", how="inner", maintain_order="left").filter(~pl.col("_k").is_in(COUNTERS))
    if out.height == 0:
        return empty_rows()
    return shape(out.select("_i", "step", canonical(pl.col("_k"), NAMES).alias("name"), "value"), "openai_logger")


GRAMMAR = Grammar("openai_logger", ("--------", "| "), MATCH, extract)

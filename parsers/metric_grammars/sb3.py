"""stable-baselines3 console tables (`verbose=1`): one box per logger dump, its step the box's `total_timesteps`.

[OBS] DLR-RM/stable-baselines3#156, DLR-RM/rl-baselines3-zoo PR#521, hill-a/stable-baselines#1204:

    ---------------------------------------
    | rollout/                |           |
    |    ep_len_mean          | 200       |
    | time/                   |           |
    |    total_timesteps      | 73728     |
    | train/                  |           |
    |    loss                 | 0.482     |
    ---------------------------------------

A section row (`| train/ | |`) names the rows under it: `train/value_loss`, `rollout/ep_rew_mean`
(`train/loss` -> `loss`, `train/learning_rate` -> `lr`). A box is a run of consecutive table lines (the
dashed borders end it); only a box holding `total_timesteps` is read (a two-column config or results table
has none), and that value is the step of all its rows. Counters are not measurements: `time/iterations`,
`time/time_elapsed`, `time/total_timesteps`, `train/n_updates`, `time/episodes` give no row. Old
stable-baselines (TF) boxes have no section rows and no 4-space indent: not read. A box cut by a chunk
boundary is read as two boxes (the part without `total_timesteps` gives nothing).
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, canonical, empty_rows, num, shape

SECTION = r"^\| [a-z_]+/ +\| +\|$"
ROW = rf"^\|    [a-z_]+ +\| {NUM} +\|$"
MATCH = f"{SECTION}|{ROW}"
NAMES = {"train/loss": "loss", "train/learning_rate": "lr"}
COUNTERS = ["time/iterations", "time/time_elapsed", "time/total_timesteps", "train/n_updates", "time/episodes", "total_timesteps"]


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Rows of boxes that hold `total_timesteps`, stepped by it."""
    cells = pl.col("msg").str.strip_chars("| ").str.split("|")
    t = df.sort("line").with_columns(
        cells.list.first().str.strip_chars().alias("_k"),
        cells.list.get(1, null_on_oob=True).str.strip_chars().alias("_v"),
        # A new box where the previous table line is not the line just above.
        (pl.col("line").diff().fill_null(2) > 1).cum_sum().alias("_box"),
    )
    is_section = pl.col("_k").str.ends_with("/")
    t = t.with_columns(pl.when(is_section).then(pl.col("_k")).otherwise(None).forward_fill().over("_box").alias("_sec"))
    t = t.filter(~is_section).with_columns((pl.col("_sec").fill_null("") + pl.col("_k")).alias("_name"), num(pl.col("_v")).alias("value"))
    steps = t.filter(pl.col("_k") == "total_timesteps").group_by("_box").agg(pl.col("value").first().cast(pl.Int64).alias("step"))
    t = t.join(steps, on="_box", how="inner", maintain_order="left").filter(~pl.col("_name").is_in(COUNTERS))
    if t.height == 0:
        return empty_rows()
    return shape(t.select("_i", "step", canonical(pl.col("_name"), NAMES).alias("name"), "value"), "sb3")


GRAMMAR = Grammar("sb3", ("|    ", "/   "), MATCH, extract)

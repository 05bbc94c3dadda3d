"""Give HuggingFace console dicts their step from the tqdm bar around them (whole-file pass).

HF logs carry the step only in the bar (`n/total` of the training bar is the global step). What a
captured file holds (recorded in sample_logs/healthy-hf-trainer/train.log, transformers 5.23, and the
same in 4.x: `ProgressCallback.on_log` calls `tqdm.write`):

    \\r 12%|█▎ | 5/40 [..]\\r<spaces>\\r{'loss': '3.636', ...}      <- dict of step 6, preceded by the
    \\r 15%|█▌ | 6/40 [..]\\r<spaces>\\r{'loss': '3.59', ...}         refresh drawn after step 5's dict
                                                                  (or a stale state: tqdm throttles redraws)

`tqdm.write` clears the bar, prints the dict, then redraws the bar with its current `n`, which is the
dict's step. So the rule is: the first undescribed bar state on one of the next two physical lines
(no other dict in between) gives the step; failing that (the log ends, or the bars went to another
stream), the last bar state before the dict on its own physical line (one step early when redraws
were throttled); failing that, the last bar state of the two lines above (a terminal-rendered paste:
`260/873 [..]` then the dict then other log lines). Without any bar (PrinterCallback, `disable_tqdm`, pasted terminal output) the step
stays null and textlog carries it from the nearest preceding step line.
"""

from __future__ import annotations

import polars as pl

BAR_NAME = "_bar"


def assign_hf_steps(metrics: pl.DataFrame) -> pl.DataFrame:
    """Fill `step` of `hf_dict` rows from `_bar` rows, then drop the `_bar` rows."""
    is_bar = pl.col("name") == BAR_NAME
    bars = metrics.filter(is_bar)
    rest = metrics.filter(~is_bar)
    hf = rest.filter((pl.col("source") == "hf_dict") & pl.col("step").is_null())
    if bars.height == 0 or hf.height == 0:
        return rest
    r = pl.col("rank").fill_null(-1)
    dicts = hf.select("line", "seg", r.alias("_r")).unique().sort("line", "seg")
    b = bars.select("line", "seg", pl.col("value").alias("_ord"), pl.col("step").alias("_n"), r.alias("_r"))

    # Rule 1: first bar state after the dict, within two physical lines, before the next dict (a dict
    # ends its physical line, so a later dict on the bar's own line comes after that bar).
    first_after = b.sort("line", "seg", "_ord").group_by("line", "_r", maintain_order=True).first()
    nxt = dicts.with_columns((pl.col("line") + 1).alias("_from")).join_asof(
        first_after.rename({"line": "_bl"}).select("_bl", "_r", "_n").sort("_bl"),
        left_on="_from", right_on="_bl", by="_r", strategy="forward", check_sortedness=False,
    )
    next_dict = dicts.select(pl.col("line").alias("_nd"), "_r").unique().sort("_nd")
    nxt = nxt.with_columns((pl.col("line") + 1).alias("_from2")).join_asof(
        next_dict, left_on="_from2", right_on="_nd", by="_r", strategy="forward", check_sortedness=False)
    after = nxt.filter(
        pl.col("_bl").is_not_null() & (pl.col("_bl") <= pl.col("line") + 2)
        & (pl.col("_nd").is_null() | (pl.col("_nd") >= pl.col("_bl")))
    ).select("line", "seg", "_r", pl.col("_n").alias("_after"))

    # Rule 2: the last bar state before the dict on its own physical line.
    before = (
        dicts.join(b, on=["line", "_r"], suffix="_b")
        .filter(pl.col("seg_b") <= pl.col("seg"))
        .sort("seg_b", "_ord")
        .group_by("line", "seg", "_r", maintain_order=True).last()
        .select("line", "seg", "_r", pl.col("_n").alias("_before"))
    )
    # Rule 3: the last bar state of the two physical lines above (terminal-rendered pastes, where the
    # bar line sits above the dict and nothing follows it).
    last_per_line = b.sort("line", "seg", "_ord").group_by("line", "_r", maintain_order=True).last()
    above = dicts.with_columns((pl.col("line") - 1).alias("_to")).join_asof(
        last_per_line.rename({"line": "_al"}).select("_al", "_r", pl.col("_n").alias("_above")).sort("_al"),
        left_on="_to", right_on="_al", by="_r", strategy="backward", check_sortedness=False,
    ).filter(pl.col("_al") >= pl.col("line") - 2).select("line", "seg", "_r", "_above")
    steps = (
        dicts.join(after, on=["line", "seg", "_r"], how="left", maintain_order="left")
        .join(before, on=["line", "seg", "_r"], how="left", maintain_order="left")
        .join(above, on=["line", "seg", "_r"], how="left", maintain_order="left")
    )
    steps = steps.select("line", "seg", "_r", pl.coalesce("_after", "_before", "_above").alias("_hs"))
    out = rest.with_columns(r.alias("_r")).join(steps, on=["line", "seg", "_r"], how="left", maintain_order="left")
    fill = (pl.col("source") == "hf_dict") & pl.col("step").is_null()
    out = out.with_columns(pl.when(fill).then(pl.col("_hs")).otherwise(pl.col("step")).alias("step"))
    return out.drop("_r", "_hs")

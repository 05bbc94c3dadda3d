"""lora-silent-zero from the loss alone: per-step losses that replay the previous epoch's exactly (the weights never change)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.gradient.lora_silent_zero import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# The most recent points looked at: a replay shows within the first epochs of a paste, and pairing equal values
# is quadratic in the repeats of one value.
TAIL = 20_000


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """The longest run of consecutive points whose loss equals the loss a fixed number of points earlier."""
    # Read one rank at a time, the lowest kept as numbers: the rows quoted get their file and line at the end.
    s = M.lowest_rank_numbers(ctx, M.LOSS, finite=True)[0]
    need = int(th["replay_min_points"])
    if s.height < 2 * need:
        return None
    s = s.sort("step").tail(TAIL).with_row_index("_p")
    common = s.group_by("value").len().filter(pl.col("len") <= th["replay_max_repeats"]).select("value")
    pts = s.join(common, on="value", how="semi").select("_p", "value")
    pairs = (pts.join(pts, on="value", suffix="_e").filter(pl.col("_p") > pl.col("_p_e"))
             .with_columns((pl.col("_p") - pl.col("_p_e")).alias("_lag")))
    if pairs.height < need:
        return None
    # Runs of consecutive positions at one lag: position minus its rank within the lag is constant along a run.
    runs = (pairs.sort("_lag", "_p").with_columns((pl.col("_p") - pl.int_range(pl.len()).over("_lag")).alias("_run"))
            .group_by("_lag", "_run").agg(pl.col("_p").min().alias("start"), pl.len().alias("n"), pl.col("value").n_unique().alias("distinct"))
            .filter((pl.col("n") >= need) & (pl.col("distinct") >= 3)).sort("n", "start", descending=[True, False]))
    if runs.height == 0:
        return None
    top = runs.row(0, named=True)
    lag, start, n = int(top["_lag"]), int(top["start"]), int(top["n"])
    now = s.filter(pl.col("_p").is_between(start, start + n - 1))
    then = s.filter(pl.col("_p").is_between(start - lag, start - lag + n - 1))
    shown = ", ".join(M.fmt(v) for v in now.get_column("value").head(6).to_list())
    summary = (f"the loss replays itself: {n} consecutive logged losses from step {now.item(0, 'step')} equal, as printed, those "
               f"{lag} points earlier from step {then.item(0, 'step')} ({shown}{', ...' if n > 6 else ''}): the same batches "
               "through a model whose trainable weights never change")
    got = M.provenance(ctx, M.LOSS, pl.concat([now.head(1), then.head(2), now.head(2)]), finite=True)
    return Detection(
        summary=summary,
        onset=M.onset_at(got.row(0, named=True)),
        evidence=M.quote(got.slice(1)),
        evidence_count=n,
        causes={"not_trainable": 0.8},
        confidence=0.8,
        facts={"lag_points": lag, "run": n, "first_step": now.item(0, "step"), "earlier_step": then.item(0, "step")},
    )

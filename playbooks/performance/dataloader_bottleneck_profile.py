"""dataloader-bottleneck from a Lightning SimpleProfiler report: `train_dataloader_next` total vs the training epoch's."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.performance.dataloader_bottleneck import PLAYBOOK

from forensics.contracts.context import Context, evidence_rows
from forensics.contracts.model import Detection, Onset, Severity

SOURCE = "lightning_profiler"
# The action timing `next(data_fetcher)` of the training loop: `[_TrainingEpochLoop].train_dataloader_next`
# (Lightning 2.x), `[TrainingEpochLoop].train_dataloader_next` (1.6-1.9), `get_train_batch` (1.0-1.5).
LOADER = r"(^|\.)train_dataloader_next$|^get_train_batch$"
# What the loader's time is a share of: the training epochs where timed, else the report's `Total` row.
WHOLE = ("run_training_epoch", "Total")
CAUSES = {"too_few_workers": 0.6, "heavy_transforms": 0.7, "no_prefetch": 0.3}


@PLAYBOOK.detector(("counters",))
def detect_profile(ctx: Context, th: dict) -> list[Detection]:
    """Per report: the loader's summed `next()` time over the epoch's (or the report's) total time."""
    c = ctx.table("counters")
    if c.height == 0:
        return []
    c = c.filter((pl.col("source") == SOURCE) & (pl.col("name") == "total_s"))
    loader = c.filter(pl.col("series").str.contains(LOADER))
    if loader.height == 0:
        return []
    calls = ctx.table("counters").filter((pl.col("source") == SOURCE) & (pl.col("name") == "calls")).select(
        "file", "line", pl.col("value").alias("calls"))
    loader = loader.join(calls, on=["file", "line"], how="left")
    # One report per (file, block): the whole row nearest above each loader row in the same file.
    whole = c.filter(pl.col("series").is_in(WHOLE)).with_columns(
        pl.col("series").replace_strict({w: i for i, w in enumerate(WHOLE)}, return_dtype=pl.Int32).alias("pref"))
    out = []
    for row in loader.iter_rows(named=True):
        # A report spans a few hundred lines at most; its whole rows sit above or below the loader row.
        near = whole.filter((pl.col("file") == row["file"]) & ((pl.col("line") - row["line"]).abs() < 2000)
                            & (pl.col("value") > 0)).sort("pref", (pl.col("line") - row["line"]).abs())
        if near.height == 0:
            continue
        w = near.row(0, named=True)
        found = _judge(row, w, th)
        if found is not None:
            out.append(found)
    return out


def _judge(row: dict, whole: dict, th: dict) -> Detection | None:
    """The loader's share of the whole; medium from `blatant_share` up, low from `data_share`, none below."""
    share = row["value"] / whole["value"]
    # A handful of batches: the first `next()` (worker start-up, the first files opened) can dominate a short
    # profile of a healthy loader, so a share is judged over enough batches only.
    if share < th["data_share"] or (row["calls"] is not None and row["calls"] < th["min_steps"]):
        return None
    of = "the training epochs" if whole["series"] == "run_training_epoch" else "the profiled run"
    calls = f" over {int(row['calls'])} batches" if row["calls"] is not None else ""
    summary = (f"the Lightning profiler times {row['series']} at {row['value']:.4g} s of the {whole['value']:.4g} s of {of} "
               f"({share:.0%}){calls}: the training loop waits for the DataLoader")
    # Synthetic rows (`name = value`): the report quotes the profiler rows themselves.
    quoted = pl.DataFrame([row, whole]).select("file", "line", "rank", pl.col("series").alias("name"), "value")
    found = Detection(summary=summary, onset=Onset(rank=row["rank"], file=row["file"], line=row["line"]),
                      evidence=evidence_rows(quoted), evidence_count=2, causes=CAUSES, confidence=0.85,
                      facts={"data_share": round(share, 3), "loader_s": row["value"], "whole_s": whole["value"],
                             "whole": whole["series"], "batches": row["calls"]})
    # Under the blatant share the loader costs some throughput but does not dominate: worth a note, not an alarm.
    if share < th["blatant_share"]:
        found.severity = Severity.LOW
    return found

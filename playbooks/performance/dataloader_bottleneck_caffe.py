"""dataloader-bottleneck from Caffe's own count of waits for its data layer (`Data layer prefetch queue empty`)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import combine, detection, events
from forensics.playbooks.performance.dataloader_bottleneck import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

WAIT_CODES = ("data_queue_wait",)
CAUSES = {"heavy_transforms": 0.6, "too_few_workers": 0.4, "no_prefetch": 0.2}
# BlockingQueue::pop logs its wait through LOG_EVERY_N(INFO, 1000): each line after the first is this many waits more.
WAITS_PER_LINE = 1000


@PLAYBOOK.detector(("events",))
def detect_caffe_queue_waits(ctx: Context, th: dict) -> Detection | None:
    """`Data layer prefetch queue empty` more than once in one log: Caffe logs the first wait and then one line per
    1000 more (LOG_EVERY_N), so k lines are at least 1000 x (k - 1) + 1 waits for a batch (BVLC/caffe#3177, ronghanghu:
    `your data loading is slower than net forward, so net has to wait`). The first line alone is the net's start
    (nothing prefetched yet) and stays quiet. A count of waits says nothing of their length, and the test net's data
    layer counts in the same counter, so only a note (low)."""
    waits = events(ctx, WAIT_CODES)
    if waits.height < 2:
        return None
    per = (waits.group_by(pl.col("file").cast(pl.String).alias("_f"), maintain_order=True).agg(pl.len().alias("n"))
           .filter(pl.col("n") >= 2).sort("n", descending=True, maintain_order=True))
    if per.height == 0:
        return None
    top = per.row(0, named=True)
    proven = WAITS_PER_LINE * (top["n"] - 1)
    mine = waits.filter(pl.col("file").cast(pl.String) == top["_f"])
    return detection(combine(mine.head(1), mine.tail(1)),
                     f"Caffe logged `Data layer prefetch queue empty` {top['n']} times in one log: at least {proven:,} "
                     "more waits for a batch after the first (the data layer's prefetch thread falls behind the net)",
                     CAUSES, confidence=0.4, severity=Severity.LOW, lead=mine.tail(1),
                     facts={"wait_lines": top["n"], "waits_at_least": proven})

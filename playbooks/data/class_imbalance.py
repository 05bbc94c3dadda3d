"""class-imbalance: logged label counts are heavily skewed (largest over smallest class above 10)."""

from __future__ import annotations

import re

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

# Per-class counts: label_count_3, class_count/3, count_class_3, samples_per_class_3, ...
COUNTS = r"(label|class|target)s?_?count|count_?(label|class)|samples_per_class|class_freq"

PLAYBOOK = declare(
    Playbook(
        id="class-imbalance",
        title="Heavily imbalanced classes",
        category="data",
        severity=Severity.MEDIUM,
        tables=("metrics",),
        explains=(),
        causes=(
            Cause("dataset_imbalance", "The dataset itself is skewed towards a few classes", verify="Count labels over the whole training set",
                  fix="A weighted sampler or class weights in the loss; collect more minority data", prior=0.7),
            Cause("sampling_bug", "The sampler or a filter drops or repeats classes", verify="Compare the label counts of the dataset with those of the batches",
                  fix="Fix the sampler / filtering", prior=0.3),
        ),
        verify="Count labels per class in the training data and in the batches",
        fix="Weighted sampler, class weights",
        thresholds={
            "max_min_ratio": Threshold(10, "largest over smallest class count", "PLAYBOOKS.md class-imbalance (max/min > 10); anchors.md SMD ClassImbalance threshold_imbalance=10"),
            "min_samples": Threshold(100, "labels counted before judging", "ours; SMD ClassImbalance samples=500 at the tensor level"),
        },
        doc="""\
## Symptom
Logged per-class label counts (cumulative or per interval) whose largest over smallest is above 10,
once at least 100 labels have been counted.

## Why it matters
The model learns the majority class; accuracy looks fine while minority classes are never predicted.

## Evidence
`metrics` with per-class count names (`label_count_0`, `class_count/3`, ...). The last logged value of
each class counts (cumulative counters), summed per class over ranks.

## Known false positives
Deliberately imbalanced data with class weights already in the loss; check the loss configuration.
""",
    )
)


def _class_of(name: str) -> str:
    m = re.search(r"(\d+|[a-z]+)$", name)
    return m.group(1) if m else name


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Largest over smallest of the last logged count per class."""
    names = M.names_like(ctx, COUNTS)
    if len(names) < 2:
        return None
    last = []
    for n in names:
        s = M.series(ctx, n, finite=True).sort("step")
        if s.height == 0:
            continue
        per_rank = s.group_by("rank").agg(pl.all().sort_by("step").last())
        last.append({"name": n, "cls": _class_of(n), "count": float(per_rank.get_column("value").sum()),
                     "row": per_rank.sort("rank", nulls_last=True).row(0, named=True)})
    if len(last) < 2:
        return None
    total = sum(c["count"] for c in last)
    lo = min(last, key=lambda c: c["count"])
    hi = max(last, key=lambda c: c["count"])
    if total < th["min_samples"]:
        return None
    ratio = hi["count"] / lo["count"] if lo["count"] > 0 else float("inf")
    if ratio <= th["max_min_ratio"]:
        return None
    shares = ", ".join(f"{c['cls']}: {c['count'] / total:.1%}" for c in sorted(last, key=lambda c: -c["count"]))
    summary = (f"label counts are skewed {ratio:.3g}:1 (class {hi['cls']} {int(hi['count']):,} vs class {lo['cls']} "
               f"{int(lo['count']):,} of {int(total):,} labels; {shares})")
    # Onset: the first logged step where the ratio is already above the threshold.
    frames = [M.series(ctx, c["name"], finite=True).select("step", pl.col("value").alias(c["cls"])) for c in last]
    wide = frames[0]
    for f in frames[1:]:
        wide = wide.join(f, on="step", how="inner")
    cls = [c["cls"] for c in last]
    wide = wide.with_columns((pl.max_horizontal(cls) / pl.min_horizontal(cls)).alias("r")).sort("step")
    hot = wide.filter(pl.col("r") > th["max_min_ratio"])
    onset_step = int(hot.item(0, "step")) if hot.height else hi["row"]["step"]
    s_hi = M.series(ctx, hi["name"], finite=True)
    s_lo = M.series(ctx, lo["name"], finite=True)
    return Detection(
        summary=summary,
        onset=M.onset_of_step(s_hi, onset_step),
        evidence=M.quote(pl.concat([M.pick(s_hi, [onset_step]), M.pick(s_lo, [onset_step]), s_hi.tail(1), s_lo.tail(1)])),
        evidence_count=len(last),
        causes={"dataset_imbalance": 0.8, "sampling_bug": 0.3},
        confidence=0.85,
        facts={"ratio": ratio, "largest": hi["cls"], "smallest": lo["cls"], "counts": {c["cls"]: c["count"] for c in last}},
    )

"""loss-stagnation from top-1/top-5 accuracies at chance: top-5 about 5x top-1 (a uniform guess), not rising."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.gradient.loss_stagnation import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Canonical top-k names (metric_names.toml: cxxnet `rec@1`, mxnet `top_k_accuracy_5` -> acc@1/acc@5), the
# spellings of timm (`Acc@1`), the ImageNet example forks (`Prec@1`) and plain loops (`top1`/`acc1`).
TOP1 = r"^(?:acc@1|prec@1|top1|top_1|acc1|top1_acc)$"
TOP5 = r"^(?:acc@5|prec@5|top5|top_5|acc5|top5_acc)$"
SPLITS = ("", "eval_", "test_")


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Top-1 at most `topk_max_top1`, top-5/top-1 within `topk_ratio_tol` of 5, the last top-1 not `topk_progress`
    above the first, over points that span two epochs or `topk_min_steps` batches (dmlc/cxxnet#84: train-rec@1
    0.00103 -> 0.00101, rec@5 0.0050 over two rounds of 5000 batches). Training split first, then held-out ones."""
    if not ctx.has("metrics"):
        return None
    for split in SPLITS:
        top1 = [n for n in M.names_like(ctx, "^" + split + TOP1[1:]) if n.startswith(split)]
        top5 = [n for n in M.names_like(ctx, "^" + split + TOP5[1:]) if n.startswith(split)]
        if split == "":
            top1 = [n for n in top1 if not n.startswith(("eval_", "test_"))]
            top5 = [n for n in top5 if not n.startswith(("eval_", "test_"))]
        if top1 and top5:
            found = _at_chance(ctx, top1[0], top5[0], th)
            if found is not None:
                return found
    return None


def _at_chance(ctx: Context, n1: str, n5: str, th: dict) -> Detection | None:
    a1 = M.ts.lowest_rank(M.series(ctx, n1, finite=True)).sort("step")
    a5 = M.series(ctx, n5, finite=True).select("file", "line", pl.col("value").alias("top5"))
    both = a1.join(a5, on=["file", "line"], how="inner")
    if both.height < 2:
        return None
    scale = 100.0 if float(both.get_column("value").max()) > 1.0 or float(both.get_column("top5").max()) > 1.0 else 1.0
    t1, t5 = both.get_column("value") / scale, both.get_column("top5") / scale
    if float(t1.max()) > th["topk_max_top1"] or float(t1.min()) <= 0:
        return None
    ratio = float((t5 / t1).median())
    if abs(ratio - 5.0) > th["topk_ratio_tol"] * 5.0:
        return None
    first, last = float(t1.head(1).item()), float(t1.tail(1).item())
    if last >= th["topk_progress"] * first:
        return None
    # Long enough that a healthy run would have left chance: two epochs, or `topk_min_steps` batches.
    ep = M.series(ctx, "epoch").join(both.select("file", "line"), on=["file", "line"], how="semi")
    epochs = ep.get_column("value").n_unique() if ep.height else 1
    span = int(both.item(-1, "step")) - int(both.item(0, "step"))
    if epochs < 2 and span < th["topk_min_steps"]:
        return None
    k = round(1.0 / float(t1.median()))
    row = both.row(0, named=True)
    return Detection(
        summary=(f"{n1} {M.fmt(first)} -> {M.fmt(last)} with {n5} {ratio:.2f}x it over {both.height} logged points "
                 f"(steps {row['step']} to {both.item(-1, 'step')}): a uniform guess over ~{k:,} classes (top-1 = 1/K, "
                 f"top-5 = 5/K), not learning"),
        onset=M.onset_at(row),
        evidence=M.quote(pl.concat([both.head(1), both.tail(1)]).drop("top5")),
        evidence_count=both.height,
        causes={"weights_frozen": 0.5, "vanishing_gradient": 0.4, "labels_masked": 0.4, "clipped_updates": 0.2},
        confidence=0.85,
        facts={"top1": last, "top5_over_top1": ratio, "classes": k, "points": both.height, "series": n1},
    )

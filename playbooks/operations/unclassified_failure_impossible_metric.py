"""unclassified-failure from a metric no correct loss can print: a perplexity below 1 (exp of a cross-entropy, at least 1)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.operations.unclassified_failure import OWN, PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Told apart by name: perplexity is exp(cross-entropy) over a discrete vocabulary, never below 1, whatever the loss
# is called. Losses that may be negative by design (-PSNR, -SSIM, soft dice, the NLL of a continuous density, an
# ELBO) are never read here: a negative loss alone says nothing, a perplexity below 1 says the loss is wrong.
PERPLEXITY = r"(?:^|_)(?:perplexity|ppl)$"


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """`impossible_points` or more lines with a perplexity below 1: the loss is not computed as the cross-entropy it
    stands for (flashlight/flashlight#137: `Train Loss: -8.31e+03 ... Validation Perplexity: 0` every epoch, the RnnLm
    example's forward missing its LogSoftmax, fixed in flashlight#247; pytorch/examples#734: the word language model
    reporting a negative loss and 0 perplexity, NLLLoss fed raw scores, fixed in pytorch/examples#732)."""
    ppl = M.names_like(ctx, PERPLEXITY)
    if not ppl:
        return None
    rows = ctx.metrics_select("file", "line", "ts", "rank", "step", "name", "value", names=ppl)
    bad = rows.filter(pl.col("value").is_finite() & (pl.col("value") < 1.0)).sort("file", "line")
    lines = bad.unique(["file", "line"], keep="first", maintain_order=True)
    if lines.height < th["impossible_points"]:
        return None
    first = lines.row(0, named=True)
    return Detection(
        summary=(f"{first['name']} is {M.fmt(first['value'])} on {lines.height} lines, below 1 (perplexity is exp of a "
                 "cross-entropy, at least 1): the loss is not computed as the objective it stands for (a missing log-softmax, probabilities fed where log-probabilities belong, "
                 "or a sign error); every number the run reports is meaningless until the loss is fixed"),
        onset=M.onset_at(first),
        evidence=M.quote_ends(lines),
        evidence_count=lines.height,
        causes={OWN: 0.9, "bad_input_data": 0.2},
        confidence=0.8,
        facts={"metric": first["name"], "first_value": first["value"], "lines": lines.height},
    )

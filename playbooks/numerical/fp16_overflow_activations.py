"""fp16-overflow from HF's DebugUnderflowOverflow report: activations climb to the float16 limit, then read inf."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.evidence import combine, detection, events
from forensics.playbooks.fields import field
from forensics.playbooks.numerical.fp16_overflow import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Largest finite float16 (IEEE half: (2 - 2**-10) * 2**15). A tensor whose abs max prints at or below it right before
# an `inf` ran out of the float16 range; a finite abs max above it was not a float16 tensor (fp32/bf16 reach 3.4e38).
FP16_MAX = 65504.0


@PLAYBOOK.detector(("events",))
def detect_activation_overflow(ctx: Context, th: dict) -> Detection | None:
    """The report transformers' DebugUnderflowOverflow prints when a forward activation turns inf/nan
    (`Detected inf/nan during batch_number=N`, then each saved frame's `abs min abs max` rows; parsers/signatures.toml
    codes activation_nonfinite, activation_abs_max): its rows climb to 1e4 or more, never past 65504, and then one
    reads `inf`. That is the float16 range exceeded in the forward pass (stas00/ml-engineering: mt5-small under fp16,
    `6.27e+04` out of DenseReluDense.wo, `inf` out of the dropout after it). Quiet when a finite abs max in the report
    is above 65504 (the tensors are not float16: an inf there is no fp16 overflow) or when no row reads inf (a NaN
    alone is nan-loss's: 0/0 or log(0) happen in any precision)."""
    head = events(ctx, ("activation_nonfinite",))
    if head.height == 0:
        return None
    first = head.row(0, named=True)
    rows = events(ctx, ("activation_abs_max",)).filter((pl.col("file") == first["file"]) & (pl.col("line") > first["line"]))
    if rows.height == 0:
        return None
    mx = field("abs_max")
    rows = rows.with_columns(mx.alias("_max"), mx.cast(pl.Float64, strict=False).alias("_v"))
    inf = rows.filter(pl.col("_max") == "inf")
    finite = rows.filter(pl.col("_v").is_finite())
    if inf.height == 0 or finite.height == 0 or float(finite.get_column("_v").max()) > FP16_MAX:
        return None
    top = finite.sort(["_v", "line"], descending=[True, False]).row(0, named=True)  # where the peak first shows
    at = inf.row(0, named=True)
    batch = head.select(field("batch")).item(0, 0)
    summary = (f"HF's underflow/overflow detector caught inf/nan in the forward pass of batch {batch}: the activations "
               f"climb to {top['_v']:.3g} (line {top['line']}), just under float16's largest value 65504, and the next "
               f"rows read inf (line {at['line']}): the float16 range was exceeded")
    return detection(combine(head.head(1), rows.filter(pl.col("line") == top["line"]).drop("_max", "_v"),
                             inf.head(1).drop("_max", "_v")),
                     summary, {"range_exceeded": 0.9, "fp32_layer": 0.4}, confidence=0.85,
                     facts={"batch": batch, "abs_max": top["_v"], "inf_line": at["line"]})

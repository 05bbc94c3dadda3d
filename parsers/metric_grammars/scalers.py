"""Dynamic loss-scaler messages: fp16 overflow / skipped steps and loss-scale changes.

Sources (formats.md): DeepSpeed `[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: X,
reducing to Y` (and `[deepscale]`, the hysteresis branch, fused/unfused optimizer texts) §1.3; apex amp
`Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to Y` §1.5; fairseq
`NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: Y` §1.10; Colossal-AI
`Overflow occurs, the loss scale is adjusted to Y` §1.12; guided/improved-diffusion `Found NaN, decreased
lg_loss_scale to X` (the scale is 2**X; read as `lg_loss_scale`, the name its dumpkvs box uses).
Each message that reports a skipped step gives `skipped_steps = 1` (one skipped step, so a sum over a
window counts them); each that states the scale now in force gives `loss_scale`.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, empty_rows, num, shape, wide_to_rows

# (regex, group holding the scale now in force or None, is a skipped step, group holding the step or None)
RULES: list[tuple[str, str | None, bool, str | None]] = [
    # The `[deepspeed] ` tag may already be gone with the log-record prefix (its bracket run).
    (rf"(?:\[deep(?:speed|scale)\] )?OVERFLOW! Rank \d+ Skipping step\.(?: Attempted loss scale: (?P<prev>{NUM}), "
     rf"(?:reducing to (?P<new>{NUM})|but hysteresis is \d+))?", "new|prev", True, None),
    (rf"fp16 dynamic loss scale overflow! Skipping step\. Attempted loss scale: {NUM}, reducing to (?P<new>{NUM})", "new", True, None),
    (rf"Overflow detected\. Skipping step\. Attempted loss scale: {NUM}, reducing to (?P<new>{NUM})", "new", True, None),
    (r"Grad overflow on iteration:? (?P<it>\d+)", None, True, "it"),
    (rf"(?:Reducing|Increasing) dynamic loss scale from {NUM} to (?P<new>{NUM})", "new", False, None),
    (rf"Gradient overflow\.\s+Skipping step, (?:loss scaler \d+ )?reducing loss scale to (?P<new>{NUM})", "new", True, None),
    (rf"OVERFLOW within closure! Skipping step, reducing loss scale to (?P<new>{NUM})", "new", True, None),
    (r"Gradient overflow, skipping update", None, True, None),
    (r"^OVERFLOW!$", None, True, None),
    # Older fairseq prints the same message as `| WARNING: overflow detected, setting loss scale to: 0.25`.
    (rf"(?:NOTE|WARNING): (?:gradient )?overflow detected, (?:ignoring gradient, )?setting loss scale to: (?P<new>{NUM})", "new", True, None),
    (rf"AMP: overflow detected, setting scale to to (?P<new>{NUM})", "new", True, None),
    (rf"Overflow occurs, the loss scale is adjusted to (?P<new>{NUM})", "new", True, None),
    (rf"No overflow for consecutive \d+ steps, the loss scale is adjusted to (?P<new>{NUM})", "new", False, None),
    (r"Found overflow\. Skip step", None, True, None),
    # openai guided-diffusion / improved-diffusion fp16_util: the scale is kept as its log2 (`lg_loss_scale`), and a
    # non-finite gradient norm lowers it by one and skips the step (`Found NaN, decreased lg_loss_scale to 17.0`).
    (rf"Found NaN, decreased lg_loss_scale to (?P<lg>{NUM})", "lg", True, None),
]
MATCH = "|".join(f"(?:{r})" for r, *_ in RULES)


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Rows per rule; a line is read by the first rule it matches."""
    parts = []
    rest = df
    for regex, scale, skipped, step_group in RULES:
        hit = rest.get_column("msg").str.contains(regex)
        sub = rest.filter(hit)
        if sub.height == 0:
            continue
        rest = rest.filter(~hit)
        groups = pl.col("msg").str.extract_groups(regex)
        cols: dict[str, pl.Expr] = {}
        if scale == "lg":
            # Kept under the name the same run's dumpkvs box prints it with (`| lg_loss_scale | -1.62e+04 |`).
            cols["lg_loss_scale"] = num(groups.struct.field("lg"))
        elif scale:
            cols["loss_scale"] = num(pl.coalesce([groups.struct.field(g) for g in scale.split("|")]))
        if skipped:
            cols["skipped_steps"] = pl.lit(1.0)
        step = groups.struct.field(step_group).cast(pl.Int64, strict=False) if step_group else pl.lit(None, pl.Int64)
        parts.append(wide_to_rows(sub, cols, step, "loss_scaler"))
    if not parts:
        return empty_rows()
    rows = pl.concat(parts)
    repeated = _repeats(df)
    if repeated.height:
        rows = rows.join(repeated, on="_i", how="anti", maintain_order="left")
    return shape(rows, "loss_scaler")


# DeepSpeed's fp16 optimizers (verbose) report one overflow three times: `Grad overflow on iteration N` and
# `Reducing dynamic loss scale from X to Y` from `_update_scale`, then `Overflow detected. Skipping step.
# Attempted loss scale: X, reducing to Y` (or `fp16 dynamic loss scale overflow! ...`) from `step` ([OBS]
# DeepSpeedExamples#307, DeepSpeed unfused_optimizer). The first two already give the skipped step (with its
# iteration) and the new scale, so a skip message at most REPEAT_LINES lines after a `Grad overflow on
# iteration` line (of the same rank, when it names one) gives no row.
GRAD_OVERFLOW = r"Grad overflow on iteration"
STEP_SKIP = r"Overflow detected\. Skipping step|fp16 dynamic loss scale overflow! Skipping step"
REPEAT_LINES = 3


def _repeats(df: pl.DataFrame) -> pl.DataFrame:
    """`_i` of skip messages that repeat the overflow a `Grad overflow on iteration` line just reported."""
    msg = pl.col("msg")
    first = df.filter(msg.str.contains(GRAD_OVERFLOW, literal=True))
    if first.height == 0:
        return pl.DataFrame(schema={"_i": df.schema["_i"]})
    again = df.filter(msg.str.contains(STEP_SKIP))
    if again.height == 0:
        return pl.DataFrame(schema={"_i": df.schema["_i"]})
    # `_update_scale` prints without a rank (`print` / `logger.info`) while `step` uses `log_dist(.. [Rank 0])`:
    # a rank-less first message covers the skip message of any rank.
    near = again.select("_i", "line", pl.col("rank").alias("_r")).sort("line").join_asof(
        first.select(pl.col("line").alias("_gl"), pl.col("rank").alias("_gr")).sort("_gl"),
        left_on="line", right_on="_gl", strategy="backward", check_sortedness=False,
    ).filter(pl.col("_gr").is_null() | (pl.col("_gr") == pl.col("_r")))
    return near.filter(pl.col("_gl").is_not_null() & (pl.col("line") - pl.col("_gl") <= REPEAT_LINES)).select("_i")


GRAMMAR = Grammar("loss_scaler", ("overflow", "loss scale", "OVERFLOW", "lg_loss_scale"), MATCH, extract)

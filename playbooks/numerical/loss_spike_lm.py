"""loss-spike from a short Megatron paste: the interval's token cross-entropy rises by nats no interval average moves."""

from __future__ import annotations

import math

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.numerical.loss_spike import PLAYBOOK, _turns_non_finite

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Grammars whose `loss` is a language model's token cross-entropy (natural log) averaged over every token of the
# logging interval's global batches: Megatron-LM / Megatron-DeepSpeed `lm loss` (training.py training_log, the
# average of `total_loss_dict` over `log_interval` iterations; parsers/metric_grammars/megatron.py). A difference of
# such averages is the log of a perplexity ratio, and with hundreds of thousands of tokens per interval its noise is
# a few hundredths of a nat (epfLLM/Megatron-LLM#11: 2.383, 2.472, 2.408, 2.435 on consecutive iterations). Per-batch
# losses of other grammars (a segmentation step's 0.7 -> 3.3) are left to the ratio rules of loss_spike.py.
LM_SOURCES = ("megatron",)


@PLAYBOOK.detector(("metrics",))
def detect_lm_jump(ctx: Context, th: dict) -> Detection | None:
    """In a Megatron paste too short for the rolling window, the first interval whose `lm loss` is at least
    `lm_rise_nats` above the median of every interval before it and `lm_rise_ratio` times it: the perplexity
    multiplied by e**1.5 (4.5x) or more within one logging interval (bigscience tr8-104B Exp 11: 3.11 -> 7.71 at
    iteration 11448; Exp 1: 6.44 -> 11.42; tr8b-104B Embed-Norm Exp 7: 2.67 -> 4.37). A 2x wobble of a
    fine-tuning loss (0.35 -> 0.7 is 0.35 nats) and ordinary interval noise stay quiet; a jump that turns NaN next
    is nan-loss's build-up."""
    if not ctx.has("metrics"):
        return None
    s = M.series(ctx, M.LOSS, finite=True)
    if s.height < 2 or "source" not in s.columns:
        return None
    s = M.ts.lowest_rank(s.filter(pl.col("source").is_in(LM_SOURCES)))
    if s.height < 2 or s.height > th["min_points"]:
        return None  # a longer series is judged against its rolling median (loss_spike.py)
    f = M.ts.expanding_baseline(s)
    v, base = pl.col("value"), pl.col("baseline")
    hot = f.filter((pl.col("_n") >= 1) & (base > 0) & (v - base >= th["lm_rise_nats"]) & (v >= th["lm_rise_ratio"] * base))
    if hot.height == 0:
        return None
    at = hot.row(0, named=True)
    if _turns_non_finite(ctx, at):
        return None
    later = f.filter(pl.col("step") > at["step"])
    # Still up when every later interval stays half the rise above the baseline (the run has not come back).
    stays = later.height > 0 and float(later.get_column("value").min()) >= at["baseline"] + (at["value"] - at["baseline"]) / 2
    how = (f"and stayed up for the {later.height} later interval(s)" if stays else
           "and came back" if later.height else "on the last logged interval")
    rise = at["value"] - at["baseline"]
    causes = {"bad_batch": 0.4 if stays else 0.7, "lr_too_high": 0.7 if stays else 0.4, "adam_epsilon_beta2": 0.3}
    if M.present(ctx, M.LOSS_SCALE) or ctx.events_of("fp16_overflow").height:
        causes["fp16"] = 0.5  # an fp16 run: the loss scale or overflow messages are there to compare with the jump
    summary = (f"the lm loss (token cross-entropy) rose from ~{M.fmt(at['baseline'])} to {M.fmt(at['value'])} at iteration "
               f"{at['step']}, +{M.fmt(rise, 3)} nats (perplexity x{M.fmt(math.exp(rise), 3)}) within one logging "
               f"interval, {how}")
    return Detection(
        summary=summary,
        onset=M.onset_at(at),
        evidence=M.quote(pl.concat([f.filter(pl.col("step") < at["step"]).tail(1), M.pick(f, [at["step"]]), later.head(1)],
                                   how="diagonal_relaxed")),
        evidence_count=1 + (later.height if stays else 0),
        causes=causes,
        confidence=0.75,
        facts={"spikes": 1, "first_step": at["step"], "value": at["value"], "median": at["baseline"],
               "rise_nats": rise, "recovered": not stays and later.height > 0, "short_series": True},
        ranks=[at["rank"]] if at.get("rank") is not None else [],
    )

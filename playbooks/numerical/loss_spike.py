"""loss-spike: the loss jumps far above its rolling median (robust z-score), recovering or not."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

PLAYBOOK = declare(
    Playbook(
        id="loss-spike",
        title="Loss spike",
        category="numerical",
        severity=Severity.MEDIUM,
        tables=("metrics",),
        explains=("nan-loss",),
        codes=("fp16_overflow",),
        causes=(
            Cause("bad_batch", "One batch is corrupt or far out of distribution (an isolated spike that recovers)",
                  verify="Dump and inspect the batch of the spike step (labels, lengths, value ranges)",
                  fix="Skip or fix the batch; filter the data source", prior=0.4, playbook="bad-input-data"),
            Cause("lr_too_high", "The LR is too high: spikes repeat or the loss does not come back",
                  verify="Rerun from the checkpoint before the spike with a lower LR",
                  fix="Lower the LR or lengthen warmup; rewind to a checkpoint before the spike", prior=0.3),
            Cause("adam_epsilon_beta2", "Adam's second-moment estimate lags a sudden gradient change (epsilon/beta2 settings)",
                  verify="Log Adam exp_avg_sq around the spike", fix="Lower beta2 (0.95), raise epsilon", prior=0.15,
                  playbook="optimizer-state-drift"),
            Cause("fp16", "A float16 overflow or loss-scale change coincides with the spike",
                  verify="Check overflow messages and the loss scale at the spike step", fix="bf16 or a tuned GradScaler",
                  prior=0.15, playbook="fp16-overflow"),
        ),
        verify="Inspect the batch at the spike step; compare loss with grad norm and LR around it",
        fix="Skip the batch, lower the LR, or rewind to a checkpoint before the spike",
        thresholds={
            "mads": Threshold(5, "robust z-score (MADs above the trailing median) of a spike", "PLAYBOOKS.md loss-spike (> 5 MADs)"),
            "window": Threshold(50, "logged points in the trailing window of the median/MAD baseline", "ours"),
            "strong_mads": Threshold(10, "robust z-score from which even one recovered spike is reported above info", "ours"),
            "min_points": Threshold(10, "points needed in the window before a spike can be judged", "ours"),
            "rel_floor": Threshold(0.02, "smallest noise scale as a share of the median, so that a flat loss's tiny wiggles are no spikes", "ours"),
            "upper_q": Threshold(0.95, "upper quantile of the window whose distance from the median (in sigma units) also floors the noise scale: loss noise is right-skewed", "ours"),
            "recover_points": Threshold(5, "logged points within which the loss must come back to count as recovered", "ours"),
            "short_spike": Threshold(100, "in a series too short for the window, a loss this many times the median of every point before it and the next point", "issue 13 (a value >= 100x its neighbours)"),
            "short_rise": Threshold(10, "in a series too short for the window, a loss this many times the median of every point before it, every later point staying above that level", "issue 13 (>= 10x and staying)"),
            "short_min_prior": Threshold(2, "finite points before a 10x rise in a short series (a 100x jump needs one)", "ours"),
            "short_stay": Threshold(2, "later points that must all stay 10x up for a short-series rise to count as divergence", "ours"),
            "lm_rise_nats": Threshold(1.5, "in a short Megatron paste, a rise of the interval's token cross-entropy (lm loss) this many nats above the median of every interval before it (perplexity x4.5)",
                                      "bigscience chronicles: tr8-104B Exp 1 +5.0, Exp 11 +4.6, glitch 2 +2.2; tr1-13B +4.6; tr11-176B +2.8; tr8b-104B Embed-Norm Exp 7 +1.7 nats; interval noise a few hundredths (epfLLM/Megatron-LLM#11, tr8b BNB Exp 6)"),
            "lm_rise_ratio": Threshold(1.2, "... and at least this many times that median (a high early loss moving by its own noise is no spike)", "ours"),
        },
        doc="""\
## Symptom
A logged training loss more than 5 robust deviations (MADs, scaled to sigma) above the median of the
50 points before it; the deviation is at least the window's own upper-tail spread ((p95 - median) in
sigma units), because mini-batch losses are right-skewed. Recovered when it comes back within 10% of that median within 5 logged points.

## Why it matters
A spike is either a bad batch (harmless once skipped) or the first sign of instability (LR too high,
optimizer state, fp16) that ends in divergence.

## Evidence
`metrics` `loss` (every framework spelling), per rank; `loss_scale` and overflow events for the fp16
cause. The baseline excludes the point itself, so one spike cannot hide itself; non-finite values
are left to `nan-loss`. Megatron's own rule (loss > 10x the largest seen, anchors.md) is always a
spike under this one.

## Known false positives
A noisy loss (small batches) has a wide MAD and its ordinary jumps stay under 5 MADs. Spikes that
stay under 10 MADs while the loss recovers are the tail of the noise (a long run collects many) and
are reported at info severity only. The first
points of a run have no baseline and are never spikes.

## Short series
A paste too short for the window (fewer than 11 points) is judged on blatant jumps only, against the
median of every point before (lowest rank): a value at least 100x that median and 100x the next point
(a spike, or the last line of the paste), or at least 10x it with every later point (at least 2)
still 10x up (divergence; one earlier point suffices only for a 100x jump). A 3x wobble, ordinary
early noise and a high first point (nothing before it) stay quiet.

A short Megatron paste (`lm loss`, the token cross-entropy averaged over the logging interval's global
batches) is also judged in nats: a rise of at least 1.5 nats and 1.2x above the median of every interval
before it is a spike (playbooks/numerical/loss_spike_lm.py). The average of hundreds of thousands of
tokens moves by hundredths of a nat between intervals; a 2x wobble of a small fine-tuning loss is a
fraction of a nat and stays quiet.
""",
    )
)


# What the spikes are found on (the rows quoted are read with their provenance at the end).
SLIM = ("rank", "step", "value")


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Spikes of the loss against its trailing median/MAD."""
    # Every window is within one rank: the spikes are found a batch of whole ranks at a time (a long run's loss is not
    # held whole). A rank with no more points than a baseline needs (min_points, or a full window when that is fewer)
    # has no z, so no spike: such ranks (a folder of thousands of one-line logs, one rank each) are dropped in one pass
    # over the batch before any per-rank work.
    found, points = [], 0
    judged = pl.len().over("rank") > min(int(th["min_points"]), int(th["window"]))
    for batch in M.series_batches(ctx, M.LOSS, finite=True, cols=SLIM):  # the rows quoted are read at the end
        points += batch.height
        if (part := batch.filter(judged)).height:
            found.append(M.ts.spikes(part, k=th["mads"], window=int(th["window"]), min_points=int(th["min_points"]),
                                     rel_floor=th["rel_floor"], upper_q=th["upper_q"]))
    if points < th["min_points"] + 1:
        return _short(ctx, M.series(ctx, M.LOSS, finite=True), th)
    sp = pl.concat(found) if found else pl.DataFrame()
    if sp.height == 0:
        return None
    top = sp.sort("z").row(-1, named=True)
    quoted = M.provenance(ctx, M.LOSS, sp.head(4), finite=True)  # the spikes quoted, with their lines
    first = quoted.row(0, named=True)
    # The first spike's rank is all that is read again (every rank when it has none: `recovered` reads them all then).
    s = M.series(ctx, M.LOSS, finite=True).select(SLIM) if first["rank"] is None \
        else M.series_rank(ctx, M.LOSS, first["rank"], finite=True, cols=SLIM)
    rec = M.ts.recovered(s, first["step"], first["median"], within=int(th["recover_points"]), rel_tol=0.1, rank=first["rank"])
    after = s.filter((pl.col("step") > first["step"]) & pl.col("rank").eq_missing(first["rank"])).height
    unknown = not rec and after < th["recover_points"]  # too close to the end of the log to tell
    causes = {"bad_batch": 0.9 if rec and sp.height <= 2 else 0.4, "lr_too_high": 0.4 if rec else 0.8,
              "adam_epsilon_beta2": 0.3}
    if M.present(ctx, M.LOSS_SCALE) or ctx.events_of("fp16_overflow").height:
        causes["fp16"] = 0.6
    n = f"{sp.height} spikes, the first" if sp.height > 1 else "the loss"
    summary = (f"{n} jumped to {M.fmt(first['value'])} at step {first['step']} ({first['ratio']:.3g}x its rolling median "
               f"{M.fmt(first['median'])}, {first['z']:.3g} MADs) and "
               + ("recovered" if rec else "the log ends right after it" if unknown else "did not recover"))
    if sp.height > 1 and top["step"] != first["step"]:
        summary += f"; largest {M.fmt(top['value'])} at step {top['step']}"
    # Spikes under `strong_mads` whose first one recovers are the tail of the loss noise, however many a
    # long run collects: noted (info), not a problem.
    benign = (rec or unknown) and float(sp.get_column("z").max()) < th["strong_mads"]
    return Detection(
        summary=summary,
        onset=M.onset_at(first),
        severity=Severity.INFO if benign else None,
        evidence=M.quote(pl.concat([M.provenance(ctx, M.LOSS, s.filter((pl.col("step") < first["step"])
                                                                       & (pl.col("rank").eq_missing(first["rank"]))).tail(1), finite=True),
                                    quoted], how="diagonal_relaxed")),
        evidence_count=sp.height,
        causes=causes,
        confidence=0.85 if first["z"] >= 2 * th["mads"] else 0.7,
        facts={"spikes": sp.height, "first_step": first["step"], "value": first["value"], "median": first["median"],
               "ratio": first["ratio"], "z": first["z"], "recovered": rec},
        ranks=sorted({r for r in sp.get_column("rank").to_list() if r is not None}),
    )


def _turns_non_finite(ctx: Context, at: dict) -> bool:
    """Whether the loss of the jump's rank reads NaN/Inf after the jump."""
    every = M.series(ctx, M.LOSS)
    after = every.filter((pl.col("step") > at["step"]) & pl.col("rank").eq_missing(at["rank"]))
    return after.height > 0 and not after.get_column("value").is_finite().any()


def _short(ctx: Context, s: pl.DataFrame, th: dict) -> Detection | None:
    """Too few points for the window: the first blatant jump over the median of every point before it."""
    if s.height < 2:
        return None
    f = M.ts.expanding_baseline(M.ts.lowest_rank(s))
    v, base = pl.col("value"), pl.col("baseline")
    big = v >= th["short_spike"] * base
    enough = (pl.col("_n") >= th["short_min_prior"]) | big
    stays = (pl.col("_n_after") >= th["short_stay"]) & (pl.col("_min_after") >= th["short_rise"] * base)
    spike = big & (pl.col("_next").is_null() | (v >= th["short_spike"] * pl.col("_next")))
    hot = f.filter((base > 0) & (pl.col("_n") >= 1) & enough & ((v >= th["short_rise"] * base) & stays | spike))
    if hot.height == 0:
        return None
    at = hot.row(0, named=True)
    # A jump the loss never comes down from because it turns NaN/Inf next is the build-up of nan-loss, which
    # reports it (its divergence cause); a spike finding would claim the root for a symptom.
    if _turns_non_finite(ctx, at):
        return None
    diverged = at["_min_after"] is not None and at["_n_after"] >= th["short_stay"] and at["_min_after"] >= th["short_rise"] * at["baseline"]
    later = f.filter(pl.col("step") > at["step"])
    peak = f.filter(pl.col("step") >= at["step"]).sort("value").row(-1, named=True)
    ratio = at["value"] / at["baseline"]
    if diverged:
        how = f"and stayed up for the {later.height} later points (peak {M.fmt(peak['value'])} at step {peak['step']})"
    else:
        how = "and came back" if later.height else "on the last logged point"
    summary = f"the loss jumped from ~{M.fmt(at['baseline'])} to {M.fmt(at['value'])} (x{M.fmt(ratio, 3)}) at step {at['step']} {how}"
    return Detection(
        summary=summary,
        onset=M.onset_at(at),
        evidence=M.quote(pl.concat([f.filter(pl.col("step") < at["step"]).tail(1), M.pick(f, [at["step"], peak["step"]])],
                                   how="diagonal_relaxed")),
        evidence_count=later.height + 1 if diverged else 1,
        causes={"bad_batch": 0.3 if diverged else 0.7, "lr_too_high": 0.8 if diverged else 0.4, "adam_epsilon_beta2": 0.3},
        confidence=0.8,
        facts={"spikes": 1, "first_step": at["step"], "value": at["value"], "median": at["baseline"], "ratio": ratio,
               "recovered": not diverged and later.height > 0, "short_series": True},
        ranks=[at["rank"]] if at.get("rank") is not None else [],
    )

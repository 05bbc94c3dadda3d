"""clipping-saturation: gradient clipping rescales nearly every update (clip value far below the natural norm)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

# A logged share of clipped updates (fairseq's `clip` meter, in %), and logged clip thresholds.
CLIP_SHARE = ("clip_pct", "clip", "clip_fraction", "clipped")
CLIP_VALUE = r"^(max_grad_norm|clip_norm|max_norm|clip_grad|grad_clip|clip_value|gradient_clipping)$"

PLAYBOOK = declare(
    Playbook(
        id="clipping-saturation",
        title="Gradient clipping on nearly every step",
        category="gradient",
        severity=Severity.MEDIUM,
        tables=("metrics",),
        explains=("loss-stagnation",),
        causes=(
            Cause("threshold_too_low", "The clip value is far below the model's natural gradient norm, so every update is rescaled (a smaller effective LR)",
                  verify="Compare the logged pre-clip grad norm with the clip value over the run",
                  fix="Raise max_grad_norm to around the typical grad norm (or 1.0 for transformers)", prior=0.6),
            Cause("hidden_explosion", "Gradients are exploding and clipping hides it", verify="Plot the pre-clip grad norm: is it rising?",
                  fix="Find the explosion's cause (LR, data) instead of relying on clipping", prior=0.4, playbook="gradient-explosion"),
        ),
        verify="Compare the logged grad_norm (pre-clip) with the clip value",
        fix="Raise the threshold or fix the explosion it hides",
        thresholds={
            "clipped_share": Threshold(0.9, "share of updates clipped", "PLAYBOOKS.md clipping-saturation (>=90% of steps)"),
            "min_points": Threshold(5, "logged points needed", "ours"),
        },
        doc="""\
## Symptom
The pre-clip gradient norm exceeds `max_norm` on at least 90% of the logged steps: either a logged
clip share says so (fairseq's `clip` meter, the % of clipped updates per log interval) or the logged
grad norm is compared with a logged clip value (`max_grad_norm`, `clip_norm`, ...).

## Why it matters
Clipping every step silently rescales every update: the effective learning rate is a fraction of the
configured one (training crawls), or a real explosion is hidden behind it.

## Evidence
`metrics` `clip_pct` (fairseq `clip=`), `grad_norm` (pre-clip, as `clip_grad_norm_` returns it) and a
logged clip value.

## Known false positives
Clipping that triggers on occasional spikes (a few % of steps, early training) is what clipping is
for. Without a logged clip share or clip value nothing is judged.
""",
    )
)


# What the grad-norm rules decide on (the rows quoted are read with their provenance at the end).
SLIM = ("rank", "step", "value")


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Share of clipped updates from a clip meter, else grad norm against a logged clip value."""
    share_s = M.series(ctx, CLIP_SHARE, finite=True)
    clip_val = None
    if share_s.height >= th["min_points"]:
        pct = share_s.with_columns((pl.col("value") / (100.0 if float(share_s.get_column("value").max()) > 1 else 1.0)).alias("value"))
        share = float(pct.get_column("value").mean())
        points = pct.height
        how = f"{share:.0%} of updates clipped ({share_s.item(0, 'name') if 'name' in share_s.columns else 'clip'} meter)"
    else:
        names = M.names_like(ctx, CLIP_VALUE)
        if not names:
            return None
        clip_val = float(M.series(ctx, names[0], finite=True).get_column("value").median())
        # The grad norm is read one rank at a time: how many of its points are above the clip value.
        points = above = 0
        for part in M.series_ranks(ctx, M.GRAD_NORM, finite=True, cols=SLIM):
            points += part.height
            above += int((part.get_column("value") > clip_val).sum())
        if points < th["min_points"] or clip_val <= 0:
            return None
        share = above / points  # the mean of the 0/1 flags, exactly
        how = f"pre-clip grad norm above {names[0]} = {M.fmt(clip_val)} on {share:.0%} of steps"
    if share < th["clipped_share"]:
        return None
    facts = {"clipped_share": share, "points": points, "clip_value": clip_val}
    gtxt = ""
    causes = {"threshold_too_low": 0.8, "hidden_explosion": 0.3}
    n = sum(part.height for part in M.series_ranks(ctx, M.GRAD_NORM, finite=True, cols=SLIM))
    if n:
        med = M.ts.median_over(lambda: (p.get_column("value").to_numpy()
                                        for p in M.series_ranks(ctx, M.GRAD_NORM, finite=True, cols=SLIM)), n)
        facts["median_grad_norm"] = med
        gtxt = f"; median grad norm {M.fmt(med)}" + (f" = {med / clip_val:.3g}x the clip value" if clip_val else "")
        t = M.ts.trend_over(M.series_ranks(ctx, M.GRAD_NORM, finite=True, cols=SLIM))
        if t is not None and t.r2 >= 0.5 and t.rel_change >= 1.0:
            causes = {"hidden_explosion": 0.8, "threshold_too_low": 0.4}
            gtxt += f", rising (x{1 + t.rel_change:.3g} over the run)"
    # The first, middle and last steps of the rows judged (their k-th smallest steps), and the rank of the first.
    parts = (lambda: iter([share_s.select(SLIM)])) if clip_val is None \
        else (lambda: M.series_ranks(ctx, M.GRAD_NORM, finite=True, cols=SLIM))
    quoted = [int(x) for x in M.ts.order_stats(lambda: (p.get_column("step").to_numpy() for p in parts()),
                                               [0, points // 2, points - 1])]
    first_rank = next(p.filter(pl.col("step") == quoted[0]).item(0, "rank") for p in parts()
                      if (p.get_column("step") == quoted[0]).any())
    # The grad norm's rows quoted are read at the end, with their provenance.
    src = share_s if clip_val is None else M.series_where(ctx, M.GRAD_NORM, pl.col("step").is_in(quoted), finite=True)[0]
    return Detection(
        summary=f"gradient clipping on nearly every update: {how} over {points} logged points{gtxt}",
        onset=M.onset_of_step(src, quoted[0], first_rank),
        evidence=M.quote(M.pick(src, quoted)),
        evidence_count=points,
        causes=causes,
        confidence=0.85,
        facts=facts,
    )

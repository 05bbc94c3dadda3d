"""logit-saturation: logged logit magnitudes beyond ±10, or softmax max-probability ≈ 1 for most of the run."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

LOGITS = r"logit"
MAX_PROB = r"max_prob|maxprob|confidence|top1_prob"

PLAYBOOK = declare(
    Playbook(
        id="logit-saturation",
        title="Logits saturate",
        category="numerical",
        severity=Severity.MEDIUM,
        tables=("metrics",),
        explains=("vanishing-gradient",),
        causes=(
            Cause("no_normalisation", "Nothing bounds the features before the output head (no final norm, no weight decay)",
                  verify="Log the norm of the head's input and weights", fix="A final LayerNorm, weight decay on the head, z-loss", prior=0.4),
            Cause("lr_too_high", "A high LR grows the head's weights quickly", verify="Rerun with a lower LR and compare logit growth",
                  fix="Lower the LR of the head", prior=0.35),
            Cause("overconfident_targets", "Hard one-hot targets on separable data push logits without bound",
                  verify="Check label smoothing and how separable the training data is", fix="Label smoothing (0.1), z-loss, logit clamping",
                  prior=0.25),
        ),
        verify="Log logit ranges (max |logit|) and the softmax max-probability per step",
        fix="Clamp or normalise logits, z-loss, label smoothing",
        thresholds={
            "logit_bound": Threshold(10, "max |logit| beyond which logits are saturated", "PLAYBOOKS.md logit-saturation (beyond ±8-10)"),
            "prob_bound": Threshold(0.99, "mean softmax max-probability that counts as ≈1", "PLAYBOOKS.md logit-saturation"),
            "share": Threshold(0.5, "share of logged points from the onset on that must be saturated", "PLAYBOOKS.md logit-saturation (most tokens; applied to steps)"),
            "min_points": Threshold(3, "consecutive saturated points for the onset", "ours"),
        },
        doc="""\
## Symptom
A logged logit magnitude (max |logit|, logit range) beyond ±10 for 3+ consecutive points and for most
of the run from there, or a logged softmax max-probability (mean over the batch) ≥ 0.99 likewise.

## Why it matters
Saturated softmax outputs give vanishing gradients for the confident tokens and make fp16 overflow and
loss spikes more likely.

## Evidence
`metrics` whose names carry logits (`logits_abs_max`, `logit_max`, ...) or max-probabilities
(`max_prob_mean`, `confidence`), per rank.

## Known false positives
Early in training a single large logit is transient; the share rule needs saturation for most of the
points from the onset on.
""",
    )
)


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Sustained saturated logit magnitudes or max-probabilities."""
    found = []
    for names, cond, what in ((M.names_like(ctx, LOGITS), pl.col("value").abs() > th["logit_bound"], "logit"),
                              (M.names_like(ctx, MAX_PROB), pl.col("value") >= th["prob_bound"], "prob")):
        for name in names:
            s = M.series(ctx, name, finite=True)
            o = M.ts.onset(s, cond, int(th["min_points"]))
            if o is None:
                continue
            after = s.filter((pl.col("step") >= o.step) & pl.col("rank").eq_missing(o.rank))
            share = float(after.select(cond.mean()).item())
            if share >= th["share"]:
                found.append((o, name, what, share, after))
    if not found:
        return None
    found.sort(key=lambda f: (f[0].step, f[2] != "logit"))
    o, name, what, share, after = found[0]
    peak = after.sort(pl.col("value").abs()).row(-1, named=True)
    bound = th["logit_bound"] if what == "logit" else th["prob_bound"]
    summary = (f"{name} beyond {M.fmt(bound)} from step {o.step} ({share:.0%} of the points since), "
               f"peak {M.fmt(peak['value'])} at step {peak['step']}")
    others = sorted({f[1] for f in found[1:]})
    if others:
        summary += f"; also {', '.join(others)}"
    return Detection(
        summary=summary,
        onset=M.onset_of_step(after, o.step, o.rank),
        evidence=M.quote(M.pick(after, [o.step, peak["step"]], o.rank)),
        evidence_count=int(after.height * share),
        causes={"no_normalisation": 0.6, "lr_too_high": 0.5, "overconfident_targets": 0.5},
        confidence=0.8,
        facts={"series": name, "onset_step": o.step, "share": share, "peak": peak["value"]},
    )

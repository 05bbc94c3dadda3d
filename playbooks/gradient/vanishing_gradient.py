"""vanishing-gradient: the gradient norm (or the early layers' share of it) is vanishingly small while the loss is not learned."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import events

from forensics.contracts.context import Context, event_count, evidence_rows, onset_of
from forensics.contracts.model import Cause, Detection, Severity

# Per-layer gradient norms: names with grad and norm that are not the global norm or an adapter's.
LAYER_GRADS = r"grad.*norm.+|.+grad.*norm|grad_norm/"
NOT_LAYER = r"^grad_norm$|lora|clip|max_grad"

PLAYBOOK = declare(
    Playbook(
        id="vanishing-gradient",
        title="Vanishing gradients",
        category="gradient",
        severity=Severity.HIGH,
        tables=("metrics", "events"),
        explains=("loss-stagnation", "loss-scale-runaway"),
        causes=(
            Cause("deep_no_norm", "A deep stack without normalisation or residual connections", verify="Per-layer grad norms by depth",
                  fix="LayerNorm/BatchNorm, residual connections", prior=0.45),
            Cause("saturating_activation", "Saturating activations (sigmoid/tanh) squash the gradient layer after layer",
                  verify="Log activation statistics (share of units near 0 or 1)", fix="ReLU/GELU, careful init", prior=0.35),
            Cause("small_init", "Weights initialised too small", verify="Weight std per layer at init", fix="Kaiming/Xavier init", prior=0.2),
        ),
        verify="Per-layer gradient norms by depth (first vs last layer)",
        fix="Normalisation layers, residual connections, non-saturating activations, proper init",
        thresholds={
            "tiny": Threshold(1e-6, "global grad norm below which gradients have vanished", "PLAYBOOKS.md vanishing-gradient (below 1e-6 sustained); anchors.md SMD VanishingGradient 1e-7 mean |grad|"),
            "layer_ratio": Threshold(1e-3, "smallest over largest per-layer grad norm below which the early layers get no gradient", "anchors.md AutoTrainer (first/last layer norm ratio < 1e-3)"),
            "min_points": Threshold(3, "consecutive logged points", "ours"),
            "share": Threshold(0.5, "share of the logged points from the onset on that must stay vanished", "ours"),
            "learned": Threshold(0.5, "a loss that fell below this share of its start has learned: tiny gradients then mean convergence", "ours"),
        },
        doc="""\
## Symptom
The logged global gradient norm stays above 0 but below 1e-6 for 3+ consecutive points (and for most
of the run from there), or logged per-layer gradient norms differ by more than 1000x (smallest over
largest below 1e-3) likewise; or an explicit vanishing-gradient alert naming layers.

## Why it matters
The early layers stop learning; the loss stalls at the level a shallow model reaches.

## Evidence
`metrics` `grad_norm` and per-layer norms (`grad_norm_first_layer`, `grad_norm/layer.0`, ...);
`events` `vanishing_gradient` alerts where a parser emits them.

## Known false positives
A converged model has tiny gradients too: when the loss fell below half of its starting level the
global-norm rule does not fire. A norm printed as exactly 0 (`0.0000`) is rounding or no gradient at
all, not a vanishing one (see `loss-scale-runaway`, `lora-silent-zero`).
""",
    )
)


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Layer-ratio rule first (it names the layers), then the global-norm rule."""
    hit = _layer_ratio(ctx, th) or _global(ctx, th)
    if hit is None:
        return None
    summary, onset, quoted, facts, count = hit
    loss = M.series_columns(ctx, M.LOSS, ("value",), finite=True)  # the values alone, read a rank at a time
    if loss.height >= 4:
        tail = loss.tail(max(2, loss.height // 4))
        summary += f"; loss stays ~{M.fmt(float(tail.get_column('value').median()))}"
    return Detection(summary=summary, onset=onset, evidence=M.quote(quoted), evidence_count=count,
                     causes={"deep_no_norm": 0.6, "saturating_activation": 0.5, "small_init": 0.3}, confidence=0.85, facts=facts)


@PLAYBOOK.detector(("events",))
def detect_alerts(ctx: Context, th: dict) -> Detection | None:
    """Explicit vanishing-gradient alerts from a monitoring callback."""
    ev = events(ctx, ("vanishing_gradient",))
    if ev.height == 0:
        return None
    return Detection(summary=f"vanishing-gradient alert: {str(ev.item(0, 'message'))[:160]}", onset=onset_of(ev),
                     evidence=evidence_rows(ev), evidence_count=event_count(ev), causes={"deep_no_norm": 0.5}, confidence=0.8)


def _layer_ratio(ctx: Context, th: dict):
    layers = M.names_like(ctx, LAYER_GRADS, exclude=NOT_LAYER)
    if len(layers) < 2:
        return None
    parts = [M.series(ctx, n, finite=True).with_columns(pl.lit(n).alias("name")) for n in layers]
    allp = pl.concat([p for p in parts if p.height], how="diagonal_relaxed")
    per = allp.group_by("rank", "step").agg(
        pl.col("value").min().alias("lo"), pl.col("value").max().alias("hi"),
        pl.col("name").sort_by("value").first().alias("lo_name"), pl.col("name").sort_by("value").last().alias("hi_name"),
        pl.len().alias("n"),
    ).filter((pl.col("n") >= 2) & (pl.col("hi") > 0)).with_columns((pl.col("lo") / pl.col("hi")).alias("value")).sort("rank", "step")
    o = M.ts.onset(per, pl.col("value") < th["layer_ratio"], int(th["min_points"]))
    if o is None:
        return None
    after = per.filter((pl.col("step") >= o.step) & pl.col("rank").eq_missing(o.rank))
    share = float((after.get_column("value") < th["layer_ratio"]).mean())
    if share < th["share"]:
        return None
    at = after.row(0, named=True)
    med = float(after.get_column("value").median())
    summary = (f"{at['lo_name']} is {M.fmt(at['lo'])} while {at['hi_name']} is {M.fmt(at['hi'])} at step {o.step} "
               f"(ratio {M.fmt(at['value'], 2)}, median {M.fmt(med, 2)} over {after.height} logged points, {share:.0%} below "
               f"{M.fmt(th['layer_ratio'])})")
    quoted = allp.filter(pl.col("step") == o.step)
    row = quoted.row(0, named=True) if quoted.height else {"step": o.step, "rank": o.rank}
    return summary, M.onset_at(row), quoted, {"onset_step": o.step, "layer_ratio": at["value"], "median_ratio": med,
                                              "smallest": at["lo_name"], "largest": at["hi_name"]}, after.height


def _global(ctx: Context, th: dict):
    tiny = (pl.col("value") > 0) & (pl.col("value") < th["tiny"])
    points = [0]

    def ranks():  # the grad norm one rank at a time, counted (numbers only: the quoted row is fetched at the end)
        for part in M.series_ranks(ctx, M.GRAD_NORM, finite=True, cols=M.NUMBERS):
            points[0] += part.height
            yield part

    o = M.ts.onset_over(ranks(), tiny, int(th["min_points"]))
    if points[0] < th["min_points"] or o is None:
        return None
    # The onset's rank is all that is read again (every rank when it has none: the quote then picks among them all).
    g = M.series_columns(ctx, M.GRAD_NORM, M.NUMBERS, finite=True) if o.rank is None \
        else M.series_rank(ctx, M.GRAD_NORM, o.rank, finite=True, cols=M.NUMBERS)
    after = g.filter((pl.col("step") >= o.step) & pl.col("rank").eq_missing(o.rank))
    share = float(after.select(tiny.mean()).item())
    if share < th["share"]:
        return None
    loss = M.series_columns(ctx, M.LOSS, ("step", "value"), finite=True)
    if loss.height >= 4:
        start = float(loss.head(max(2, loss.height // 10)).get_column("value").median())
        now = float(loss.filter(pl.col("step") >= o.step).get_column("value").median() or start)
        if start > 0 and now < th["learned"] * start:
            return None  # converged, not vanished
    summary = f"grad norm {M.fmt(o.value)} from step {o.step}, below {M.fmt(th['tiny'])} on {share:.0%} of {after.height} logged points"
    # The quoted rows (the onset's) with their file and line: the one row of each rank at that step.
    at = M.provenance(ctx, M.GRAD_NORM, M.pick(g, [o.step], o.rank), finite=True)
    return summary, M.onset_of_step(at, o.step, o.rank), at, {"onset_step": o.step, "share": share}, after.height

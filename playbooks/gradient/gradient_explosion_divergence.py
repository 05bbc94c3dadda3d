"""gradient-explosion from a short series: the loss climbs back from its minimum while the grad norm rises with it."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.gradient.gradient_explosion import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """After its minimum the loss stays `div_stay_factor` above it for `div_min_after`+ points, ends
    `div_loss_factor` above it having given back `div_giveback` of its fall, and the grad norm at the end is
    `div_gnorm_factor` its value at the minimum (paiml/entrenar#274: loss 1.43 -> 10.03, gnorm 7.7 -> 70.7)."""
    if not ctx.has("metrics"):
        return None
    # The lowest rank's numbers; the rows quoted get their file and line at the end.
    loss = M.lowest_rank_numbers(ctx, M.LOSS, finite=True)[0].sort("step")
    g = M.lowest_rank_numbers(ctx, M.GRAD_NORM, finite=True)[0].sort("step")
    if loss.height < th["div_min_after"] + 2 or g.height < 2:
        return None
    v = loss.get_column("value")
    i = int(v.arg_min())
    low, start, end = float(v[i]), float(v[0]), float(v[-1])
    after = v.slice(i + 1)
    if i == 0 or low <= 0 or after.len() < th["div_min_after"]:
        return None
    if float(after.min()) < th["div_stay_factor"] * low or end < th["div_loss_factor"] * low:
        return None
    if start <= low or (end - low) < th["div_giveback"] * (start - low):
        return None
    min_step, end_step = int(loss.item(i, "step")), int(loss.item(-1, "step"))
    g_min = g.filter(pl.col("step") <= min_step).tail(1)
    g_end = g.filter(pl.col("step") <= end_step).tail(1)
    if g_min.height == 0 or g_end.height == 0 or int(g_end.item(0, "step")) <= min_step:
        return None
    gn0, gn1 = float(g_min.item(0, "value")), float(g_end.item(0, "value"))
    if gn0 <= 0 or gn1 < th["div_gnorm_factor"] * gn0:
        return None
    # A warm restart raises the LR and the loss with it: no divergence of the model.
    lr = M.series_columns(ctx, M.LR, M.NUMBERS, finite=True)
    if lr.height:
        lr_min = lr.filter(pl.col("step") <= min_step).tail(1)
        lr_up = lr.filter(pl.col("step") > min_step).get_column("value").max()
        if lr_min.height and lr_up is not None and float(lr_up) > 1.5 * float(lr_min.item(0, "value")):
            return None
    # A resumed or restarted loop (the step goes backwards) starts a new curve: no divergence of one run. Asked last:
    # it reads every loss line's position, and a healthy loss never gets here.
    if M.ts.restarts(ctx.metrics_lazy(M.LOSS), M.LOSS).height:
        return None
    shown = pl.concat([M.provenance(ctx, M.LOSS, loss.slice(i, 2), finite=True),
                       M.provenance(ctx, M.LOSS, loss.tail(1), finite=True),
                       M.provenance(ctx, M.GRAD_NORM, g_end, finite=True)], how="diagonal_relaxed")
    return Detection(
        summary=(f"loss diverged after its minimum {M.fmt(low)} at step {min_step}: {M.fmt(end)} ({end / low:.1f}x) at step "
                 f"{end_step}, back near its start ({M.fmt(start)}), while grad_norm rose {M.fmt(gn0)} -> {M.fmt(gn1)} "
                 f"({gn1 / gn0:.1f}x)"),
        onset=M.onset_at(shown.row(1, named=True)),
        evidence=M.quote(pl.concat([shown.slice(0, 1), shown.slice(2)], how="diagonal_relaxed")),
        evidence_count=after.len() + 1,
        causes={"lr_too_high": 0.8, "no_clipping": 0.5, "bad_batch": 0.2},
        confidence=0.75,
        facts={"loss_min": low, "loss_end": end, "grad_norm_at_min": gn0, "grad_norm_end": gn1, "onset_step": int(loss.item(i + 1, "step"))},
    )

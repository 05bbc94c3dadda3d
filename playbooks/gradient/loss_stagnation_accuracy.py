"""loss-stagnation from the accuracy alone: identical, as printed, at every evaluation from the first (nothing learned)."""

from __future__ import annotations

from forensics.playbooks import metric_series as M
from forensics.playbooks.gradient.loss_stagnation import PLAYBOOK
from forensics.playbooks.gradient.loss_stagnation_chance import ACC, EVAL_LOSS

from forensics.contracts.context import Context
from forensics.contracts.model import Detection


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """A run that logs no loss, only an accuracy per epoch, with that accuracy identical as printed from its first
    point over `exact_min_points` or more: a model that learns moves its accuracy from the first epoch on; one
    stuck on a constant prediction repeats the share of one class (ml-explore/mlx#188: `Epoch N: Test accuracy 0.113`
    for ten epochs at lr 1e-1, the share of MNIST's most frequent digit; 0.851 -> 0.947 at lr 1e-3). Quiet at the
    accuracy's ceiling (a memorised set) and wherever a loss is logged (the loss rules judge those runs)."""
    if not ctx.has("metrics") or M.present(ctx, (*M.LOSS, *EVAL_LOSS)):
        return None
    for name in M.names_like(ctx, ACC):
        s = M.ts.lowest_rank(M.series(ctx, name, finite=True)).sort("step")
        if s.height < th["exact_min_points"] or s.get_column("value").n_unique() != 1:
            continue
        a = float(s.item(0, "value"))
        if M.as_fraction(a) >= th["exact_acc_ceiling"]:
            continue
        first = s.row(0, named=True)
        return Detection(
            summary=(f"{name} is {M.fmt(a)} at every one of the {s.height} logged evaluations, as printed, from the first "
                     f"(step {first['step']}) on, and no loss is logged: the model has not changed its predictions since "
                     "training started (a constant prediction scores the share of one class)"),
            onset=M.onset_at(first),
            evidence=M.quote_ends(s),
            evidence_count=s.height,
            causes={"weights_frozen": 0.4, "vanishing_gradient": 0.4, "zero_gradients": 0.3, "labels_masked": 0.2},
            confidence=0.75,
            facts={"accuracy": a, "points": s.height, "series": name},
        )
    return None

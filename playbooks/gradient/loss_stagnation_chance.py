"""loss-stagnation from a handful of points: the loss at ln(K) with the accuracy at 1/K (a K-class model at chance)."""

from __future__ import annotations

import math

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.gradient.loss_stagnation import PLAYBOOK
from forensics.playbooks.gradient.loss_stagnation import detect as detect_window

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Class counts of the datasets people train classifiers on (binary, MNIST/CIFAR-10, CIFAR-100, ImageNet-1k):
# with no accuracy logged, a loss flat at ln(K) names K only for these (any level is ln of *some* number).
COMMON_CLASSES = (2, 10, 100, 1000)
# ln of the largest head anyone configures (a billion classes): a level above it is a diverged loss, not chance, and
# ln(K) arithmetic on it would overflow (exp) or build a number of billions of digits (10 ** floor(level / ln 10)).
MAX_LN_CLASSES = math.log(1e9)
# Which split a loss or accuracy belongs to, from its canonical name's prefix.
_SPLIT = r"^(eval_|val_|valid_|validation_|test_)"
ACC = r"^(?:eval_|val_|valid_|validation_|test_)?(?:acc|accuracy|top1|acc1|acc@1|prec@1|prec1)$"
ERROR = r"^(?:eval_|val_|valid_|validation_|test_)?error$"
EVAL_LOSS = ("eval_loss", "test_loss", "val_loss", "valid_loss", "validation_loss")
# Stepless bare decimal columns (parsers/bare_columns.py): `unnamed_1`, `unnamed_2`, ..
UNNAMED = r"^unnamed_\d+$"


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """The last points of a loss at ln(K) ± chance_tol, with its split's accuracy at 1/K (or, with no accuracy,
    flat at ln(K) for a common class count K from the first point). Runs where the window rule already
    decides are left to it."""
    if not ctx.has("metrics") or detect_window(ctx, th) is not None:
        return None
    accs = {split_of(n): n for n in M.names_like(ctx, ACC)}
    errs = {split_of(n): n for n in M.names_like(ctx, ERROR)}
    losses = [n for n in (M.present(ctx, M.LOSS)[:1] + M.present(ctx, EVAL_LOSS))]
    for name in losses:
        split = split_of(name)
        found = _at_chance(ctx, name, accs.get(split), errs.get(split), th)
        if found is not None:
            return found
    return _unnamed_pair_at_chance(ctx, th)


def _unnamed_pair_at_chance(ctx: Context, th: dict) -> Detection | None:
    """Bare decimal columns with no names (`2.302583 0.117188`, purine/purine2#16: a `print(loss, acc)` of the nin_cifar
    example): one column at ln(K) and another, a fraction on every line, at 1/K. Nothing names either column, so
    the two coincidences together are the proof, and K must be a common class count (never the count the level
    itself implies, which would make any level a match). And the loss column repeats exactly as printed over its last
    `exact_min_points` lines: a network whose outputs no longer depend on its input prints one loss to every digit
    (purine2: 2.302583 on the last 15 lines), while a healthy run's first iterations, near ln(K) too, still move."""
    cols = M.names_like(ctx, UNNAMED)
    if len(cols) < 2:
        return None
    for loss in cols:
        last = M.ts.lowest_rank(M.series(ctx, loss, finite=True)).sort("step").tail(int(th["exact_min_points"]))
        if last.height < th["exact_min_points"] or last.get_column("value").n_unique() != 1:
            continue
        for acc in cols:
            if acc == loss:
                continue
            a = M.series(ctx, acc, finite=True).get_column("value")
            if a.len() == 0 or float(a.min()) < 0.0 or float(a.max()) > 1.0:
                continue  # an accuracy as a fraction on every line
            found = _at_chance(ctx, loss, acc, None, th, implied_k=False)
            if found is not None:
                return found
    return None


def split_of(name: str) -> str:
    """`eval` for eval/val/validation/test names (one held-out set), `` for training ones."""
    return "eval" if any(name.startswith(p) for p in ("eval_", "val_", "valid_", "validation_", "test_")) else ""


def _at_chance(ctx: Context, name: str, acc_name: str | None, err_name: str | None, th: dict,
               implied_k: bool = True) -> Detection | None:
    s = M.series(ctx, name, finite=True)
    ranks = s.get_column("rank").drop_nulls()
    if ranks.len():
        s = s.filter(pl.col("rank") == ranks.min())
    s = s.sort("step", "file", "line", nulls_last=True)
    n = s.height
    if n < th["chance_min_points"]:
        return None
    judged = s.tail(max(int(th["chance_min_points"]), n // 2))
    v = judged.get_column("value")
    # The lower quartile: a loss stuck at chance has upward outliers (hard batches), never points well below it.
    level = float(v.quantile(0.25))
    if level < math.log(2) * (1 - th["chance_tol"]) or not level <= MAX_LN_CLASSES:
        return None
    acc = _accuracy(ctx, acc_name, err_name, judged)
    # K: a common class count, or (with an accuracy to confirm it) the count the loss itself implies.
    ks = sorted({*COMMON_CLASSES, max(2, round(math.exp(level)))} if acc is not None and implied_k else set(COMMON_CLASSES),
                key=lambda c: abs(math.log(c) - level))
    k = ks[0]
    ln_k = math.log(k)
    tol = th["chance_tol"] * ln_k
    # With no accuracy, a level far from every common class count may still be ln(K) of the head the run configured
    # (3000 SwAV prototypes, 4096 codes): only a round count, held to the printed digits, late in the run (below).
    round_k = _round_count(level, th["chance_round_tol"]) if acc is None and implied_k and abs(level - ln_k) > tol else None
    if round_k is not None:
        k, ln_k = round_k, math.log(round_k)
        tol = th["chance_round_tol"] * ln_k
    if abs(level - ln_k) > tol or float(v.min()) < ln_k - 3 * tol:
        return None
    # Still falling through ln(K) within the judged points (a model learning passes that level on its way down,
    # its accuracy passing 1/K on the way up): stuck is flat, not a descent that happens to be there now.
    if float(v.tail(1).item()) < (1 - th["min_progress"]) * float(v.head(1).item()):
        return None
    if acc is not None:
        if abs(acc - 1 / k) > th["chance_acc_tol"] / k:
            return None
        why = f"accuracy {acc:.3g} ≈ 1/{k}"
    elif round_k is not None:
        # A round count the level implies: the last points on ln(K) to the printed digits (no batch moves a uniform
        # guess's loss), and late, past where a healthy run's first iterations sit near the entropy of its initial outputs.
        tail = s.tail(max(int(th["chance_min_points_loss_only"]), n // 2))
        spread = float((tail.get_column("value") - ln_k).abs().max())
        if tail.height < th["chance_min_points_loss_only"] or spread > tol or not _late(ctx, tail, th, epochs=True):
            return None
        why = f"the last {tail.height} points all there, late in the run"
    else:
        every = s.get_column("value")
        # With no accuracy: more points, and at ln(K) from the first point on; or, past the steps in which a healthy
        # run leaves chance, fewer points held tighter to ln(K) (a paste of a few late iterations).
        # Every point in the tight band: a model at a uniform guess prints the same loss to three or four digits, while a
        # healthy late loss that happens to sit near ln(K) moves by more than the band between logged points.
        spread = float((every - ln_k).abs().max())
        late = _late(ctx, s, th) and spread <= th["chance_late_tol"] * ln_k
        if n < th["chance_min_points_loss_only"] and not late:
            return None
        if abs(float(every.quantile(0.25)) - ln_k) > tol or float(every.min()) < ln_k - 3 * tol:
            return None
        # No learning on the way: the last third not `min_progress` below the first third (a loss falling through
        # ln(K) on its way down is learning, however close its last points are).
        third = max(1, n // 3)
        if float(every.tail(third).median()) < (1 - th["min_progress"]) * float(every.head(third).median()):
            return None
        why = f"flat there from the first logged point (step {s.item(0, 'step')})"
    first = judged.row(0, named=True)
    lr_max = None
    lr_s = M.series(ctx, M.LR, finite=True)
    if lr_s.height:
        lr_max = float(lr_s.get_column("value").max())
    causes = {"lr_zero": 1.0, "weights_frozen": 0.1} if lr_max is not None and lr_max <= 1e-8 else \
        {"weights_frozen": 0.5, "vanishing_gradient": 0.4, "labels_masked": 0.4, "clipped_updates": 0.2}
    over = f"{k} classes" if round_k is None else f"{k} outputs (a round head size: every judged point within {spread / ln_k:.1e} of it)"
    summary = (f"{name} at {M.fmt(level)} ≈ ln({k}) = {ln_k:.4g}, the loss of a uniform guess over {over}, "
               f"over the last {judged.height} of {n} logged points; {why}")
    return Detection(
        summary=summary,
        onset=M.onset_at(first),
        evidence=M.quote(pl.concat([judged.head(1), judged.tail(1)], how="diagonal_relaxed")),
        evidence_count=judged.height,
        causes=causes,
        confidence=0.85,
        facts={"level": level, "classes": k, "ln_classes": ln_k, "accuracy": acc, "points": n, "series": name},
    )


def _round_count(level: float, rel_tol: float) -> int | None:
    """The round count K (one significant digit, d x 10^n, or a power of two) whose ln is within `rel_tol` of `level`:
    the sizes people give a classifier or prototype head. Any level is ln of some number; only these are configured."""
    if level <= math.log(2):
        return None
    mag = 10 ** math.floor(level / math.log(10))
    cands = [d * mag * f for d in range(1, 10) for f in (1, 10)] + [2 ** round(level / math.log(2))]
    k = min(cands, key=lambda c: abs(math.log(c) - level))
    return int(k) if abs(math.log(k) - level) <= rel_tol * level else None


def _late(ctx: Context, s: pl.DataFrame, th: dict, epochs: bool = False) -> bool:
    """The series starts past where a healthy run has left chance: at step `chance_late_step`, or (a log that prints
    epochs but no global step, SwAV's `Epoch: [163][50]`) at epoch `chance_late_epoch`; with `epochs`, also when its
    points span `chance_round_epochs` epochs (per-epoch averages, lightly's `epoch: 03, loss: 6.23837`)."""
    if int(s.item(0, "step") or 0) >= th["chance_late_step"]:
        return True
    ep = M.series(ctx, ("epoch",), finite=True).join(s.select("file", "line"), on=["file", "line"], how="semi")
    if ep.height == 0:
        return False
    first = ep.join(s.head(1).select("file", "line"), on=["file", "line"], how="semi")
    if first.height and float(first.item(0, "value")) >= th["chance_late_epoch"]:
        return True
    return epochs and ep.get_column("value").n_unique() >= th["chance_round_epochs"]


def _accuracy(ctx: Context, acc_name: str | None, err_name: str | None, judged: pl.DataFrame) -> float | None:
    """Median accuracy (as a fraction) over the judged steps, from an accuracy or an error-rate series."""
    for nm, flip in ((acc_name, False), (err_name, True)):
        if nm is None:
            continue
        a = M.series(ctx, nm, finite=True)
        if a.height == 0:
            continue
        lo = judged.item(0, "step")
        tail = a.filter(pl.col("step") >= lo) if a.filter(pl.col("step") >= lo).height else a.tail(judged.height)
        val = float(tail.get_column("value").median())
        # Percentages (`Accuracy: 10.17`, `10.64 %`) -> fractions.
        if float(a.get_column("value").max()) > 1.0:
            val /= 100.0
        return 1.0 - val if flip else val
    return None

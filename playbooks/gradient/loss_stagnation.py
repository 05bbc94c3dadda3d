"""loss-stagnation: the loss is flat while training goes on, either never having learned or stuck at ln(vocab size)."""

from __future__ import annotations

import math

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

# Metrics only reinforcement-learning loops log (SB3 `train/policy_gradient_loss`, `train/value_loss`, `train/approx_kl`,
# `rollout/ep_rew_mean`, DQN's `rollout/exploration_rate`; openai baselines `policy_loss`/`value_loss`; verl
# `actor/pg_loss`, `critic/vf_loss`): there the logged loss is a surrogate objective whose targets move with the policy
# (PPO's clipped objective plus value and entropy terms, DQN's TD loss), not a quantity that falls as the agent learns,
# so a flat one says nothing; the run is judged by its rewards (stable-baselines3 docs/common/logger.rst, "Explanation
# of logger output", DLR-RM/stable-baselines3#803).
RL_METRICS = r"(^|/)(policy_gradient_loss|policy_loss|pg_loss|value_loss|vf_loss|approx_kl|ep_rew_mean|ep_len_mean|exploration_rate)$"

PLAYBOOK = declare(
    Playbook(
        id="loss-stagnation",
        title="Loss stagnates",
        category="gradient",
        severity=Severity.HIGH,
        tables=("metrics",),
        explains=(),
        # Read beside a loss of exactly 0 (loss_stagnation_masked): samples whose labels a collator masked whole.
        # Read alone: a library's check that every label is masked (loss_stagnation_masked).
        # The class count the log announces (loss_stagnation_declared_classes): the K of a loss at ln(K).
        codes=("all_labels_masked", "completion_template_not_found", "declared_class_count"),
        causes=(
            Cause("lr_zero", "The learning rate is zero (or tiny), or never warmed up", verify="Plot the logged LR; check learning_rate / warmup in the config",
                  fix="Set a non-zero LR; check the warmup and scheduler", prior=0.3, playbook="lr-schedule-anomaly"),
            Cause("weights_frozen", "All trainable weights are frozen or zeroed (LoRA adapters that never move, requires_grad off)",
                  verify="Count trainable parameters; log adapter weight norms", fix="Fix the trainable mask / optimizer parameter list",
                  prior=0.25, playbook="lora-silent-zero"),
            Cause("vanishing_gradient", "Gradients vanish before they reach most of the model", verify="Per-layer grad norms",
                  fix="Normalisation, residuals, init", prior=0.2, playbook="vanishing-gradient"),
            Cause("clipped_updates", "Every update is clipped to a tiny norm", verify="Compare grad norm with the clip value",
                  fix="Raise the clip value", prior=0.1, playbook="clipping-saturation"),
            Cause("zero_gradients", "The optimizer step sees zero gradients", verify="Print a parameter's grad before optimizer.step()",
                  fix="Fix zero_grad placement / detached loss", prior=0.1, playbook="loss-scale-runaway"),
            Cause("labels_masked", "All labels are masked (-100) or the loss ignores the targets", verify="Count unmasked label tokens per batch",
                  fix="Fix the collator / label masking", prior=0.05),
        ),
        verify="Plot loss and LR; count trainable parameters",
        fix="As the cause says",
        thresholds={
            "flat_tol": Threshold(0.05, "fitted relative change of the loss over the judged tail below which it is flat", "PLAYBOOKS.md loss-stagnation (relative change below a tolerance over a window)"),
            "tail_share": Threshold(0.5, "share of the logged points, at the end of the run, that are judged", "ours"),
            "min_points": Threshold(8, "logged points needed in the judged tail", "ours"),
            "min_steps": Threshold(50, "training steps the logged loss must span before it is judged", "ours"),
            "min_progress": Threshold(0.1, "relative fall from the starting level the flat level must show to count as having learned", "ours; anchors.md SMD LossNotDecreasing (any decrease) is too weak for noisy mini-batch losses"),
            "chance_tol": Threshold(0.02, "relative distance of the loss from ln(K) that counts as at chance (K classes)", "issue 13 (ln(K) ± 2%)"),
            "chance_acc_tol": Threshold(0.25, "relative distance of the accuracy from 1/K that counts as at chance", "ours"),
            "chance_min_points": Threshold(3, "last logged points that must sit at ln(K) with the accuracy at 1/K", "ours"),
            "chance_min_points_loss_only": Threshold(5, "logged points needed when no accuracy is logged (the loss alone at ln(K) from the first point)", "ours"),
            "chance_late_step": Threshold(2000, "first judged step from which fewer points (chance_min_points) suffice for a loss alone at ln(K): past the start, where a healthy run sits at chance", "ours; as topk_min_steps (BVLC/caffe#59: ImageNet at 6.907 = ln(1000) at iteration 78000)"),
            "chance_late_tol": Threshold(0.005, "relative distance of every point of the loss from ln(K) for the few-points late rule (tighter than chance_tol)", "ours"),
            "chance_late_epoch": Threshold(10, "epoch from which a loss alone at ln(K) is judged late (as chance_late_step, for logs that print an epoch but no global step)", "ours; a healthy run leaves chance within its first epochs (facebookresearch/swav#12: SwAV's loss falls from ln(3000) within the first epochs)"),
            "chance_round_epochs": Threshold(3, "distinct epochs the last points at ln(K) of a round head size must span to count as late when no step or epoch says so", "ours; lightly-ai/lightly#1521 (ln 512 to five digits over epochs 2-5)"),
            "chance_round_tol": Threshold(0.0002, "relative distance of every point from ln(K) when K is not a common class count but the round count (d x 10^n or 2^n) the loss itself implies: the level coincides with a configured head size only when it holds to the printed digits", "ours; facebookresearch/swav#12 (8.0065-8.0068 = ln 3000 over an epoch)"),
            "late_slice_share": Threshold(0.25, "logged span over the last logged step below which the series is a late slice of a run (its first point no start of training)", "ours"),
            "exact_min_points": Threshold(5, "last logged points at which the loss and the accuracy both repeat exactly as printed (no weight changed)", "ours; keras-team/keras#4784 (13 epochs identical to 4 decimals)"),
            "exact_acc_ceiling": Threshold(0.99, "accuracy at or above which an exactly repeating record is a memorised training set, not a stuck one", "ours"),
            "topk_ratio_tol": Threshold(0.2, "relative distance of top-5/top-1 accuracy from 5 (a uniform guess) that counts as at chance", "ours; dmlc/cxxnet#84, #3, #245 (ratio 4.8-5.0 at chance)"),
            "topk_max_top1": Threshold(0.11, "top-1 accuracy (fraction) above which the model is past chance of a 10+-class task", "ours"),
            "topk_min_steps": Threshold(2000, "training batches the at-chance points must span when they span fewer than two epochs", "ours; a healthy ImageNet run leaves chance within its first ~1000 batches"),
            "topk_progress": Threshold(1.5, "last over first top-1 accuracy at or above which the model is learning", "ours"),
            "saturated_tol": Threshold(0.02, "relative distance of the loss from -ln(1e-7)·(1 - accuracy), a cross-entropy of one-hot outputs clipped at Keras' epsilon", "ours; kcct-fujimotolab/3DCNN#2 (13.4866 = 16.118 x (1 - 0.1633)) within 0.2%"),
            "saturated_min_points": Threshold(3, "lines of one split on which the loss and the accuracy printed together must all satisfy the clipped one-hot identity", "ours"),
            "saturated_acc_ceiling": Threshold(0.9, "accuracy (fraction) above which the identity is not judged: 16.1·(1 - acc) is then a small loss a healthy model may print", "ours"),
            "lnv_tol": Threshold(0.05, "nats between the flat level and ln(V) of a common vocabulary size for the uniform-prediction case", "ours"),
        },
        doc="""\
## Symptom
Over the last half of the logged points the loss is flat (least-squares trend changes it by less
than 5%, or by less than two standard errors of that change for a noisy loss, up to 20%) and either it never learned (the flat level is not 10% below the starting level) or it sits
at ln(V) of a common vocabulary size (within 0.05 nats): the entropy of a uniform prediction,
≈12.45 for 256,000 tokens, ≈10.37 for 32,000. The implied vocabulary size is reported. A fine-tuning
library's own check that every label is the ignore index -100 (Unsloth's `All labels in your dataset are -100.
Training losses will be all 0.`, raised before the first step) is the same failure announced: nothing to learn from.

## Why it matters
The job runs, logs and checkpoints normally while learning nothing.

## Evidence
`metrics` `loss` (every framework spelling) and `lr`; the onset is the first point from which the
smoothed loss stays within the flat band. An LR of 0 throughout makes `lr_zero` the first cause;
other playbooks (LoRA, vanishing gradient, clipping, loss-scale runaway) explain it when they fire.
A completion-only collator's warning that a sample was masked whole (TRL `... This instance will be ignored in loss
calculation.`) beside a loss of exactly 0 at half or more of its logged points is the labels-masked case (high); the
warnings beside a loss mostly above 0 stay quiet (a few truncated samples among learning ones).

## Known false positives
A reinforcement-learning loss (the run logs policy-gradient/value losses, approx_kl or episode rewards: SB3,
baselines, verl) is a surrogate whose targets move with the policy: its flat stretch is not judged.
A loss that fell and then flattened has converged: the 10%-progress rule keeps it quiet unless the
level is ln(V). A loss and an accuracy that repeat exactly, as printed, over the last 5+ logged points (`loss: 4.4380 - acc: 0.7247`
every epoch) mean no weight changed: reported whatever the number of steps, unless the accuracy is at its ceiling
(a memorised training set), the loss is 0, or a logged grad norm moves (a loss normalised by design, each term divided
by its own detached value, reads constant while training). A constant loss with a moving accuracy is no finding.
Top-1/top-5 accuracies (`rec@1`/`rec@5`, `Acc@1`/`Acc@5`, `top_k_accuracy_5`) at chance: top-5 about 5x top-1 (a
uniform guess), top-1 at most 11%, not rising, over points that span two epochs or 2,000 batches (a healthy ImageNet
run sits at chance only in its first few hundred batches).
A loss alone at ln(K) of a common class count (2, 10, 100, 1000) is judged from 5 points, at ln(K) from the first;
from 3 points, every one within 0.5% of ln(K), when the first of them is past step 2,000 (a healthy run leaves chance within its
first thousand batches; BVLC/caffe#59: ImageNet's loss at 6.907 = ln(1000) at iteration 78,000), or past epoch 10 in a
log that prints epochs but no step. A loss alone at ln(K) of another round count (d x 10^n or 2^n: the head sizes people
configure, SwAV's 3000 prototypes, lightly's 512) is judged only when its last 5+ points all sit within 0.02% of ln(K)
(no batch moves a uniform guess's loss) and they are late: past step 2,000 or epoch 10, or spanning 3+ epochs
(facebookresearch/swav#12: 8.0066 = ln(3000) at epoch 163). A run that logs only
an accuracy, identical as printed at 5+ evaluations from the first, has not changed its predictions since it started
(ml-explore/mlx#188: `Test accuracy 0.113` every epoch, the share of one MNIST digit).
A late slice of a run (the logged steps span less than a quarter of the last step, a paste
that starts mid-run) has no start to measure progress from: only ln(V) is judged there. Very short runs (fewer than 8 points in the tail, or under 50 steps) are not judged.
""",
    )
)


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Flat tail with no progress since the start, or flat at ln(V)."""
    # The lowest rank as numbers: the rows quoted get their file and line at the end.
    s, points = M.lowest_rank_numbers(ctx, M.LOSS, finite=True)
    if points == 0 or M.names_like(ctx, RL_METRICS):
        return None
    s = s.sort("step")
    n = s.height
    tail = s.tail(max(int(n * th["tail_share"]), int(th["min_points"])))
    if tail.height < th["min_points"] or n < th["min_points"]:
        return None
    if int(s.item(-1, "step")) - int(s.item(0, "step")) < th["min_steps"]:
        return None  # too short a run to call its loss stuck
    t = M.ts.trend(tail)
    level = float(tail.get_column("value").median())
    if t is None or level <= 0:
        return None
    change = abs(t.last_fit - t.first_fit)
    # A noisy mini-batch loss: a fitted change within two standard errors of zero is no trend either
    # (capped at four times the tolerance, so a real fall is never hidden in the noise).
    y, x = tail.get_column("value"), tail.get_column("step").cast(pl.Float64)
    sx = float(x.std()) if tail.height > 2 else 0.0
    se = float(y.std()) * math.sqrt(max(1 - t.r2, 0.0)) / (sx * math.sqrt(tail.height)) * (t.last_step - t.first_step) if sx > 0 else 0.0
    if change >= th["flat_tol"] * level and (change >= 2 * se or change >= 4 * th["flat_tol"] * level):
        return None
    start = float(s.head(max(3, n // 10)).get_column("value").median())
    vocab = M.nearest_vocab(level, th["lnv_tol"])
    # A paste cut from late in a run (`step 1790` to `step 1910`) starts on a curve that already fell and now
    # falls slowly under its noise: its first points are no start of training, so "no progress since the start"
    # is not judged there (ln(V) still is).
    first_step, last_step = int(s.item(0, "step")), int(s.item(-1, "step"))
    late_slice = last_step > 0 and (last_step - first_step) < th["late_slice_share"] * last_step
    no_progress = level >= (1 - th["min_progress"]) * start and not late_slice
    if not (no_progress or vocab):
        return None
    # Onset: first point from which the smoothed loss stays inside the flat band around the level.
    mad = float((tail.get_column("value") - level).abs().median())
    band = max(th["flat_tol"] * level, 3 * 1.4826 * mad)
    sm = s.with_columns(pl.col("value").rolling_median(5, min_samples=1).alias("value"))
    runs = M.ts.runs(sm, (pl.col("value") - level).abs() <= band, 1)
    last = runs.filter(pl.col("to_end"))
    onset_step = int(last.item(0, "start_step")) if last.height else int(tail.item(0, "step"))
    lr_s = M.series_columns(ctx, M.LR, ("value",), where=pl.col("step") >= onset_step, finite=True)
    lr_max = float(lr_s.get_column("value").max()) if lr_s.height else None
    causes = {"weights_frozen": 0.5, "vanishing_gradient": 0.4, "clipped_updates": 0.3, "zero_gradients": 0.3, "labels_masked": 0.2}
    if lr_max is not None and lr_max <= 1e-8:
        causes = {"lr_zero": 1.0, "weights_frozen": 0.1}
    g = M.series_columns(ctx, M.GRAD_NORM, ("value",), where=pl.col("step") >= onset_step, finite=True)
    if g.height and float((g.get_column("value") == 0).mean()) >= 0.9 and "lr_zero" not in causes:
        causes["zero_gradients"] = 0.8
    what = f"loss flat at {M.fmt(level)}"
    if vocab:
        what += f" ≈ ln({vocab:,}) = {math.log(vocab):.2f} (uniform prediction over a {vocab:,}-token vocabulary)"
    what += f" from step {onset_step} to {int(s.item(-1, 'step'))}"
    if no_progress and not vocab:
        what += f", no progress from its start ({M.fmt(start)})"
    if lr_max is not None:
        what += f" while lr = {M.fmt(lr_max)}" if lr_max > 0 else " while lr = 0"
    at = M.provenance(ctx, M.LOSS, s.filter(pl.col("step") == onset_step), finite=True)
    row = at.row(0, named=True) if at.height else M.provenance(ctx, M.LOSS, tail.head(1), finite=True).row(0, named=True)
    # Without a cause in sight (LR 0, zero gradients, ln V) a slow-but-flat loss may be a fine-tune
    # starting near its optimum: medium severity and a lower confidence.
    evident = bool(vocab) or "lr_zero" in causes or causes.get("zero_gradients", 0) >= 0.8
    return Detection(
        summary=what,
        onset=M.onset_at(row),
        severity=None if evident else Severity.MEDIUM,
        evidence=M.quote(pl.concat([at, M.provenance(ctx, M.LOSS, s.tail(1), finite=True), M.pick(M.series_where(ctx, M.LR, pl.col("step") == onset_step, finite=True)[0], [onset_step])], how="diagonal_relaxed")),
        evidence_count=n - (s.filter(pl.col("step") < onset_step).height),
        causes=causes,
        confidence=0.9 if evident else 0.6,
        facts={"level": level, "start_level": start, "onset_step": onset_step, "implied_vocab": round(math.exp(level)) if level < 20 else None,
               "vocab": vocab, "lr": lr_max, "trend_rel_change": (t.last_fit - t.first_fit) / level},
    )

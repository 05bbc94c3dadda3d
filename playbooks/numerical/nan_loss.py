"""nan-loss: the training loss is NaN/Inf; tell a bad batch (no build-up), divergence (build-up) and fp16 overflow apart."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import combine, events, within

from forensics.contracts.context import Context, event_count, evidence_rows, onset_of
from forensics.contracts.model import Cause, Detection, Onset, Severity

# Log lines that say the loss (or a value computed from it) went non-finite.
NAN_CODES = ("nan_loss_message", "megatron_nan_check", "nonfinite_metric_stop", "anomaly_nan")
# Megatron's rerun state machine: `Unexpected result nan (message='found NaN in local forward loss …')`;
# only a non-finite result is a NaN (a `Spiky loss` result is a finite loss value).
RERUN_CODES = ("megatron_unexpected_result",)
RERUN_NONFINITE = r"Unexpected result -?(?:nan|inf)\b"
# tensorboardX / torch.utils.tensorboard warn when a logged scalar is NaN/Inf, without naming the scalar.
LOGGED_CODES = ("nonfinite_logged_value",)
# scikit-learn's finiteness check (`Input contains NaN, infinity or a value too large for dtype('float32').`) is a NaN
# output of the model only where a metric is being computed from the outputs: sklearn.metrics frames, a metric function
# in the traceback, or the line saying so (slideflow's `Error encountered when generating AUC: …`). The same error from
# an estimator's fit, or about the labels (`Input y_true contains NaN.`), is the data's (near miss gcForest#22).
METRIC_INPUT_CODES = ("nonfinite_metric_input",)
METRIC_CONTEXT = (r"sklearn[/\\.]metrics\b|\b(?:roc_auc_score|roc_curve|average_precision_score|precision_recall_curve|"
                  r"f1_score|accuracy_score|log_loss|r2_score|mean_squared_error|mean_absolute_error|matthews_corrcoef)\b|"
                  r"(?i:\b(?:generat|comput|calculat|evaluat)(?:e|es|ed|ing) (?:the |an? )?(?:AUC|AUROC|AUPRC|ROC|F1|metrics?)\b)")
LABEL_INPUTS = ("X", "y", "y_true")
# The evaluation loss of the whole objective (`val_loss`, `test val_loss` -> test_loss, `eval_loss`): read only when every
# one is non-finite. Not an evaluation of one part (a GAN's `val_g_loss`), which may be undefined on held-out data.
EVAL_LOSS = r"^(?:eval|val|valid|validation|test|dev)_loss$"
# Perplexity is exp of the cross-entropy: printed as inf it overflowed exp, a loss above ~88 per token in float32
# (709 in float64) where an untrained model starts near ln(vocabulary) ~ 10; NaN, the loss was NaN. Either way the
# loss it stands for is non-finite or diverged (OpenNMT-tf's `Evaluation result for step 435000: loss = 148890.718750 ;
# perplexity = inf` before `Model diverged with loss = NaN`, OpenNMT/OpenNMT-tf#744). OpenNMT-py caps the exponent
# (exp(min(loss, 100))) and fairseq prints 2**loss: finite for any loss a run that has not diverged prints.
PERPLEXITY = r"(?:^|_)(?:perplexity|ppl)$"

PLAYBOOK = declare(
    Playbook(
        id="nan-loss",
        title="Loss is NaN or Inf",
        category="numerical",
        severity=Severity.HIGH,
        tables=("metrics", "events"),
        explains=(),
        codes=("anomaly_nan", "fp16_overflow", "loss_scale_min_reached", "megatron_nan_check",
               "megatron_unexpected_result", "nan_loss_message", "nonfinite_logged_value", "nonfinite_metric_stop",
               "nonfinite_metric_input", "early_stopping_nonfinite"),
        causes=(
            Cause("bad_batch", "A batch with NaN/Inf (or out-of-range) inputs: the loss turns NaN at once, with no build-up",
                  verify="Dump the batch of the onset step: torch.isfinite(x).all(), label ranges",
                  fix="Validate inputs in collate_fn, skip non-finite batches, fix the corrupt samples", prior=0.35,
                  playbook="bad-input-data"),
            Cause("divergence", "Training diverged: loss and grad norm rose for several steps before going NaN",
                  verify="Plot loss and grad norm before the onset; rerun from an earlier checkpoint with a lower LR",
                  fix="Lower LR, gradient clipping, warmup", prior=0.3, playbook="gradient-explosion"),
            Cause("fp16_overflow", "float16 range exceeded: overflows and a collapsing loss scale precede the NaN",
                  verify="Count overflow / skipped-step messages and watch the loss scale before the onset",
                  fix="bf16, keep sensitive layers in fp32, tune the GradScaler", prior=0.2, playbook="fp16-overflow"),
            Cause("log_or_div_zero", "log(0), division by zero or sqrt of a negative inside the loss (no build-up)",
                  verify="torch.autograd.set_detect_anomaly(True) names the op that produced NaN",
                  fix="Add epsilons (log(x + eps)), clamp denominators", prior=0.15),
        ),
        verify="torch.autograd.set_detect_anomaly(True) for one step; check the batch at the onset step",
        fix="As the cause says: fix the data, lower the LR, add epsilons, or use bf16 / loss scaling",
        thresholds={
            "incident_points": Threshold(3, "consecutive non-finite points that make an incident (high severity); a single one is medium", "PLAYBOOKS.md nan-loss (three in a row is an incident)"),
            "buildup_window": Threshold(20, "finite points before the onset examined for a build-up", "ours"),
            "buildup_factor": Threshold(3, "max of the last points before the onset over the window median that counts as a build-up", "ours"),
            "eval_points": Threshold(2, "evaluations whose loss is NaN/Inf, every one of them, that make a NaN evaluation loss (medium)", "ours; a single NaN evaluation that later turns finite is a transient, not a broken model"),
            "masked_grad_points": Threshold(3, "consecutive NaN grad norms that stand for a NaN loss when the logger masks the loss (HF logging_nan_inf_filter)", "ours; formats.md §1.1 NaN masking"),
            "zeroed_points": Threshold(3, "consecutive logged losses of exactly 0 after a clearly non-zero one that stand for a masked NaN loss", "ours; wwxu21/CUT#2 (11 zeros after 1.6736)"),
            "zeroed_from": Threshold(0.1, "the last non-zero loss before the zeros at or above which a drop to exactly 0 in one interval is no descent", "ours; a loss learned down to 0 passes through 1e-2..1e-4 first"),
        },
        doc="""\
## Symptom
The logged training loss is NaN or Inf (first occurrence fires; three in a row is an incident), a
`Loss is nan, stopping training` style message appears (CNTK's `The training criterion is not a number (NAN)`), Megatron counts NaN iterations, or, where the
logger masks a non-finite loss (HF Trainer's `logging_nan_inf_filter` logs `loss: 0` or the running
average), the gradient norm is NaN for consecutive steps, or a NaN grad norm after finite ones comes
with a loss that reads exactly 0 (one such point decides: a real loss is not exactly 0 with a NaN gradient), or,
with no grad norm logged, a loss that falls from 0.1 or more to exactly 0 in one logging interval and stays there
(three points; medium: the NaN is inferred), or a perplexity (exp of the loss) printed as NaN/Inf.

## Why it matters
Once a NaN reaches the weights every later step is wasted; the step where it starts and whether it
built up decide the fix.

## Evidence
`metrics` (`loss` in every framework spelling, `grad_norm`, `loss_scale`, Megatron
`nan_iterations`/`skipped_steps`) and `events` (`nan_loss_message`, `megatron_nan_check`,
`nonfinite_metric_stop`, `anomaly_nan`, Megatron's rerun-state-machine `Unexpected result nan/inf`,
`fp16_overflow`, GluonTS's `Got NaN in first epoch`, scikit-learn's `Input contains NaN…` raised inside a metric computation
(sklearn.metrics frames, a metric function, or a line saying it was computing a metric: the model's outputs were NaN;
the same error from an estimator's fit or about `y_true` is the data's, not read); TensorBoard's `NaN or Inf found in input tensor.`, quoted with a NaN loss and on its
own only an `info` note of low confidence when no loss is logged: a logger's warning is no loss value). The causes are told apart by the window
before the onset: a flat loss and grad norm mean a bad batch (or log of zero), a rise of 3x or more
means divergence, overflow messages or a falling loss scale mean fp16 overflow.

## Known false positives
An `inf` grad norm on an fp16 step that the scaler skipped is normal and not a NaN loss; only NaN
grad norms (or a non-finite loss) count. TensorBoard's `NaN or Inf found in input tensor.` does not
name the scalar: when the logged loss stays finite it was another value, and nothing is reported.
Megatron's `Unexpected result` for a spiky (finite) loss is not a NaN. A loss learned down to 0 through small values,
a loss of 0 from its first point, and a loss of 0 beside a grad norm of exactly 0 (all labels masked) are no masked NaN. Evaluation metrics are not the training loss:
an evaluation loss counts only when it is NaN/Inf at every evaluation (two or more, or one printed after finite training
losses) while nothing else is, and then at medium (a single NaN evaluation that later turns finite, or one before any
training line, stays quiet).
""",
    )
)


@PLAYBOOK.detector(("metrics", "events"))
def detect(ctx: Context, th: dict) -> Detection | None:
    """The first non-finite loss (or its stand-ins), its run length and what preceded it."""
    # What the rules decide on of the training loss: its non-finite and zero points (and its size); the rest of it is
    # read one rank at a time (a long run's loss is not held whole).
    odd = ~pl.col("value").is_finite() | (pl.col("value") == 0.0)
    names: tuple[str, ...] | str = M.LOSS
    loss, points = M.series_where(ctx, M.LOSS, odd)
    name = "loss"
    if points == 0:
        loss, name = _parts(ctx)
        names, points = name, loss.height
    hit = M.onset_numbers(ctx, names, ~pl.col("value").is_finite()) if points else None
    how, ppl = "loss", ""
    if hit is None:
        hit = _masked(ctx, th) or _zeroed(ctx, loss)
        how = "grad_norm"
    if hit is None:
        hit = _megatron_counter(ctx)
        how = "nan_iterations"
    if hit is None:
        hit, ppl = _perplexity(ctx)
        how = "perplexity"
    whole = None
    if hit is None and loss.filter(pl.col("value") == 0.0).height >= th["zeroed_points"]:
        # Only a loss with enough exact zeros is read whole (a long healthy loss never is).
        whole = M.series(ctx, names)
        hit = _dropped_to_zero(ctx, whole, th)
        how = "zeroed"
    # The rerun wrapper's row first: on a line both match, it carries the rank and iteration.
    ev = combine(events(ctx, RERUN_CODES, text=RERUN_NONFINITE), events(ctx, NAN_CODES), _metric_inputs(ctx))
    logged = events(ctx, LOGGED_CODES)
    if hit is None and ev.height == 0:
        return (_from_logged(logged, loss, points) if logged.height else None) or _eval_nan(ctx, th)
    if hit is None:
        return _from_events(ev, th)
    rank = hit.rank
    # The onset's rank as numbers; the rows quoted get their file, line and time at the end.
    src = names if how in ("loss", "zeroed") else \
        {"grad_norm": M.GRAD_NORM, "nan_iterations": ("nan_iterations",), "perplexity": (ppl,)}[how]
    part = M.series_rank(ctx, src, rank, cols=M.NUMBERS)
    causes, facts, why = _causes(ctx, part if how != "nan_iterations" else M.series_columns(ctx, names, M.NUMBERS), hit, th)
    # A zero is a masked NaN only by inference (the logger hides the value): an alarm, not an incident.
    incident = (hit.points >= th["incident_points"] or hit.to_end or ev.height > 0) and how != "zeroed"
    masked = "no loss is logged there"
    if how == "grad_norm" and points:
        at = M.series_where(ctx, names, pl.col("step") == hit.step)[0]
        if at.height and bool(at.get_column("value").is_finite().all()):
            masked = f"the logged loss is masked: {M.fmt(at.item(0, 'value'))}"
    what = {"loss": f"{name} is {hit.value}", "grad_norm": f"grad_norm is {hit.value} ({masked})",
            "nan_iterations": "Megatron counts NaN iterations",
            "perplexity": f"{ppl} is {hit.value} (exp of the loss: a loss past the float range of exp, or NaN)"}.get(how)
    if how == "zeroed":
        what = (f"{name} reads exactly 0 right after {M.fmt(_last_nonzero(whole, hit))} (a masked non-finite loss: no loss "
                "falls from there to exactly 0 in one logging interval)")
    run = f" for {hit.points} logged points" if hit.points > 1 else " once"
    if hit.to_end:
        run = " from then on"
    summary = f"{what} from step {hit.step}{run}{why}"
    rows = M.provenance(ctx, src, M.pick(part, [hit.step], rank))
    before = M.provenance(ctx, src, part.filter(pl.col("step") < hit.step).tail(2))
    evidence = M.quote(pl.concat([before, rows], how="diagonal_relaxed")) + evidence_rows(ev.head(2))
    if logged.height:
        # The writer saw a non-finite scalar first: quote its earliest warning (it may precede the NaN loss line).
        evidence += evidence_rows(logged.head(1))
        summary += f"; TensorBoard was handed a NaN/Inf value {event_count(logged)} time(s)"
    return Detection(
        summary=summary,
        onset=Onset(step=hit.step, rank=rank, file=hit.file, line=hit.line,
                    time=rows.item(0, "ts") if rows.height else None),
        evidence=evidence,
        evidence_count=hit.points + event_count(ev),
        causes=causes,
        confidence=0.95 if how == "loss" else 0.85,
        severity=None if incident else Severity.MEDIUM,
        facts={"onset_step": hit.step, "nonfinite_points": hit.points, "signal": how, **facts},
        ranks=[rank] if rank is not None else [],
    )


def _parts(ctx: Context) -> tuple[pl.DataFrame, str]:
    """Where no total loss is logged, the named loss that turns non-finite first (a GAN's `g_loss`, `labeling_cost`):
    a NaN in any part of the objective is a NaN loss, whether or not a finite value was logged before it."""
    best: tuple[tuple, pl.DataFrame, str] | None = None
    for name in M.names_like(ctx, M.LOSS_PART, exclude=M.NOT_TRAIN_LOSS):
        s = M.series(ctx, name)
        hit = M.ts.first_nonfinite(s) if s.height else None
        if hit is not None and (best is None or (hit.step, hit.line or 0) < best[0]):
            best = ((hit.step, hit.line or 0), s, name)
    return (best[1], best[2]) if best else (M.series(ctx, M.LOSS), "loss")


def _masked(ctx: Context, th: dict) -> M.ts.Onset | None:
    """Consecutive NaN grad norms (not inf: a skipped fp16 step logs inf) stand for a masked NaN loss."""
    return M.onset_numbers(ctx, M.GRAD_NORM, pl.col("value").is_nan(), int(th["masked_grad_points"]))


def _zeroed(ctx: Context, loss: pl.DataFrame) -> M.ts.Onset | None:
    """(`loss`: at least the loss's zero points.) A NaN grad norm, with the loss at a NaN-gradient step reading exactly 0: a trainer that zeroes (or drops) a
    non-finite loss before logging it (HF Trainer's `logging_nan_inf_filter` logs the running mean of the finite
    losses, 0 before any). One such point is enough, from the first logged step on: a real loss is never exactly 0
    while its gradient is NaN ([OBS] 2U1/Qwen-VL-Series-Finetune#10: `'grad_norm': nan` from step 1, `'loss': 0.0` at
    step 2). A loss of 0 with a finite (0) grad norm is an all-masked batch, tokenizer-mismatch's evidence, not this."""
    if loss.height == 0:
        return None
    nan, _ = M.series_where(ctx, M.GRAD_NORM, pl.col("value").is_nan())
    nan_steps = nan.select("rank", "step")
    zero = loss.join(nan_steps, on=["rank", "step"], how="semi", nulls_equal=True).filter(pl.col("value") == 0.0)
    if zero.height == 0:
        return None
    return M.onset_numbers(ctx, M.GRAD_NORM, pl.col("value").is_nan(), 1)


def _perplexity(ctx: Context) -> tuple[M.ts.Onset | None, str]:
    """The first perplexity (training or evaluation) that is NaN/Inf, where no loss is."""
    for name in M.names_like(ctx, PERPLEXITY):
        s = M.series(ctx, name)
        hit = M.ts.first_nonfinite(s) if s.height else None
        if hit is not None:
            return hit, name
    return None, ""


def _with_last_nonzero(loss: pl.DataFrame) -> pl.DataFrame:
    """The loss with `_nz`: the last finite non-zero value logged before each point (of its rank)."""
    v = pl.col("value")
    nz = pl.when(v.is_finite() & (v != 0.0)).then(v).otherwise(None)
    return loss.sort("rank", "step", nulls_last=True).with_columns(nz.forward_fill().shift(1).over("rank").alias("_nz"))


def _last_nonzero(loss: pl.DataFrame, hit: M.ts.Onset) -> float | None:
    at = _with_last_nonzero(loss).filter((pl.col("step") == hit.step) & pl.col("rank").eq_missing(hit.rank))
    return at.item(0, "_nz") if at.height else None


def _dropped_to_zero(ctx: Context, loss: pl.DataFrame, th: dict) -> M.ts.Onset | None:
    """A loss that falls from a clearly non-zero value (`zeroed_from`) to exactly 0 in one logging interval and stays
    there (`zeroed_points`): a trainer that masks a non-finite loss before logging it. HF Trainer's
    `logging_nan_inf_filter` (on by default) leaves a NaN/Inf step out of the interval's sum, so an interval of NaN
    steps logs `'loss': 0.0` (wwxu21/CUT#2: 1.6736, then 0.0 at every later log while the warm-up LR rises, the
    maintainer: `Loss 0 means there is a nan in your loss`). A loss learned down to 0 passes through small values first
    (0.01, 0.0001) and stays quiet; so does a loss of 0 with a grad norm of exactly 0 (an all-masked batch,
    tokenizer-mismatch's evidence) and a loss that is 0 from its first point (no finite value to fall from)."""
    if loss.height < th["zeroed_points"] + 1:
        return None
    s = _with_last_nonzero(loss)
    hit = M.ts.onset(s, (pl.col("value") == 0.0) & (pl.col("_nz") >= th["zeroed_from"]), int(th["zeroed_points"]))
    if hit is None:
        return None
    g = M.series(ctx, M.GRAD_NORM)
    if g.height and g.filter((pl.col("step") >= hit.step) & (pl.col("value") == 0.0)).height:
        return None
    return hit


def _megatron_counter(ctx: Context) -> M.ts.Onset | None:
    """Megatron's cumulative `number of nan iterations` going up."""
    c = M.series_columns(ctx, ("nan_iterations",), M.NUMBERS, finite=True)
    if c.height == 0:
        return None
    o = M.ts.onset(c.with_columns(pl.col("value").diff().over("rank").alias("_d")), pl.col("_d") > 0, 1)
    return M.onset_provenance(ctx, ("nan_iterations",), o, finite=True)


def _eval_nan(ctx: Context, th: dict) -> Detection | None:
    """An evaluation loss that is NaN/Inf at every evaluation (at least `eval_points`) while no training loss is:
    the model (or the evaluation path) gives NaN on held-out data from the start. Medium: the training loss, which
    the other rules read, is finite, so the cause may be the evaluation code rather than the weights."""
    for name in M.names_like(ctx, EVAL_LOSS):
        s = M.series(ctx, name)
        if s.height == 0 or bool(s.get_column("value").is_finite().any()):
            continue
        first = s.row(0, named=True)
        train = M.series(ctx, M.LOSS, finite=True)
        # Fewer evaluations than `eval_points` count when the run trained before the first one: finite training losses
        # logged on earlier lines (or on the same line, Keras' `loss: 0.24 - val_loss: nan`) and no finite evaluation after.
        # The model trained, then gave NaN on held-out data (pythonlessons/TensorFlow-2.x-YOLOv3#8 `giou_val_loss: nan`
        # after epoch 49; keras-team/keras#1364; kr-colab/ReLERNN#26). An evaluation before any training step stays unread.
        trained = train.filter(pl.col("file") == first["file"]) if "file" in train.columns else train
        trained = trained.filter(pl.col("line") <= first["line"]).height if "line" in trained.columns else 0
        if s.height < th["eval_points"] and trained == 0:
            continue
        beside = f" while the training loss stays finite ({train.height} finite points)" if train.height else ""
        return Detection(
            summary=f"{name} is {first['value']} at every one of {s.height} evaluations{beside}: the model gives NaN on held-out data",
            onset=M.onset_at(first),
            evidence=M.quote(s.head(4)) + M.quote(train.head(2)),
            evidence_count=s.height,
            causes={"bad_batch": 0.5, "log_or_div_zero": 0.6},
            confidence=0.7,
            severity=Severity.MEDIUM,
            facts={"onset_step": first.get("step"), "nonfinite_points": s.height, "signal": name},
        )
    return None


def _from_logged(logged: pl.DataFrame, loss: pl.DataFrame, points: int) -> Detection | None:
    """Only the TensorBoard writer's warning: some logged scalar was NaN/Inf, which one is not said.

    A logged training loss that stays finite shows the scalar was another one (an fp16 grad norm on a
    skipped step, the std of a one-element tensor): nothing to report.
    """
    if points and bool(loss.get_column("value").is_finite().all()):
        return None
    return Detection(
        summary=f"a value written to TensorBoard was NaN or Inf ({logged.height} warning(s)); the warning does not name the "
                "scalar and no training loss is logged to check it",
        onset=onset_of(logged),
        evidence=evidence_rows(logged),
        evidence_count=logged.height,
        causes={},
        confidence=0.4,
        # A logger's warning without any non-finite loss value is no NaN loss: worth a note, not an alarm.
        severity=Severity.INFO,
    )


def _metric_inputs(ctx: Context) -> pl.DataFrame:
    """scikit-learn's non-finite input errors raised while a metric was computed from the model's outputs (not about
    the labels or an estimator's training data)."""
    ev = within(ctx, events(ctx, METRIC_INPUT_CODES), METRIC_CONTEXT)
    if ev.height == 0:
        return ev
    named = pl.col("message").str.extract(r"\bInput ([A-Za-z_]\w*) contains ", 1)
    return ev.filter(~named.is_in(LABEL_INPUTS).fill_null(False))


def _from_events(ev: pl.DataFrame, th: dict) -> Detection:
    first = ev.row(0, named=True)
    text = str(first.get('message') or first.get('text'))[:160]
    if first.get("code") in METRIC_INPUT_CODES:
        # Only the metric's error is printed: the predictions were NaN/Inf, the loss that produced them was too.
        return Detection(
            summary=f"a metric computed from the model's outputs found NaN/Inf in them (the model diverged or a batch was bad): {text}",
            onset=onset_of(ev), evidence=evidence_rows(ev), evidence_count=event_count(ev),
            causes={"divergence": 0.7, "bad_batch": 0.4, "log_or_div_zero": 0.3}, confidence=0.7)
    return Detection(
        summary=f"non-finite loss reported: {text}",
        onset=onset_of(ev),
        evidence=evidence_rows(ev),
        evidence_count=event_count(ev),
        causes={},
        confidence=0.8,
    )


def _causes(ctx: Context, part: pl.DataFrame, hit: M.ts.Onset, th: dict) -> tuple[dict[str, float], dict, str]:
    """Build-up (loss / grad norm rising before the onset) vs none; overflow evidence before the onset."""
    w = int(th["buildup_window"])
    ups = {}
    for name, s in (("loss", part), ("grad_norm", M.series_columns(ctx, M.GRAD_NORM, M.NUMBERS))):
        pre = s.filter((pl.col("step") < hit.step) & pl.col("value").is_finite()).sort("step").tail(w)
        if pre.height >= 5:
            med = float(pre.get_column("value").median())
            last = float(pre.tail(3).get_column("value").max())
            ups[name] = last / med if med > 0 else 1.0
    buildup = max(ups.values(), default=1.0)
    overflow = events(ctx, ("fp16_overflow", "loss_scale_min_reached"))
    if overflow.height and hit.step is not None and "step" in overflow.columns:
        overflow = overflow.filter(pl.col("step").is_null() | (pl.col("step") <= hit.step))
    scale = M.series_columns(ctx, M.LOSS_SCALE, M.NUMBERS, finite=True).filter(pl.col("step") <= hit.step).sort("step").tail(w)
    scale_drop = scale.height >= 2 and float(scale.item(-1, "value")) < float(scale.get_column("value").max()) / 4
    causes: dict[str, float] = {}
    why = ""
    if overflow.height or scale_drop:
        causes["fp16_overflow"] = 0.9
        why = f", after {overflow.height} fp16 overflow messages" if overflow.height else ", after the loss scale fell"
    if buildup >= th["buildup_factor"]:
        causes["divergence"] = 0.9
        why += f", after a build-up (x{buildup:.3g} over the preceding window)"
    else:
        causes["bad_batch"] = 0.9
        causes["log_or_div_zero"] = 0.5
        if ups:
            why += f", with no build-up before it (max x{buildup:.2g} of the preceding window)"
    return causes, {"buildup_ratio": round(buildup, 3)}, why

"""lora-silent-zero: LoRA adapter weights stay (or become) zero or frozen, or their gradients are zero, while training runs."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import events

from forensics.contracts.context import Context, event_count, evidence_rows
from forensics.contracts.model import Cause, Detection, Severity

# `lora` as a word start: `rollout/exploration_rate` (SB3 DQN's epsilon, flat at its floor by design) holds the letters too.
LORA_GRAD = r"(^|[^a-z])lora.*grad|grad.*[^a-z]lora"
LORA_WEIGHT = r"(^|[^a-z])lora"
# A dump of per-module values after training (rows are modules, not steps): judged by lora_silent_zero_dump.
DUMP = "lora_up_dump"

PLAYBOOK = declare(
    Playbook(
        id="lora-silent-zero",
        title="LoRA adapters silently zero or frozen",
        category="gradient",
        severity=Severity.HIGH,
        tables=("metrics", "events"),
        explains=("loss-stagnation",),
        causes=(
            Cause("not_trainable", "The adapters are not trained: not marked trainable, missing from the optimizer (built before get_peft_model), or the trainable mask was reset",
                  verify="Print the optimizer's parameter names and model.print_trainable_parameters(); check lora_B changes after a step",
                  fix="Build the optimizer after get_peft_model from the parameters with requires_grad; fix the trainable mask", prior=0.35),
            Cause("clipping_to_zero", "Clipping (a max norm of 0 or a clamp on the adapters) truncates the LoRA delta to zero",
                  verify="Log the adapters' grad norm after clipping", fix="Fix the clip value / clamp", prior=0.25),
            Cause("compile_folded", "torch.compile folded unregistered LoRA parameters into constants", verify="Run one step without torch.compile and compare",
                  fix="Register the adapters before compiling, or exclude them from compile", prior=0.15),
            Cause("ddp_skips_adapters", "DDP/FSDP does not reduce (or update) the adapter gradients", verify="Compare adapter grads before and after the all-reduce",
                  fix="Wrap after adding adapters; use_orig_params=True under FSDP", prior=0.15),
            Cause("weight_decay", "Weight decay shrinks the adapters (lora_A much faster than lora_B) towards zero",
                  verify="Plot the adapters' weight norms: a steady decline to 0", fix="No weight decay on adapter parameters", prior=0.1),
        ),
        verify='grep -A5 "lora_B.grad" debug.log; print the adapter weight norms per step',
        fix="Register the adapters, build the optimizer after get_peft_model, exclude adapters from compile, no weight decay on them",
        thresholds={
            "min_points": Threshold(3, "consecutive logged points at zero (or unchanged) after the first one (lora_B is zero at init by design)", "ours"),
            "atol": Threshold(1e-12, "a norm at or below this is zero", "anchors.md SMD AllZero / UnchangedTensor (atol 1e-8 on tensors; norms as printed)"),
            "rtol": Threshold(1e-5, "relative change between logged points below which a weight norm is unchanged", "anchors.md SMD UnchangedTensor (rtol 1e-5)"),
            "dump_min_modules": Threshold(3, "LoRA-up modules of a weight dump (sd-scripts check_lora_weights) that must all read exactly 0", "ours"),
            "replay_min_points": Threshold(4, "consecutive per-step losses equal, as printed, to those one epoch (a fixed lag) earlier: the model never changed", "issue 13 (per-step losses repeating exactly across epochs)"),
            "replay_max_repeats": Threshold(20, "a loss value printed more often than this is a plateau, not a replay, and is not paired", "ours"),
        },
        doc="""\
## Symptom
A logged LoRA weight norm (`lora_B_norm`, ...) stays exactly 0 after its first logged point (lora_B
starts at zero by design), drops to 0 after training, or stays unchanged (relative change < 1e-5)
for 3+ logged points; or a LoRA gradient norm is 0 for 3+ points; while the learning rate is
non-zero. The loss then goes flat.

## Why it matters
The run burns its budget without training anything; the loss curve alone looks like a plateau.

## Evidence
`metrics` whose names carry `lora` (weight and grad norms), `lr`, `loss`; `events` from adapter
debugging (`lora_zero`) where a parser emits them. Gradients flowing into weights that never move
point at the optimizer (not trainable / not in the optimizer); zero gradients at clipping, compile
or DDP.

Or a dump of the adapters' LoRA-up (lora_B) weights after training (sd-scripts `check_lora_weights.py`:
`<module>.lora_up.weight,0.0` per module) reads exactly 0 for every module (3+): lora_up starts at zero
and only training moves it, so no adapter learned anything.

Or the per-step losses of one epoch repeat those of the epoch before exactly, as printed, for 4+
consecutive steps (same batches in the same order through a model that never changes).

## Known false positives
A loss value seen twice by chance is no replay (4 consecutive equal pairs at one lag, 3+ distinct values).
lora_B is zero at initialisation and lora_A's gradient is zero until lora_B moves: only values after
the first logged point count. In a weight dump some modules may read 0 legitimately (sd-scripts: the last
text-encoder layer with `clip_skip=2`): only a dump where every module is 0 counts. A dump of a network
that was never trained reads 0 too: check the file is the trained one.
""",
    )
)


def _frozen(s: pl.DataFrame, th: dict) -> tuple[str, M.ts.Onset] | None:
    """Zero after the first point, or unchanged, for min_points consecutive points (per rank)."""
    f = s.sort("rank", "step").with_columns(
        pl.int_range(pl.len()).over("rank").alias("_i"),
        ((pl.col("value") - pl.col("value").shift(1)).abs().over("rank") <= th["rtol"] * pl.col("value").abs()).alias("_same"),
    )
    zero = M.ts.onset(f, (pl.col("value").abs() <= th["atol"]) & (pl.col("_i") >= 1), int(th["min_points"]))
    if zero is not None:
        return "zero", zero
    same = M.ts.onset(f, (pl.col("value").abs() > th["atol"]) & pl.col("_same").fill_null(False), int(th["min_points"]))
    return ("unchanged", same) if same is not None else None


@PLAYBOOK.detector(("metrics", "events"))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Adapter weights zero/unchanged or adapter gradients zero, with the LR non-zero."""
    grads = M.names_like(ctx, LORA_GRAD)
    weights = [n for n in M.names_like(ctx, LORA_WEIGHT) if n not in grads and n != DUMP]
    hits = []
    for name in weights:
        r = _frozen(M.series(ctx, name, finite=True), th)
        if r:
            hits.append((r[1].step, "weight", name, r[0], r[1]))
    for name in grads:
        s = M.series(ctx, name, finite=True)
        o = M.ts.onset(s.with_columns(pl.int_range(pl.len()).over("rank").alias("_i")),
                       (pl.col("value").abs() <= th["atol"]) & (pl.col("_i") >= 1), int(th["min_points"]))
        if o:
            hits.append((o.step, "grad", name, "zero", o))
    ev = events(ctx, ("lora_zero",))
    if not hits and ev.height == 0:
        return None
    if not hits:
        return Detection(summary=f"LoRA adapters reported zero: {str(ev.item(0, 'message'))[:160]}", onset=M.onset_at(ev.row(0, named=True)),
                         evidence=evidence_rows(ev), evidence_count=event_count(ev), causes={"not_trainable": 0.5}, confidence=0.8)
    hits.sort(key=lambda h: (h[1] != "weight", h[0]))
    _, kind, name, how, o = hits[0]
    lr = M.lr_at(ctx, o.end_step)
    if lr is not None and lr == 0.0:
        return None  # nothing trains at lr 0: loss-stagnation's lr_zero
    moving_grads = []
    for g in grads:
        s = M.series(ctx, g, finite=True).filter((pl.col("step") >= o.step) & (pl.col("step") <= o.end_step))
        if s.height and float(s.get_column("value").median()) > th["atol"]:
            moving_grads.append((g, float(s.get_column("value").median())))
    if kind == "weight" and moving_grads:
        causes = {"not_trainable": 0.9, "compile_folded": 0.3}
    elif kind == "weight" and how == "zero":
        causes = {"clipping_to_zero": 0.6, "not_trainable": 0.6, "compile_folded": 0.4, "ddp_skips_adapters": 0.4, "weight_decay": 0.3}
    else:
        causes = {"clipping_to_zero": 0.6, "compile_folded": 0.5, "ddp_skips_adapters": 0.5, "not_trainable": 0.4}
    s = M.series(ctx, name, finite=True)
    prior = s.filter(pl.col("step") < o.step).get_column("value").abs().max()
    from_zero = how == "zero" and (prior is None or float(prior) <= th["atol"])
    first_step = s.filter(pl.col("rank").eq_missing(o.rank)).get_column("step").min()
    onset_step = int(first_step) if from_zero and first_step is not None else o.step
    npts = s.filter(pl.col("rank").eq_missing(o.rank) & (pl.col("step") >= onset_step) & (pl.col("step") <= o.end_step)).height
    span = f"from step {onset_step} to {o.end_step} ({npts} logged points{', to the end' if o.to_end else ''})"
    what = {"zero": f"{name} stays 0", "unchanged": f"{name} stays unchanged at {M.fmt(o.value)}"}[how] + f" {span}"
    if kind == "weight" and how == "zero" and prior is not None and float(prior) > th["atol"] and o.step > s.get_column("step").min():
        what = f"{name} fell to 0 {span}"
    if lr is not None:
        what += f" while lr = {M.fmt(lr)}"
    if moving_grads:
        g, v = moving_grads[0]
        what += f" and {g} ≈ {M.fmt(v)}: gradients flow but the adapters never move"
    loss = M.series(ctx, M.LOSS, finite=True).filter(pl.col("step") >= o.step)
    if loss.height >= 3:
        what += f"; loss ~{M.fmt(float(loss.get_column('value').median()))}"
    quoted = M.pick(s, [o.step, o.end_step], o.rank)
    return Detection(
        summary=what,
        onset=M.onset_of_step(s, onset_step, o.rank),
        evidence=M.quote(quoted) + evidence_rows(ev.head(2)),
        evidence_count=o.points + event_count(ev),
        causes=causes,
        confidence=0.9,
        facts={"series": name, "kind": how, "onset_step": onset_step, "points": o.points, "lr": lr,
               "moving_grads": dict(moving_grads)},
    )

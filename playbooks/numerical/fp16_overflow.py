"""fp16-overflow: overflows keep skipping steps and the loss scale collapses (start-up calibration excluded)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import events
from forensics.playbooks.fields import field

from forensics.contracts.context import Context, event_count, evidence_rows
from forensics.contracts.model import Cause, Detection, Severity

PLAYBOOK = declare(
    Playbook(
        id="fp16-overflow",
        title="fp16 overflow: skipped steps and a collapsing loss scale",
        category="numerical",
        severity=Severity.HIGH,
        tables=("metrics", "events"),
        explains=("nan-loss", "loss-spike", "loss-stagnation"),
        codes=("fp16_overflow", "loss_scale_min_reached", "activation_nonfinite", "activation_abs_max"),
        causes=(
            Cause("range_exceeded", "Values in some layer exceed the float16 range (large activations or inputs), whatever the scale",
                  verify="Hook the forward pass and log each layer's max |activation| around the onset",
                  fix="bf16, or keep that layer (and its inputs) in fp32; normalise the inputs", prior=0.45),
            Cause("lr_too_high", "Training is diverging and the gradients outgrow fp16 (grad norm rising before the overflows)",
                  verify="Plot grad norm before the onset", fix="Lower the LR, clip gradients", prior=0.35,
                  playbook="gradient-explosion"),
            Cause("fp32_layer", "A layer that must run in fp32 (softmax, norms, loss) runs in fp16",
                  verify="Check autocast / .half() coverage of normalisation and loss layers",
                  fix="Run those layers in fp32 (autocast does this for the standard ones)", prior=0.2),
        ),
        verify="Count overflow/skipped steps per window and plot the loss scale",
        fix="bf16, fp32 for sensitive layers, a tuned GradScaler (growth interval, init scale)",
        thresholds={
            "min_overflows": Threshold(5, "overflows (loss-scale halvings / skipped steps) within the window that make it repeated", "ours; PLAYBOOKS.md fp16-overflow (repeated overflow)"),
            "window": Threshold(50, "logged points (or overflow messages' steps) per window", "ours"),
            "min_halvings": Threshold(4, "net halvings of the scale over the window (16x lower than before it) that make a collapse rather than the healthy saw-tooth", "ours"),
            "skip_share": Threshold(0.2, "share of a window's points that are skipped steps, where only a skipped-steps counter is logged", "ours"),
            "calib_max_step": Threshold(1000, "step after which a leading run of halvings is never the start-up calibration", "ours; DeepSpeed/apex calibrate within the first tens of steps"),
            "min_scale": Threshold(1.0, "loss scale at or below which the scaler has collapsed to its floor", "DeepSpeed/Megatron min_loss_scale default 1 (formats.md §1.2, §1.3)"),
            "stuck_overflows": Threshold(2, "overflow messages that attempted a scale at the floor and could not lower it (`Attempted loss scale: 1, reducing to 1`) that make the scaler stuck there",
                                         "DeepSpeed loss_scaler.py update_scale (prints the attempted and the new scale; at min_loss_scale they are equal): huggingface/transformers#14531, transformers docs deepspeed.md 'NaN loss', deepspeedai/DeepSpeed#1593"),
            "calib_floor": Threshold(8.0, "a start-up run of halvings that ends at or below this scale, with no later scale above it, is a collapse, not a calibration",
                                     "apex amp / torch GradScaler start at 2**16 and halve per overflow; at a scale of 8 the unscaled gradients already exceed 65504/8 (fp16 max), so the overflow is the values' own, not the scale's (apex#318, whai362/PVT#94: halvings to 0.03 and below; healthy calibrations settle at 2**10-2**15, LEEYOONHYUNG/BVAE-TTS#3, kenziyuliu/MS-G3D#9)"),
        },
        doc="""\
## Symptom
After the start-up calibration (the leading run of consecutive halvings from a large initial scale,
e.g. Megatron's 2**32, and never one that reaches the floor, nor one that ends at a scale of 8 or less and
never grows back above it: at such a scale the gradients overflow fp16 by themselves), the loss scale halves at least 5 times
within 50 logged points and ends them at least 16x lower than before, or falls to its floor (1.0),
is below it (even a single logged value, such as fairseq's `loss_scale 0.000`), or overflows there at least 5 times, or
twice in messages that name the scale they attempted and could not lower (DeepSpeed's `Attempted loss scale: 1, reducing to 1`:
a paste of a few steps already shows every step skipped at the floor); or a skipped-steps counter rises on at
least 5 and 20% of 50 logged points; DeepSpeed/apex/fairseq/Colossal-AI overflow
messages in the same numbers, or `Minimum loss scale reached`, or a trainer that gives up on overflow itself
(GPT-NeoX's `Skipped 50 iterations in a row due to Overflow - Exiting training.`, icefall's `grad_scale is too small,
exiting: 2.3e-10`), or icefall's warning `Grad scale is small: 1.29e-26` (printed below 0.01: the scale under the floor).
Or transformers' DebugUnderflowOverflow report (`Detected inf/nan during batch_number=N` and its `abs min abs max`
rows) whose activations climb to 1e4 or more, never past 65504, and then read `inf`: the float16 range exceeded
in the forward pass (playbooks/numerical/fp16_overflow_activations.py).

## Why it matters
Every overflow skips an optimizer step; a collapsing scale means the model no longer trains and
usually ends in a NaN loss.

## Evidence
`metrics` `loss_scale` (Megatron `loss scale`, MetricLogger `loss_scale`, fairseq, plain loops),
`skipped_steps` (Megatron `number of skipped iterations`, DeepSpeed `skipped=`), and `events`
`fp16_overflow` / `loss_scale_min_reached` with their new scale.

## Known false positives
The calibration at start-up and the healthy saw-tooth (the scale doubles after a clean interval and
one probing overflow halves it back) are a handful of halvings spread over the run, below 5 per window.
A single overflow note that re-sets a scale already at 1 (fairseq `setting loss scale to: 1.0`, loss_scale 1
throughout) is routine.
""",
    )
)


def _downs_from_scale(s: pl.DataFrame) -> pl.DataFrame:
    """Rows of a loss-scale series (lowest rank) with `down` (halved or more since the previous point)."""
    ranks = s.get_column("rank").drop_nulls()
    if ranks.len():
        s = s.filter(pl.col("rank") == ranks.min())
    v = pl.col("value")
    return s.sort("step", "line").with_columns((v <= 0.75 * v.shift(1)).fill_null(False).alias("down"), v.shift(1).alias("prev"))


def _downs_from_counter(s: pl.DataFrame) -> pl.DataFrame:
    """Rows of a cumulative skipped-steps counter with `down` where it went up."""
    ranks = s.get_column("rank").drop_nulls()
    if ranks.len():
        s = s.filter(pl.col("rank") == ranks.min())
    return s.sort("step").with_columns((pl.col("value").diff() > 0).fill_null(pl.col("value") > 0).alias("down"))


def _downs_from_events(ev: pl.DataFrame) -> pl.DataFrame:
    """Overflow messages as rows (each one a halving), with the new scale they print as value."""
    v = field("new_scale").cast(pl.Float64, strict=False)
    prev = field("prev_scale").cast(pl.Float64, strict=False)
    # `stuck`: the message names the scale it attempted and it could not lower it (DeepSpeed at min_loss_scale).
    return ev.with_columns(v.alias("value"), pl.coalesce(prev, v.shift(1)).alias("prev"), pl.lit(True).alias("down"),
                           (prev.is_not_null() & (prev == v)).fill_null(False).alias("stuck"),
                           pl.coalesce(pl.col("step"), pl.int_range(pl.len()).cast(pl.Int64)).alias("step")).sort("step")


def collapse(rows: pl.DataFrame, th: dict, scaled: bool = True, run_start: int | None = None) -> tuple[dict, pl.DataFrame] | None:
    """The first window of repeated overflows after the calibration prefix, or the scale at its floor.

    With scale values (`scaled`), repeated means the scale ends the window at least 2**min_halvings
    below where it was before it (the healthy saw-tooth doubles back between overflows); for a
    skipped-steps counter, at least `skip_share` of the window's points skipped.
    """
    rows = rows.with_columns(pl.int_range(pl.len()).alias("_i"))
    # Calibration: the leading run of consecutive downs, starting at the first or second logged point.
    lead = rows.with_columns((pl.col("down") != pl.col("down").shift(1)).fill_null(True).cum_sum().alias("_run"))
    first_run = lead.filter(pl.col("_run") == lead.item(0, "_run") + (0 if lead.item(0, "down") else 1))
    calib = 0
    # ... and only when nothing was logged before it: overflows after normal steps are no calibration.
    at_start = run_start is None or first_run.height == 0 or first_run.item(0, "step") is None \
        or int(first_run.item(0, "step")) <= run_start + 1
    # ... and never deep into training (a paste that starts at an epoch summary of update 10,198).
    if first_run.height and first_run.item(0, "step") is not None and int(first_run.item(0, "step")) > th["calib_max_step"]:
        at_start = False
    # ... and never down to the floor: halving all the way to a scale of 1 or below is the collapse itself.
    reaches_floor = scaled and first_run.height > 0 and bool(
        (first_run.get_column("value").drop_nulls() <= th["min_scale"]).any())
    # ... nor down to a tiny scale that never grows back (apex halving 16384 -> 2 in the first 22 iterations): the
    # dynamic scaler regrows after clean intervals, so a scale that stays at or below `calib_floor` has collapsed.
    if scaled and first_run.height and bool(first_run.item(0, "down")) and not reaches_floor:
        end = first_run.get_column("value").drop_nulls()
        later = rows.filter(pl.col("_i") > first_run.item(-1, "_i")).get_column("value").drop_nulls()
        reaches_floor = end.len() > 0 and float(end[-1]) <= th["calib_floor"] and not bool((later > th["calib_floor"]).any())
    if first_run.height and bool(first_run.item(0, "down")) and first_run.item(0, "_i") <= 1 and at_start \
            and not reaches_floor:
        calib = int(first_run.item(-1, "_i")) + 1
    post = rows.filter(pl.col("_i") >= calib)
    if post.height == 0:
        return None
    w = int(th["window"])
    v = pl.col("value")
    post = post.with_columns(
        pl.col("down").cast(pl.Int32).reverse().rolling_sum(w, min_samples=1).reverse().alias("_ahead"),
        v.reverse().rolling_min(w, min_samples=1).reverse().alias("_low"),
        (pl.col("prev") if "prev" in post.columns else v.shift(1)).alias("_before"),
    )
    if scaled:
        net = (pl.col("_before") / pl.col("_low")) >= 2.0 ** th["min_halvings"]
    else:
        net = pl.col("_ahead") >= th["skip_share"] * w
    rep = post.filter(pl.col("down") & (pl.col("_ahead") >= th["min_overflows"]) & net.fill_null(False))
    # At the floor: below it, or fallen onto it, or overflowing there again and again. A single overflow
    # note that re-sets a scale already at the floor (fairseq's `setting loss scale to: 1.0` with
    # loss_scale 1 throughout) is routine dynamic loss scaling.
    at_floor = (v < th["min_scale"]) | ((v <= th["min_scale"]) & (
        (pl.col("_before") > v).fill_null(False) | (pl.col("_ahead") >= th["min_overflows"])))
    # Overflow after overflow at the floor, each message saying the scaler could not go lower: the scale is stuck
    # there, however few steps the paste shows (not a note that re-sets a scale without naming the one attempted,
    # nor an attempted == new scale above the floor, which is DeepSpeed's hysteresis absorbing an overflow).
    if "stuck" in post.columns:
        stuck = pl.col("stuck") & (v <= th["min_scale"])
        at_floor = at_floor | (stuck & (stuck.cast(pl.Int32).reverse().rolling_sum(w, min_samples=1).reverse()
                                        >= th["stuck_overflows"]))
    # A scale printed below the floor is the collapse even without a halving in view (a one-line epoch summary
    # with `loss_scale 0.000`): no working scaler sits there.
    floor = post.filter(v.is_not_null() & at_floor & (pl.col("down") | (v < th["min_scale"]))) if scaled \
        else post.head(0)  # a counter's value is a count, not a scale
    if rep.height == 0 and floor.height == 0:
        return None
    start = rep.row(0, named=True) if rep.height else floor.row(0, named=True)
    window = post.filter((pl.col("_i") >= start["_i"]) & (pl.col("_i") < start["_i"] + w))
    return {"start": start, "downs": int(window.get_column("down").sum()), "calibration_points": calib,
            "floor": floor.row(0, named=True) if floor.height else None, "post_downs": int(post.get_column("down").sum())}, window


@PLAYBOOK.detector(("metrics", "events"))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Repeated overflows from the loss scale, a skipped-steps counter, or overflow messages."""
    candidates = []
    # No step dedupe here: overflow messages between two step reports carry the same step, and each
    # one is a halving (a scale series has no tqdm redraws to fold).
    have = M.present(ctx, M.LOSS_SCALE)
    # The lowest rank is the one judged (the scale is global): read one rank at a time, that one kept.
    scale = M.series_lowest_rank(ctx, M.LOSS_SCALE, finite=True, dedupe=False)[0] if have else M.series(ctx, M.LOSS_SCALE)
    first = ctx.metric_lines().select(pl.col("step").min()).collect().item() if ctx.has("metrics") else None
    run_start = int(first) if first is not None else None
    if scale.height:
        candidates.append(("loss scale", _downs_from_scale(scale)))
    skipped = M.series_lowest_rank(ctx, ("skipped_steps",), finite=True)[0]
    if skipped.height:
        candidates.append(("skipped steps", _downs_from_counter(skipped)))
    ev = events(ctx, ("fp16_overflow",))
    if ev.height:
        candidates.append(("overflow messages", _downs_from_events(ev)))
    found = [(what, *res) for what, rows in candidates
             if (res := collapse(rows, th, scaled=what != "skipped steps", run_start=run_start)) is not None]
    floor_ev = events(ctx, ("loss_scale_min_reached",))
    if not found and floor_ev.height == 0:
        return None
    if not found:
        first = floor_ev.row(0, named=True)
        # GPT-NeoX's overflow monitor gives up after n skipped steps in a row rather than at a scale floor.
        skipped = floor_ev.select(field("skipped")).item(0, 0)
        what = (f"the trainer stopped after {skipped} steps in a row skipped for fp16 overflow" if skipped is not None
                else "the loss scale reached its minimum")
        return Detection(summary=f"{what}: {first['message']}", onset=M.onset_at(first),
                         evidence=evidence_rows(floor_ev), evidence_count=event_count(floor_ev),
                         causes={"range_exceeded": 0.6, "lr_too_high": 0.6}, confidence=0.9)
    # Earliest first; at the same step the source that saw more overflows (messages count every one).
    found.sort(key=lambda x: (x[1]["start"]["step"] if x[1]["start"]["step"] is not None else 1 << 62, -x[1]["downs"]))
    what, info, window = found[0]
    st = info["start"]
    floor = info["floor"]
    scale_txt = ""
    if scale.height:
        post = _downs_from_scale(scale).filter(pl.col("step") >= st["step"])
        lo = post.sort("value").row(0, named=True) if post.height else None
        before = _downs_from_scale(scale).filter(pl.col("step") < st["step"]).tail(1)
        if lo is not None and before.height:
            scale_txt = f"; loss scale {M.fmt(before.item(0, 'value'))} -> {M.fmt(lo['value'])} (step {lo['step']})"
    calib = f" (after {info['calibration_points']} start-up calibration points)" if info["calibration_points"] else ""
    summary = (f"{info['downs']} overflows within {len(window)} logged points from step {st['step']} ({what}){calib}"
               f"{scale_txt}" + (f", at its floor {M.fmt(floor['value'])} from step {floor['step']}" if floor and not scale_txt else ""))
    if info["downs"] == 0 and floor:
        summary = (f"the loss scale reads {M.fmt(floor['value'])} at step {floor['step']} ({what}), below the floor "
                   f"{M.fmt(th['min_scale'])} of a working scaler: the steps overflow at every scale")
    g = M.series(ctx, M.GRAD_NORM, finite=True).filter(pl.col("step") < st["step"]).sort("step").tail(20)
    rising = g.height >= 5 and float(g.tail(3).get_column("value").max()) >= 3 * float(g.get_column("value").median())
    causes = {"lr_too_high": 0.8, "range_exceeded": 0.4} if rising else {"range_exceeded": 0.8, "lr_too_high": 0.3, "fp32_layer": 0.4}
    quoted = window.filter(pl.col("down")).head(4)
    evid = M.quote(quoted) if what != "overflow messages" else evidence_rows(quoted)
    if what != "overflow messages" and ev.height:
        evid += evidence_rows(ev.filter(pl.col("step").is_null() | (pl.col("step") >= st["step"])).head(2))
    return Detection(
        summary=summary,
        onset=M.onset_at(st),
        evidence=evid + evidence_rows(floor_ev.head(1)),
        evidence_count=info["post_downs"] + event_count(ev),
        causes=causes,
        confidence=0.9,
        facts={"onset_step": st["step"], "overflows_in_window": info["downs"], "source": what,
               "calibration_points": info["calibration_points"], "floor_step": floor["step"] if floor else None},
    )

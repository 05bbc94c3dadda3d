"""gradient-explosion: the gradient norm rises an order of magnitude above its recent level and stays there (or turns inf/NaN)."""

from __future__ import annotations

import numpy as np
import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Onset, Severity

PLAYBOOK = declare(
    Playbook(
        id="gradient-explosion",
        title="Gradient norm explodes",
        category="gradient",
        severity=Severity.HIGH,
        tables=("metrics",),
        explains=("nan-loss", "loss-spike", "fp16-overflow"),
        causes=(
            Cause("lr_too_high", "The learning rate is too high for the model (often reached at the end of warmup)",
                  verify="Plot grad norm and LR against step; rerun from a checkpoint before the onset with half the LR",
                  fix="Lower the peak LR, lengthen warmup", prior=0.45),
            Cause("no_clipping", "Nothing bounds the update when the gradient grows (no gradient clipping)",
                  verify="grep clip_grad_norm_ / max_grad_norm in the training code and config",
                  fix="torch.nn.utils.clip_grad_norm_(params, 1.0) before optimizer.step()", prior=0.25),
            Cause("missing_warmup", "The full LR is applied from the first steps, before the optimizer state has settled",
                  verify="Check the LR of the first logged steps: is it already the peak?",
                  fix="Linear warmup over the first 1-5% of steps", prior=0.15),
            Cause("bad_batch", "One batch with extreme values produces a huge gradient",
                  verify="Dump the batch at the onset step and check its statistics",
                  fix="Filter or clip inputs; skip batches with non-finite or extreme loss", prior=0.15, playbook="bad-input-data"),
        ),
        verify="Per-layer gradient norms around the onset step (which layer grows first)",
        fix="torch.nn.utils.clip_grad_norm_, a lower LR, warmup",
        thresholds={
            "rise_factor": Threshold(10, "grad norm relative to the median of the preceding window that counts as exploded", "PLAYBOOKS.md gradient-explosion (rising >=10x within a window); anchors.md AutoTrainer ratio"),
            "bound": Threshold(1000, "absolute grad norm that counts as exploded when the run started well below it", "PLAYBOOKS.md gradient-explosion (default 1000)"),
            "window": Threshold(20, "logged points in the trailing window whose median is the baseline", "ours"),
            "min_points": Threshold(3, "consecutive exploded points (inf/NaN right after a rise count) needed to fire", "ours; a single spike is loss-spike's"),
            "short_factor": Threshold(100, "in a short series (too few points for the window), grad norm relative to the median of all points before it that is blatant", "issue 13 (a value >= 100x its neighbours)"),
            "short_min_prior": Threshold(2, "finite points before a blatant jump in a short series", "ours"),
            "div_loss_factor": Threshold(5, "last loss over the run's minimum loss that counts as diverged (with the grad norm rising and most of the learning given back)", "issue 13 (short series: >= 10x and staying is divergence); ours: 5x once the grad norm confirms it"),
            "div_stay_factor": Threshold(3, "every loss after the minimum stays at least this multiple of it (staying, not a wobble)", "ours"),
            "div_min_after": Threshold(3, "logged points after the minimum loss that must all stay up", "ours"),
            "div_giveback": Threshold(0.5, "share of the fall from the first logged loss to the minimum that the last loss gives back", "ours"),
            "div_gnorm_factor": Threshold(5, "grad norm at the last point over the grad norm at the minimum-loss point", "ours; paiml/entrenar#274 (gnorm 7.7 -> 70.7)"),
            "exploded_level": Threshold(1e6, "grad norm no healthy run sustains: `min_points` such points inside a run above `bound` are an explosion already under way, with no baseline needed", "issue 13 (grad norms >= 1e6 from the first point); healthy large norms seen in threads stay <= 1e5"),
        },
        doc="""\
## Symptom
The logged gradient norm rises at least 10x above the median of the preceding window (or above an
absolute bound of 1000 when the run started far below it) for at least 3 consecutive logged points,
or rises and then turns inf/NaN. Usually before a loss spike or a NaN loss.

## Why it matters
An exploding gradient destroys the weights within a few steps; everything after it (loss spike, NaN,
fp16 overflow) is a consequence, so the onset here is where to look.

## Evidence
`metrics` `grad_norm` (HF `grad_norm`, Megatron `grad norm`, fairseq `gnorm`, plain loops), per rank,
with the logged `lr` to rank the causes (an LR still rising at the onset points at the LR).

## Known false positives
Grad norms of the first steps are not compared (no baseline yet). A series too short for the window
fires only on a blatant jump: at least 100x the median of every point before it (at least 2 of them). A single isolated spike that
recovers is not an explosion (see `loss-spike`). A slow drift upward over a long run is not a rise
"within a window".

A short series that diverges after learning: the loss falls to a minimum, then every one of at least 3
later points stays 3x above it and the last is 5x above it, giving back over half of the fall from the
first point, while the grad norm at the last point is 5x its value at the minimum. A 3x wobble, a loss
that rises where the logged LR jumps back up (a warm restart), and a loss that never fell (early noise)
are not judged.

A paste that starts already exploded has no baseline to rise from: a run of points above the bound
(1000) with at least 3 of them at 1e6 or more is reported on its level alone. Healthy runs with large
norms (a loss summed rather than averaged, no clipping) sit at hundreds to ~1e5, well below it.

## References
PLAYBOOKS.md gradient-explosion; reference/anchors.md (AutoTrainer grad-norm ratio, SMD update ratio).
""",
    )
)


def flagged(s: pl.DataFrame, th: dict) -> pl.DataFrame:
    """The series with `baseline` (trailing median), `ratio` and `hot` (exploded, inf/NaN right after a rise)."""
    w = int(th["window"])
    v = pl.col("value")
    fin = v.is_finite()
    # Baseline from finite values only, then carried onto the inf/NaN rows.
    # Computed on (rank, step, value) and row positions; the other columns are fetched once at the end.
    # The finite rows' baselines are put back at their places (no join of millions of rows), then carried forward.
    f = M.ts.slim(s).sort("rank", "step")
    finite = f.get_column("value").is_finite()
    base = f.filter(finite).select(v.rolling_median(w, min_samples=min(5, w)).shift(1).over("rank")).to_series()
    at = pl.Series(np.flatnonzero(finite.to_numpy()))
    f = (f.with_columns(pl.repeat(None, f.height, dtype=pl.Float64, eager=True).alias("baseline").scatter(at, base))
         .with_columns(pl.col("baseline").forward_fill().over("rank")))
    early = f.filter(fin).group_by("rank").agg(v.head(w).median().alias("early"))
    f = f.join(early, on="rank", how="left", nulls_equal=True)
    # A zero baseline (grad norms printed as 0.0000) makes no ratio; NaN ratios must not compare true.
    ratio_ok = (pl.col("baseline") > 0) & ((v / pl.col("baseline")) >= th["rise_factor"])
    rise = fin & (ratio_ok | ((v >= th["bound"]) & (pl.col("early") < th["bound"])))
    # A non-finite value inherits the flag of the last finite point before it: inf after a rise is the
    # explosion's end, NaN out of nowhere (a bad batch) is not an explosion.
    carried = pl.when(fin).then(rise.fill_null(False)).otherwise(None).forward_fill().over("rank").fill_null(False)
    f = f.with_columns((v / pl.col("baseline")).alias("ratio"), pl.when(fin).then(rise.fill_null(False)).otherwise(carried).alias("hot"))
    return M.ts.fetch(f.drop("rank", "step", "value"), s, s.columns)


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """First sustained run of exploded grad-norm points."""
    # Every rule here works within one rank: the ranks are read one at a time, and only the first run's rank is kept
    # (runs in (start step, rank) order, the rows without a rank last).
    points = 0
    best: tuple | None = None
    exploded: tuple | None = None
    # Numbers only (rank, step, value): the rows a finding quotes get their file and line at the end (`_quoted`).
    for s in M.series_ranks(ctx, M.GRAD_NORM, cols=M.NUMBERS):
        points += s.height
        f = flagged(s, th)
        r = M.ts.runs(f, pl.col("hot"), int(th["min_points"]))
        if r.height:
            row = r.row(0, named=True)
            key = (row["start_step"], row["rank"] is None, row["rank"] or 0)
            if best is None or key < best[0]:
                best = (key, row, f)
        if best is None:  # the already-exploded rule is read only when no rank has a run
            cand = _exploded_run(s, th)
            if cand is not None and (exploded is None or cand[0] < exploded[0]):
                exploded = cand
    if points < th["min_points"] + 5:
        s = M.series(ctx, M.GRAD_NORM)
        return _short(s, ctx, th) or _exploded(s, ctx, th)
    if best is None:
        return _exploded_detection(ctx, th, exploded)
    _, first, part = best
    rank = first["rank"]
    at_row = part.filter(pl.col("step") == first["start_step"]).head(1)
    at = at_row.row(0, named=True)
    episode = part.filter((pl.col("step") >= first["start_step"]) & (pl.col("step") <= first["end_step"]))
    finite_ep = episode.filter(pl.col("value").is_finite())
    peak = finite_ep.sort("value").row(-1, named=True) if finite_ep.height else at
    nonfinite = episode.filter(~pl.col("value").is_finite())
    base = at["baseline"]
    lr0 = M.lr_at(ctx, at["step"])
    causes, lr_text = _causes(ctx, part, at, first, lr0)
    tail = f" then {nonfinite.item(0, 'value')} at step {nonfinite.item(0, 'step')}" if nonfinite.height else ""
    summary = (f"grad norm rose from ~{M.fmt(base)} to {M.fmt(peak['value'])} (x{M.fmt(peak['value'] / base if base else None, 3)}) "
               f"from step {at['step']}{tail}{lr_text}")
    quoted = M.pick(part, [at["step"], peak["step"], nonfinite.item(0, "step") if nonfinite.height else None], rank)
    before = part.filter(pl.col("step") < at["step"]).tail(1)
    onset, shown = _quoted(ctx, at_row, pl.concat([before, quoted], how="diagonal_relaxed"))
    return Detection(
        summary=summary,
        onset=onset,
        evidence=M.quote(shown),
        evidence_count=episode.height,
        causes=causes,
        confidence=0.9 if (nonfinite.height or first["points"] >= 2 * th["min_points"]) else 0.75,
        facts={"onset_step": at["step"], "baseline": base, "peak": peak["value"], "peak_step": peak["step"],
               "first_nonfinite_step": nonfinite.item(0, "step") if nonfinite.height else None, "lr_at_onset": lr0,
               "points": first["points"]},
        ranks=[rank] if rank is not None else [],
    )


def _quoted(ctx: Context, at: pl.DataFrame, shown: pl.DataFrame) -> tuple[Onset, pl.DataFrame]:
    """The onset at the row `at` and the rows `shown`, both rows of the grad-norm series read as numbers, with their
    file, line and time: one read of the series for the few rows a finding quotes."""
    got = M.provenance(ctx, M.GRAD_NORM, pl.concat([at, shown], how="diagonal_relaxed"))
    return M.onset_at(got.row(0, named=True)), got.slice(1)


def _causes(ctx: Context, part: pl.DataFrame, at: dict, run: dict, lr0: float | None) -> tuple[dict[str, float], str]:
    """Rank the causes from the LR around the onset and whether the episode recovers."""
    causes = {"lr_too_high": 0.5, "no_clipping": 0.4, "missing_warmup": 0.2, "bad_batch": 0.2}
    text = ""
    lr = M.series_columns(ctx, M.LR, M.NUMBERS, finite=True)
    if lr.height and lr0 is not None:
        before = lr.filter(pl.col("step") <= at["step"]).sort("step")
        peak_lr = float(lr.get_column("value").max())
        rising = before.height >= 2 and float(before.item(-1, "value")) > float(before.item(0, "value")) * 1.01
        if rising:
            causes["lr_too_high"] = 0.9
            text = f"; lr {M.fmt(lr0)} still rising (warmup to {M.fmt(peak_lr)})"
        else:
            causes["lr_too_high"] = 0.7
            text = f"; lr {M.fmt(lr0)}"
            if before.height and float(before.item(0, "value")) >= 0.99 * peak_lr and at["step"] <= part.get_column("step").quantile(0.1):
                causes["missing_warmup"] = 0.7
    after = part.filter(pl.col("step") > run["end_step"]).head(5)
    if after.height and not run["to_end"] and bool(after.get_column("value").is_finite().all()):
        causes["bad_batch"] = 0.6  # it came back down on its own
    return causes, text


def _short(s: pl.DataFrame, ctx: Context, th: dict) -> Detection | None:
    """Too few points for the window: the first point at least `short_factor` times the median of all the finite
    points before it (inf/NaN right after such a jump is its end)."""
    if s.height < th["short_min_prior"] + 1:
        return None
    part = M.ts.lowest_rank(s)
    v = pl.col("value")
    fin = v.is_finite()
    f = M.ts.expanding_baseline(part)
    hot = f.filter(fin & (pl.col("_n") >= th["short_min_prior"]) & (pl.col("baseline") > 0) & (v >= th["short_factor"] * pl.col("baseline")))
    if hot.height == 0:
        return None
    at = hot.row(0, named=True)
    after = f.filter(pl.col("step") > at["step"])
    nonfinite = after.filter(~fin)
    peak = f.filter(fin & (pl.col("step") >= at["step"])).sort("value").row(-1, named=True)
    base = at["baseline"]
    lr0 = M.lr_at(ctx, at["step"])
    causes = {"lr_too_high": 0.7, "no_clipping": 0.4, "missing_warmup": 0.2, "bad_batch": 0.3}
    tail = f" then {nonfinite.item(0, 'value')} at step {nonfinite.item(0, 'step')}" if nonfinite.height else ""
    summary = (f"grad norm jumped from ~{M.fmt(base)} to {M.fmt(at['value'])} (x{M.fmt(at['value'] / base, 3)}) at step {at['step']}"
               + (f", peak {M.fmt(peak['value'])}" if peak["step"] != at["step"] else "") + tail
               + (f"; lr {M.fmt(lr0)}" if lr0 is not None else ""))
    quoted = M.pick(f, [at["step"], peak["step"], nonfinite.item(0, "step") if nonfinite.height else None])
    before = f.filter(pl.col("step") < at["step"]).tail(1)
    return Detection(
        summary=summary,
        onset=M.onset_at(at),
        evidence=M.quote(pl.concat([before, quoted], how="diagonal_relaxed")),
        evidence_count=f.filter(pl.col("step") >= at["step"]).height,
        causes=causes,
        confidence=0.85,
        facts={"onset_step": at["step"], "baseline": base, "peak": peak["value"], "peak_step": peak["step"],
               "first_nonfinite_step": nonfinite.item(0, "step") if nonfinite.height else None, "lr_at_onset": lr0, "points": part.height},
        ranks=[at["rank"]] if at.get("rank") is not None else [],
    )


def _exploded(s: pl.DataFrame, ctx: Context, th: dict) -> Detection | None:
    """Already exploded, no baseline needed: the first run of points above `bound` holding at least
    `min_points` points at `exploded_level` or more."""
    return _exploded_detection(ctx, th, _exploded_run(s, th))


def _exploded_run(s: pl.DataFrame, th: dict) -> tuple | None:
    """`_exploded`'s run in `s` (one rank or several): (its order key, the run, its points, the first step of its
    rank), or None."""
    v = pl.col("value")
    up = s.with_columns((v.is_finite() & (v >= th["exploded_level"])).cast(pl.Int32).alias("_big"))
    r = M.ts.runs(up, v.is_finite() & (v >= th["bound"]), int(th["min_points"]))
    if r.height == 0:
        return None
    part = up.sort("rank", "step")
    for run in r.iter_rows(named=True):
        rank = run["rank"]
        ep = part.filter(pl.col("rank").eq_missing(rank) & pl.col("step").is_between(run["start_step"], run["end_step"]))
        if int(ep.get_column("_big").sum()) < th["min_points"]:
            continue
        first_step = part.filter(pl.col("rank").eq_missing(rank)).item(0, "step")
        return (run["start_step"], rank is None, rank or 0), run, ep, first_step
    return None


def _exploded_detection(ctx: Context, th: dict, found: tuple | None) -> Detection | None:
    if found is None:
        return None
    _, run, ep, first_step = found
    rank = run["rank"]
    at = ep.row(0, named=True)
    peak = ep.sort("value").row(-1, named=True)
    lo = float(ep.get_column("value").min())
    lr0 = M.lr_at(ctx, at["step"])
    first = "from the first logged point" if run["start_step"] == first_step else f"from step {at['step']}"
    summary = (f"grad norm already exploded {first}: {M.fmt(lo)} to {M.fmt(peak['value'])} over {ep.height} logged points "
               f"({int(ep.get_column('_big').sum())} at >= {M.fmt(th['exploded_level'])})" + (f"; lr {M.fmt(lr0)}" if lr0 is not None else ""))
    onset, shown = _quoted(ctx, ep.head(1), M.pick(ep, [at["step"], peak["step"], ep.item(-1, "step")], rank))
    return Detection(
        summary=summary,
        onset=onset,
        evidence=M.quote(shown),
        evidence_count=ep.height,
        causes={"lr_too_high": 0.7, "no_clipping": 0.5, "missing_warmup": 0.2, "bad_batch": 0.1},
        confidence=0.8,
        facts={"onset_step": at["step"], "baseline": None, "peak": peak["value"], "peak_step": peak["step"],
               "first_nonfinite_step": None, "lr_at_onset": lr0, "points": ep.height},
        ranks=[rank] if rank is not None else [],
    )

"""optimizer-state-drift: logged Adam moments jump out of their rolling band or second moments collapse."""

from __future__ import annotations

import math
import re

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

# Logged optimizer-moment series (Adam exp_avg / exp_avg_sq and common spellings).
MOMENTS = r"exp_avg|adam_[mv]\b|adam_[mv]_|first_moment|second_moment|moment[12]|optimizer_state"
SECOND = r"exp_avg_sq|adam_v|second_moment|moment2"

PLAYBOOK = declare(
    Playbook(
        id="optimizer-state-drift",
        title="Optimizer state drifts",
        category="numerical",
        severity=Severity.MEDIUM,
        tables=("metrics",),
        explains=("loss-spike", "gradient-explosion", "nan-loss"),
        causes=(
            Cause("corrupted_state_after_resume", "The optimizer state was lost or mangled on resume (moments reset while the step count was kept)",
                  verify="Compare optimizer.state_dict() statistics before the save and after the load",
                  fix="Save and load the full optimizer state; reset the step count if the moments are reset", prior=0.35),
            Cause("bad_batch", "A batch with extreme gradients blew up the moments", verify="Inspect the batch at the onset step",
                  fix="Skip or clip the batch; gradient clipping", prior=0.35, playbook="bad-input-data"),
            Cause("eps_too_small", "Second moments near zero with a tiny epsilon make updates explode",
                  verify="min(exp_avg_sq) against eps", fix="Raise Adam's eps (1e-8 -> 1e-6) or lower beta2", prior=0.3),
        ),
        verify="Inspect the optimizer state (exp_avg_sq min/mean per parameter group) around the onset",
        fix="Larger eps, reset the state consistently, skip the bad batch",
        thresholds={
            "sigmas": Threshold(3, "robust deviations of log10(moment) from its trailing median that make a drift", "PLAYBOOKS.md optimizer-state-drift (leave a 3-sigma rolling window)"),
            "min_decades": Threshold(1.0, "and at least this many decades (10x) away from it", "ours"),
            "collapse": Threshold(1e-10, "second-moment value below which it has collapsed", "PLAYBOOKS.md optimizer-state-drift (below 1e-10)"),
            "window": Threshold(20, "logged points in the trailing window", "ours"),
        },
        doc="""\
## Symptom
A logged optimizer moment (Adam `exp_avg`, `exp_avg_sq`, or its norm/mean/min) moves more than 3
robust deviations and at least 10x away from the median of its trailing window (compared in log10,
as moments span decades), or a second moment falls below 1e-10.

## Why it matters
Adam divides by the square root of its second moment: a collapsed or reset second moment turns the
next updates into huge steps, a blown-up one freezes learning for thousands of steps.

## Evidence
`metrics` whose names carry the moments (`exp_avg_norm`, `exp_avg_sq_mean`, `exp_avg_sq_min`, ...),
per rank. The healthy warm-up of the raw (not bias-corrected) second moment grows smoothly, well
under 10x per window.

## Known false positives
A deliberate optimizer reset (new stage of training) moves every moment at once; check the logs
around the onset for such a stage change.
""",
    )
)


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Per moment series: log-scale robust jumps, and collapse of second moments."""
    hits = []
    for name in M.names_like(ctx, MOMENTS):
        s = M.series(ctx, name, finite=True).filter(pl.col("value") > 0)
        if s.height < 5:
            continue
        lg = s.with_columns(pl.col("value").log10().alias("value"), pl.col("value").alias("raw"))
        z = M.ts.robust_z(lg, window=int(th["window"]), min_points=5, rel_floor=0.0, abs_floor=0.05)
        jump = z.filter((pl.col("z").abs() > th["sigmas"]) & ((pl.col("value") - pl.col("median")).abs() >= th["min_decades"]))
        for r in jump.head(1).iter_rows(named=True):
            hits.append((r["step"], name, "jump", r))
        if re.search(SECOND, name, re.I):
            low = s.filter(pl.col("value") < th["collapse"])
            for r in low.head(1).iter_rows(named=True):
                hits.append((r["step"], name, "collapse", r | {"raw": r["value"]}))
    if not hits:
        return None
    hits.sort(key=lambda h: (h[0], h[2] != "collapse"))
    step, name, kind, row = hits[0]
    s = M.series(ctx, name, finite=True)
    prev = s.filter(pl.col("step") < step).sort("step").tail(1)
    before = float(prev.item(0, "value")) if prev.height else None
    raw = row.get("raw", row["value"])
    if kind == "collapse":
        what = f"{name} collapsed to {M.fmt(raw)} (< {M.fmt(th['collapse'])}) at step {step}"
    else:
        decades = row["value"] - row["median"]
        direction = "dropped" if decades < 0 else "jumped"
        what = (f"{name} {direction} {abs(decades):.2g} decades at step {step}: {M.fmt(before)} -> {M.fmt(raw)} "
                f"(trailing median {M.fmt(10 ** row['median'])})")
    others = sorted({h[1] for h in hits if h[1] != name})
    if others:
        what += f"; also {', '.join(others)}"
    down = kind == "collapse" or (row["value"] - row.get("median", math.inf) < 0)
    causes = {"corrupted_state_after_resume": 0.8, "eps_too_small": 0.5, "bad_batch": 0.3} if down else \
        {"bad_batch": 0.8, "corrupted_state_after_resume": 0.3, "eps_too_small": 0.2}
    return Detection(
        summary=what,
        onset=M.onset_of_step(s, step, row.get("rank")),
        evidence=M.quote(pl.concat([prev, M.pick(s, [step], row.get("rank"))], how="diagonal_relaxed")),
        evidence_count=len(hits),
        causes=causes,
        confidence=0.8,
        facts={"series": name, "onset_step": step, "kind": kind, "value": raw, "before": before},
    )

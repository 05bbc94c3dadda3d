"""nondeterminism: two runs with the same seed and config diverge; report the first step where they differ."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, Threshold, declare

from forensics.contracts.context import Context, evidence_rows
from forensics.contracts.model import Cause, Detection, Onset, Severity

# Series compared, in order of preference: the first one both runs log decides.
SERIES = ("loss", "grad_norm", "eval_loss", "lr")

PLAYBOOK = declare(
    Playbook(
        id="nondeterminism",
        title="Two identical runs diverge",
        category="data",
        severity=Severity.MEDIUM,
        tables=("metrics",),
        needs_baseline=True,
        causes=(
            Cause("unseeded_data_order", "Data order or augmentation differs (unseeded DataLoader workers, shuffling, shared RNG across augmentations)",
                  verify="Log the first batch's sample ids in both runs",
                  fix="torch.manual_seed + a seeded generator for the DataLoader and worker_init_fn seeding every worker", prior=0.5),
            Cause("nondeterministic_kernels", "Nondeterministic kernels (atomics in scatter/index_add, cuDNN autotuning) give tiny differences that grow",
                  verify="torch.use_deterministic_algorithms(True); CUBLAS_WORKSPACE_CONFIG=:4096:8; rerun both",
                  fix="torch.use_deterministic_algorithms(True), torch.backends.cudnn.benchmark=False, deterministic=True", prior=0.5),
        ),
        verify="Rerun both with torch.use_deterministic_algorithms(True) and seeded workers",
        fix="Seed every worker; deterministic algorithms",
        thresholds={
            "rel_tol": Threshold(1e-6, "relative difference of a logged value above which two runs differ at a step", "ours; printed precision"),
            "big_jump": Threshold(1e-2, "relative difference at the first differing step that means different data, not kernel noise", "ours"),
            "min_common_steps": Threshold(3, "steps both runs must log before comparing", "ours"),
        },
        doc="""\
## Symptom
Two runs started with the same seed and configuration (`forensics analyze RUN --baseline OTHER_RUN`)
log different values of the same metric at the same step, from some step on.

## Why it matters
Without determinism an A/B comparison measures noise, and a bug that depends on data order cannot be
reproduced.

## Evidence
`metrics` of both runs (loss first, else grad norm, eval loss, lr), compared step by step per rank
after keeping the last value logged for each step (restarts and redraws).

## Known false positives
Runs that were not meant to be identical (another seed, another config) differ by design; the
playbook only runs when a baseline is given.
""",
    )
)


def _series(ctx: Context, name: str) -> pl.DataFrame:
    m = ctx.metric(name).filter(pl.col("step").is_not_null() & pl.col("value").is_not_null())
    return m.with_columns(pl.col("rank").fill_null(-1)).unique(subset=["rank", "step"], keep="last").sort("rank", "step")


@PLAYBOOK.detector(("metrics",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """First step where the run and its baseline log different values of the same series."""
    base = ctx.baseline
    if base is None:
        return None
    for name in SERIES:
        a, b = _series(ctx, name), _series(base, name)
        joined = a.join(b.select("rank", "step", pl.col("value").alias("base"), pl.col("file").alias("bfile"), pl.col("line").alias("bline")),
                        on=["rank", "step"])
        if joined.height < th["min_common_steps"]:
            continue
        joined = joined.with_columns(
            ((pl.col("value") - pl.col("base")).abs() / pl.max_horizontal(pl.col("value").abs(), pl.col("base").abs(), pl.lit(1e-12))).alias("rel")
        ).sort("step", "rank")
        diff = joined.filter((pl.col("rel") > th["rel_tol"]) | (pl.col("value").is_nan() != pl.col("base").is_nan()))
        if diff.height == 0:
            return None
        first = diff.row(0, named=True)
        jump = first["rel"] if first["rel"] == first["rel"] else 1.0
        causes = {"unseeded_data_order": 0.8, "nondeterministic_kernels": 0.3} if jump >= th["big_jump"] else {"nondeterministic_kernels": 0.8, "unseeded_data_order": 0.3}
        same_before = joined.filter(pl.col("step") < first["step"]).height
        rows = diff.head(1)
        ev = evidence_rows(rows.with_columns(pl.lit(None, pl.String).alias("text")))
        return Detection(
            summary=(f"{name} differs from the baseline from step {first['step']}: {first['value']:.6g} vs {first['base']:.6g} "
                     f"(relative {jump:.2g}); {same_before} earlier common steps identical, {diff.height} of {joined.height} differ"),
            onset=Onset(step=first["step"], time=first["ts"], rank=None if first["rank"] == -1 else first["rank"], file=first["file"], line=first["line"]),
            evidence=ev,
            evidence_count=diff.height,
            causes=causes,
            confidence=0.85,
            facts={"series": name, "first_step": first["step"], "value": first["value"], "baseline_value": first["base"],
                   "baseline_file": first["bfile"], "baseline_line": first["bline"], "differing_steps": diff.height, "common_steps": joined.height},
        )
    return None

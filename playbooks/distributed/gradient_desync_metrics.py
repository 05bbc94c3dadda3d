"""gradient-desync from per-rank metrics: values that must agree after all-reduce (grad norm, parameter norm) differ."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.distributed.gradient_desync import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# Series identical on every replica of a synchronised data-parallel run.
MUST_AGREE = ("grad_norm", "param_norm", "params_norm", "parameter_norm", "weight_norm")



@PLAYBOOK.detector(("metrics",))
def detect_metrics(ctx: Context, th: dict) -> Detection | None:
    """First run of common steps where a must-agree series differs across ranks by more than rel_diff."""
    found = []
    for name in M.present(ctx, MUST_AGREE):
        if not M.several_ranks(ctx, name, finite=True):
            continue
        # The ranks' spread at each step (one row per step), every rank's values of a window of steps at a time;
        # the rows quoted are read at the end.
        sp, ranks = M.ts.spread_over(M.series_steps(ctx, name, finite=True))
        if len(ranks) < 2:
            continue
        if sp.height < th["min_points"]:
            continue
        spread = sp.with_columns(pl.col("rel_diff").alias("value"), pl.lit(None, pl.Int32).alias("rank"))
        o = M.ts.onset(spread, pl.col("value") > th["rel_diff"], int(th["min_points"]))
        if o is None:
            continue
        # Replicas' parameter norms must agree whenever the model is synchronised. A logged grad norm
        # only counts when the ranks did agree on it before (it is the reduced value, not a local one:
        # pipeline/tensor-parallel ranks and local pre-reduction norms differ by design).
        agreed = sp.filter((pl.col("step") < o.step) & (pl.col("rel_diff") <= th["rel_diff"])).height
        if name != "grad_norm" or agreed > 0:
            found.append((o.step, name, o, sp, ranks))
    if not found:
        return None
    found.sort(key=lambda f: f[0])
    step, name, o, sp, ranks = found[0]
    at = sp.filter(pl.col("step") == step).row(0, named=True)
    last = sp.row(-1, named=True)
    after = sp.filter(pl.col("step") >= step)
    share = float((after.get_column("rel_diff") > th["rel_diff"]).mean())
    summary = (f"{name} differs between ranks from step {step}: {M.fmt(at['min'])} vs {M.fmt(at['max'])} (relative {at['rel_diff']:.2g}), "
               f"apart on {share:.0%} of {after.height} common steps; at step {last['step']} {M.fmt(last['min'])} vs {M.fmt(last['max'])}")
    others = sorted({f[1] for f in found[1:]})
    if others:
        summary += f"; also {', '.join(others)}"
    rows = M.series_where(ctx, name, pl.col("step") == step, finite=True)[0].sort("rank")
    # Parameters that differ between replicas were updated with unreduced gradients.
    params_apart = any(f[1] != "grad_norm" for f in found)
    grows = params_apart or last["rel_diff"] > 2 * at["rel_diff"]
    return Detection(
        summary=summary,
        onset=M.onset_at(rows.row(0, named=True)),
        evidence=M.quote(pl.concat([rows, M.series_where(ctx, name, pl.col("step") == last["step"], finite=True)[0].sort("rank")])),
        evidence_count=int(after.height * share),
        causes={"not_wrapped": 0.9 if grows else 0.5, "rank_local_randomness": 0.4, "unused_parameters": 0.3},
        confidence=0.85,
        facts={"series": name, "onset_step": step, "rel_diff": at["rel_diff"], "last_rel_diff": last["rel_diff"], "share": share},
        ranks=ranks,
    )

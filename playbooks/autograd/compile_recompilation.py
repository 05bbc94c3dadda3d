"""compile-recompilation: torch.compile recompiles repeatedly, hits its cache limit, or breaks graphs."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import combine, detection, events, first_message
from forensics.playbooks.fields import field

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

RECOMPILE_CODES = ("dynamo_recompile",)
LIMIT_CODES = ("dynamo_recompile_limit",)
# A graph break raised as an error (`torch._dynamo.exc.Unsupported: ...` under fullgraph=True): the run stops there.
BREAK_CODES = ("dynamo_graph_break",)
REASON_CODES = ("dynamo_recompile_reason",)
# Guards on tensor sizes and strides: the input shapes change.
SHAPE_GUARD = r"(?i)size mismatch|stride mismatch|\.size\(\)|\bnumel\b|dimensionality"
# Guards on Python values: ints, flags, object ids, lengths captured in the graph.
VALUE_GUARD = r"==|!=|___check_obj_id|ID_MATCH|EQUALS_MATCH|TYPE_MATCH|\blen\("

PLAYBOOK = declare(
    Playbook(
        id="compile-recompilation",
        title="torch.compile keeps recompiling",
        category="autograd",
        severity=Severity.MEDIUM,
        tables=("events",),
        explains=("step-time-regression",),
        codes=("dynamo_graph_break", "dynamo_recompile", "dynamo_recompile_limit", "dynamo_recompile_reason"),
        causes=(
            Cause("dynamic_shapes", "Input shapes change between calls (sequence length, last batch), each new shape compiles again",
                  verify="TORCH_LOGS=recompiles shows the guard that failed (e.g. size mismatch at index 1)",
                  fix="torch._dynamo.mark_dynamic(x, dim) or dynamic=True; pad to a few bucket sizes; drop_last=True", prior=0.55),
            Cause("python_state_in_graph", "Python-side values (ints, flags, counters, ids) captured in guards change every call",
                  verify="TORCH_LOGS=recompiles,guards: guards on a Python int/attribute that changes",
                  fix="Pass changing values as tensors, or move them out of the compiled function", prior=0.3),
            Cause("graph_breaks", "Unsupported Python constructs break the graph into many small compiled pieces",
                  verify="TORCH_LOGS=graph_breaks; torch._dynamo.explain(fn)(*args)",
                  fix="Remove prints/.item()/data-dependent control flow from the compiled region", prior=0.15),
        ),
        verify="TORCH_LOGS=recompiles,graph_breaks python train.py",
        fix="Mark dynamic dimensions, remove graph breaks and Python state from compiled code",
        thresholds={
            "min_recompiles": Threshold(3, "recompilations of one run that count as repeated (a single recompile for the last batch is normal)", "ours"),
        },
        doc="""\
## Symptom
Dynamo logs `Recompiling function …` with the failing guard (under `TORCH_LOGS=recompiles`), warns
that `cache_size_limit` / `recompile_limit` was reached (the function then runs eagerly), or reports
graph breaks.

## Why it matters
Each recompile costs seconds to minutes; after the limit the model silently runs uncompiled and slow.

## Evidence
`events` with recompile, cache-limit and graph-break codes. The number of recompiles is the number of
`Recompiling function` lines, or more when one of them lists more guard failures (one per cached
compilation). The failed guards (`last reason:`, the guard-failure list, the 2022 `due to the
following guard failures`) tell the causes apart: size or stride mismatches point to dynamic shapes,
guards on Python values (`== 31868`, `len(x) == 0`, object ids) to Python state in the graph.

## Known false positives
One or two recompiles (the first call, a shorter last batch) are normal and below `min_recompiles`.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Repeated recompiles, a hit cache limit, or graph breaks."""
    rec, lim, brk = events(ctx, RECOMPILE_CODES), events(ctx, LIMIT_CODES), events(ctx, BREAK_CODES)
    reasons = ctx.events_of(*REASON_CODES)
    recompiles = max(rec.height, _listed_cache_entries(rec, reasons))
    if lim.height == 0 and recompiles < th["min_recompiles"] and brk.height == 0:
        return None
    parts = [p for p in (lim, rec, brk) if p.height]
    ev = combine(*parts)
    # The failed guards tell the causes apart; the limit line itself (`cache_size_limit`) says nothing.
    guard_text = pl.concat([reasons.with_columns(field("reason").alias("r")).get_column("r"),
                            lim.with_columns(field("reason").alias("r")).get_column("r")]).drop_nulls()
    text = "\n".join(guard_text.to_list()[:50])
    causes: dict[str, float] = {}
    if pl.Series([text]).str.contains(SHAPE_GUARD)[0]:
        causes["dynamic_shapes"] = 0.9
    if pl.Series([text]).str.contains(VALUE_GUARD)[0]:
        causes["python_state_in_graph"] = 0.9
    fatal_breaks = brk.filter(pl.col("severity") == "error").height
    if brk.height:
        causes["graph_breaks"] = 0.9 if fatal_breaks else 0.6
    if not causes:
        causes["dynamic_shapes"] = 0.5
    what = ("hit the recompile limit" if lim.height else f"recompiled {recompiles} times" if recompiles
            else "stopped at a graph break (fullgraph)" if fatal_breaks else f"{brk.height} graph breaks")
    return detection(ev, f"torch.compile {what}: {first_message(lim if lim.height else ev)}", causes,
                     confidence=0.9 if lim.height or recompiles or fatal_breaks else 0.6,
                     severity=Severity.LOW if not lim.height and not recompiles and not fatal_breaks else None,
                     facts={"recompiles": recompiles, "cache_limit_hits": lim.height, "graph_breaks": brk.height}, lead=lim)


def _listed_cache_entries(rec: pl.DataFrame, reasons: pl.DataFrame) -> int:
    """Most guard failures listed under one `Recompiling function` line (TORCH_LOGS=recompiles lists one
    per cached entry, so N lines mean at least N compilations already)."""
    listed = reasons.filter(field("form") == "guard_failure_list")
    if rec.height == 0 or listed.height == 0:
        return 0
    heads = rec.select("file", pl.col("line").alias("head"))
    owned = (listed.select("file", "line").join(heads, on="file").filter(pl.col("head") <= pl.col("line"))
             .group_by("file", "line").agg(pl.col("head").max()))
    counts = owned.group_by("file", "head").len()
    return int(counts.get_column("len").max() or 0) if counts.height else 0

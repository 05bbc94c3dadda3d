"""compile-recompilation: torch.compile recompiles repeatedly, hits its cache limit, or breaks graphs."""

from __future__ import annotations

from forensics.context import Context
from playbooks.base import Playbook, Threshold, declare
from playbooks.evidence import combine, detection, events, first_message
from playbooks.model import Cause, Detection, Severity

RECOMPILE_CODES = ("dynamo_recompile",)
LIMIT_CODES = ("dynamo_recompile_limit",)
BREAK_CODES: tuple[str, ...] = ()  # graph-break reports are not in the signature table yet

PLAYBOOK = declare(
    Playbook(
        id="compile-recompilation",
        title="torch.compile keeps recompiling",
        category="autograd",
        severity=Severity.MEDIUM,
        tables=("events",),
        explains=("step-time-regression",),
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
`events` with recompile, cache-limit and graph-break codes.

## Known false positives
One or two recompiles (the first call, a shorter last batch) are normal and below `min_recompiles`.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Repeated recompiles, a hit cache limit, or graph breaks."""
    rec, lim, brk = events(ctx, RECOMPILE_CODES), events(ctx, LIMIT_CODES), events(ctx, BREAK_CODES)
    if lim.height == 0 and rec.height < th["min_recompiles"] and brk.height == 0:
        return None
    parts = [p for p in (lim, rec, brk) if p.height]
    ev = combine(*parts)
    text = " ".join(ev.get_column("message").to_list()[:50]).lower()
    causes: dict[str, float] = {}
    if "size" in text or "shape" in text or "stride" in text:
        causes["dynamic_shapes"] = 0.9
    if "id_match" in text or "equals_match" in text or "___check_obj_id" in text or "== " in text:
        causes["python_state_in_graph"] = 0.6
    if brk.height:
        causes["graph_breaks"] = 0.6
    if not causes:
        causes["dynamic_shapes"] = 0.5
    what = "hit the recompile limit" if lim.height else f"recompiled {rec.height} times" if rec.height else f"{brk.height} graph breaks"
    return detection(ev, f"torch.compile {what}: {first_message(lim if lim.height else ev)}", causes,
                     confidence=0.9 if lim.height or rec.height else 0.6,
                     severity=Severity.LOW if not lim.height and not rec.height else None,
                     facts={"recompiles": rec.height, "cache_limit_hits": lim.height, "graph_breaks": brk.height})

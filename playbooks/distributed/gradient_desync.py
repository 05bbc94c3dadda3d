"""gradient-desync: replicas diverge (DDP reduction errors, unused parameters, metrics that must agree differ)."""

from __future__ import annotations

from dataclasses import replace

from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import detection, events, first_message, ranks_text

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

DDP_CODES = ("ddp_unused_parameters", "ddp_unused_parameter_list", "ddp_marked_ready_twice", "fsdp_requires_grad_mismatch",
             "grad_norm_mismatch")

PLAYBOOK = declare(
    Playbook(
        id="gradient-desync",
        title="Replicas out of sync",
        category="distributed",
        severity=Severity.HIGH,
        tables=("events", "metrics"),
        explains=("nccl-timeout", "collective-mismatch", "loss-spike"),
        codes=("ddp_marked_ready_twice", "ddp_unused_parameter_list", "ddp_unused_parameters",
               "fsdp_requires_grad_mismatch", "grad_norm_mismatch"),
        causes=(
            Cause("unused_parameters", "Some parameters get no gradient in a step (conditional branches, frozen heads), so DDP's reduction never completes",
                  verify="TORCH_DISTRIBUTED_DEBUG=DETAIL names the parameters that received no gradient",
                  fix="DistributedDataParallel(find_unused_parameters=True), or make every parameter take part in the loss", prior=0.5),
            Cause("not_wrapped", "The model (or part of it) is not wrapped in DDP/FSDP, so its gradients are never all-reduced",
                  verify="print(type(model)) on every rank; compare a parameter checksum across ranks after a step",
                  fix="Wrap the whole trainable model; all-reduce any gradients computed outside it", prior=0.3),
            Cause("rank_local_randomness", "Rank-local randomness or data changes the graph per rank",
                  verify="Seed every rank identically for model-side randomness; compare per-rank graphs",
                  fix="Use the same seed for model randomness on all ranks; keep data randomness in the sampler", prior=0.2),
        ),
        verify="TORCH_DISTRIBUTED_DEBUG=DETAIL; all-reduce and compare a parameter checksum across ranks",
        fix="Wrap the model correctly; find_unused_parameters=True where parts are conditionally used",
        thresholds={
            "rel_diff": Threshold(1e-3, "relative difference between ranks of a metric that must agree after all-reduce (grad norm)", "ours; anchors.md"),
            "min_points": Threshold(3, "consecutive common steps with ranks apart", "ours"),
        },
        doc="""\
## Symptom
DDP reports a reduction problem (`Expected to have finished reduction in the prior iteration before
starting a new one`, parameters that did not receive grad, `marked ready twice`, parameter shape or
count mismatch across ranks), or a metric that must be identical across ranks after all-reduce
(gradient norm) differs between ranks.

## Why it matters
Replicas that drift apart train different models; the loss may still look fine on rank 0.

## Evidence
`events` (DDP errors) and `metrics` (per-rank series of values that must agree).

## Known false positives
Per-rank losses legitimately differ (each rank sees other data); only post-all-reduce values are compared.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect_ddp_errors(ctx: Context, th: dict) -> Detection | None:
    """DDP's unused-parameter / unfinished-reduction / mismatch errors."""
    ev = events(ctx, DDP_CODES)
    if ev.height == 0:
        return None
    causes = {"unused_parameters": 0.9} if "reduction" in first_message(ev) or "unused" in first_message(ev).lower() else {"not_wrapped": 0.6, "unused_parameters": 0.4}
    seen = sorted({r for r in ev["rank"].to_list() if r is not None})
    ranks = ranks_text(seen)
    found = detection(ev, f"DDP gradient reduction failed{' on ' + ranks if ranks else ''}: {first_message(ev)}", causes, confidence=0.95)
    if found.onset.rank is None and len(seen) == 1:
        # The error line has no rank prefix but its parameter list names the rank (`... for rank 3:`).
        found.onset = replace(found.onset, rank=seen[0])
    return found

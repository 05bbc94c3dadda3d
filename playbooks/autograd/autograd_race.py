"""autograd-race: in-place modification of saved tensors, backward twice, threads sharing one graph."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import combine, detection, events, first_message, where

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

INPLACE_CODES = ("inplace_autograd_error",)
TWICE_CODES = ("backward_twice",)

PLAYBOOK = declare(
    Playbook(
        id="autograd-race",
        title="Autograd graph modified or shared unsafely",
        category="autograd",
        severity=Severity.HIGH,
        tables=("events", "spans"),
        explains=("nondeterminism", "nan-loss"),
        codes=("backward_twice", "inplace_autograd_error", "python_traceback"),
        causes=(
            Cause("inplace_on_saved_tensor", "An in-place op changed a tensor that autograd saved for backward",
                  verify="torch.autograd.set_detect_anomaly(True) names the forward op whose saved tensor changed",
                  fix="Use the out-of-place op (x = x + y, not x += y; relu(inplace=False)) or .clone() before modifying", prior=0.45),
            Cause("threads_share_graph", "Several threads run forward/backward on the same module or tensors at once",
                  verify="Rerun single-threaded; a VizTracer trace shows backward on several threads overlapping",
                  fix="One graph per thread (separate module copies) or a lock around forward+backward", prior=0.35),
            Cause("graph_reused", "backward() called twice through the same graph (a tensor kept across steps)",
                  verify="Find tensors carried from one step to the next (hidden states, running losses)",
                  fix=".detach() carried tensors; retain_graph=True only when a second backward is truly intended", prior=0.2),
        ),
        verify="torch.autograd.set_detect_anomaly(True); rerun single-threaded",
        fix="One graph per thread; clone before in-place ops on saved tensors; detach tensors carried across steps",
        thresholds={
            "overlap_share": Threshold(0.05, "share of backward time during which backward runs on two or more threads at once (traces)", "PLAYBOOKS.md autograd-race (>5% overlap)"),
        },
        doc="""\
## Symptom
`one of the variables needed for gradient computation has been modified by an inplace operation`,
`Trying to backward through the graph a second time`, `a leaf Variable that requires grad is being
used in an in-place operation`; in VizTracer traces, backward passes on several threads overlapping in time.

## Why it matters
These errors are raised far from the op that caused them; when threads share a graph the failure is
intermittent and gradients can be silently wrong.

## Evidence
`events` with in-place/backward-twice codes; `spans` (VizTracer) with backward work per thread.

## Known false positives
A single backward-twice error in a deliberate double-backward (gradient penalty) setup that forgot
`retain_graph` is a bug of the same family; no false positive is known for the error forms.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect_events(ctx: Context, th: dict) -> Detection | None:
    """In-place and backward-twice autograd errors."""
    inplace, twice = events(ctx, INPLACE_CODES), events(ctx, TWICE_CODES)
    parts = [p for p in (inplace, twice) if p.height]
    if not parts:
        return None
    ev = combine(*parts)
    causes: dict[str, float] = {}
    if inplace.height:
        causes["inplace_on_saved_tensor"] = 0.8
        causes["threads_share_graph"] = 0.3
        if _raised_in_a_thread(ctx, inplace):
            # The error surfaced in a worker thread's backward: threads sharing the graph come first.
            causes["threads_share_graph"], causes["inplace_on_saved_tensor"] = 0.9, 0.5
    if twice.height:
        causes["graph_reused"] = 0.8
    row = ev.row(0, named=True)
    return detection(ev, f"autograd error{where(row)}: {first_message(ev)}", causes, confidence=0.9)


def _raised_in_a_thread(ctx: Context, ev: pl.DataFrame) -> bool:
    """Whether one of the errors sits inside a traceback raised in a `threading.Thread` (not the main thread)."""
    blocks = ctx.events_where((pl.col("code") == "python_traceback")
                               & pl.col("text").str.contains(r"threading\.py.*_bootstrap_inner|Exception in thread"))
    if blocks.height == 0:
        return False
    inside = ev.select("file", "line").join(blocks.select("file", pl.col("line").alias("b0"), pl.col("end_line").alias("b1")), on="file")
    return inside.filter((pl.col("line") >= pl.col("b0")) & (pl.col("line") <= pl.col("b1"))).height > 0

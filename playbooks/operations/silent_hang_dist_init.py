"""silent-hang from a log that stops on a process-group start-up line (the rendezvous never completed)."""

from __future__ import annotations

from forensics.playbooks.evidence import detection
from forensics.playbooks.fields import field
from forensics.playbooks.operations.silent_hang import PLAYBOOK, quiet_end
from forensics.playbooks.operations.silent_hang_rank_claims import detect_duplicate_rank_claims

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity


# The log's last line is one the process-group set-up prints before the group is complete: DeepSpeed's
# init_distributed, torch's store-based barrier, torchrun's rendezvous (an `at_end` signature: parsers/signatures.toml,
# form dist_init).
@PLAYBOOK.detector(("events",))
def detect_dist_init_end(ctx: Context, th: dict) -> Detection | None:
    """A log whose last line is a distributed start-up line (`Initializing TorchBackend in DeepSpeed with backend
    nccl`, `cdb=None`, `Added key: store_based_barrier_key:1 to store for rank: 0`, `Waiting in store based barrier
    …`, `[default] Rendezvous'ing worker group`), with no error in the run: the group never formed.

    A start-up that completes goes on within seconds (the model load, `Completed store-based barrier`, training),
    but a paste may simply stop there, so only the end of the log proves it: low. Duplicate rank claims say more (the
    rank-claims detector); an error anywhere means the run crashed and its playbook says why.
    """
    stop = quiet_end(ctx, "dist_init")
    if stop.height == 0:
        return None
    if detect_duplicate_rank_claims(ctx, th) is not None:
        return None  # its finding names the cause; a low one here would lower the merged severity
    last = stop.row(0, named=True)
    if stop.select(field("framework")).item(0, 0) == "ray":
        return detection(stop, "the log stops where Ray starts its worker group (" + str(last["message"])[:120] + ") "
                               "with nothing after it: the workers never started, waiting for resources (GPUs, CPUs) "
                               "the cluster cannot give them",
                         {"unschedulable_workers": 0.9, "dead_peer": 0.2}, confidence=0.4, severity=Severity.LOW)
    return detection(stop, "the log stops at the process-group start-up (" + str(last["message"])[:120] + ") with nothing "
                           "after it: the rendezvous never completed (a rank or node never joined, or the address or "
                           "port is unreachable)",
                     {"rendezvous_incomplete": 0.9, "dead_peer": 0.3}, confidence=0.4, severity=Severity.LOW)

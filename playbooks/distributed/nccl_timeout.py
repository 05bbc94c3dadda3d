"""nccl-timeout: a collective timed out or NCCL failed; find the first failing rank and why."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, declare
from forensics.playbooks.evidence import combine, detection, events, first_message, ranks_of, ranks_text
from forensics.playbooks.fields import field

from forensics.contracts.context import Context
from forensics.contracts.model import ANY_PLAYBOOK, Cause, Detection, Severity

# gloo's monitoredBarrier names the ranks that never arrived; a dump signal is a peer's watchdog timeout
# relayed to this rank (it names the rank that timed out first).
TIMEOUT_CODES = ("nccl_watchdog_timeout", "nccl_work_status", "nccl_heartbeat_timeout", "store_timeout",
                 "store_socket_timeout", "gloo_error", "gloo_monitored_barrier_failed", "nccl_dump_signal")
# The watchdog's own stack where it raised the timeout: evidence only when the paste lost the sentence itself.
FRAME_CODES = ("nccl_watchdog_frame",)
# Its frames that rethrow a work's stored exception (WorkNCCL::handleNCCLGuard / handleException): the stored one may
# be an async NCCL error as well as a timeout (they log `Some NCCL operations have failed or timed out`).
RETHROW_FRAME = r"WorkNCCL::(?:handleNCCLGuard|handleException)\("
ERROR_CODES = ("nccl_error", "nccl_error_detail", "nccl_comm_aborted", "nccl_socket_connect_failed",
               "nccl_ib_completion_error", "nccl_warn", "dist_network_error", "nccl_ops_failed",
               "nccl_unique_id_store_error", "nccl_duplicate_gpu")
LAUNCHER_CODES = ("torchrun_worker_signal", "torchrun_child_failed_report", "torchrun_child_failed")
NETWORK_TEXT = r"(?i)socket|connect|NET/IB|ibv_|network|Connection reset|remote process exited|ib_|RoCE"
# Failures of the fabric itself: IB work completions in error, refused or aborted connections, a peer
# closing the socket. A peer that died first causes them too; the engine then confirms peer_died_first.
FABRIC_CODES = ("nccl_ib_completion_error", "nccl_socket_connect_failed")
# A store client giving up on the master's TCPStore (the same failure as the DistNetworkError it raises);
# its `retrying` warnings are not failures.
STORE_CONNECT_CODES = ("store_connect_failed",)
# NCCL_DEBUG=WARN lines printed by healthy runs: topology probing in VMs and containers, network
# plugin loading (NCCL falls back to its internal transports).
BENIGN_WARN = r"Could not find real path|NET/Plugin|No plugin found|Failed to open libibverbs|NET/IB : No device found"
FABRIC_TEXT = r"(?i)Connection closed by (?:remote )?peer|Connection reset by peer|Got completion from peer|socketStartConnect|Connect to \S+ failed"
INTERFACE_TEXT = r"(?i)NCCL_SOCKET_IFNAME|Bootstrap : no socket interface|no socket interface found|No usable|failed to bind"

PLAYBOOK = declare(
    Playbook(
        id="nccl-timeout",
        title="Collective timeout / NCCL error",
        category="distributed",
        severity=Severity.HIGH,
        tables=("events",),
        explains=(),
        codes=("dist_network_error", "gloo_error", "gloo_monitored_barrier_failed", "nccl_comm_aborted",
               "nccl_dump_signal", "nccl_duplicate_gpu", "nccl_error", "nccl_error_detail", "nccl_heartbeat_timeout",
               "nccl_ib_completion_error", "nccl_ops_failed", "nccl_socket_connect_failed",
               "nccl_unique_id_store_error", "nccl_warn", "nccl_watchdog_timeout", "nccl_work_status",
               "store_connect_failed", "store_socket_timeout", "store_timeout", "torchrun_child_failed",
               "torchrun_child_failed_report", "torchrun_worker_signal", "nccl_watchdog_frame"),
        causes=(
            Cause("peer_died_first", "A peer rank failed first (its own error is the root cause); the others waited for it",
                  verify="Find the earliest error on any rank: forensics analyze lists it as the root",
                  fix="Fix the first failure; the timeouts are its consequence", prior=0.45, playbook=ANY_PLAYBOOK),
            Cause("desync_or_straggler", "Ranks issued different collectives or one rank fell behind (different SeqNum across ranks)",
                  verify="Compare 'SeqNum' / 'last completed' across ranks' watchdog messages; TORCH_NCCL_DESYNC_DEBUG=1",
                  fix="Make every rank issue the same collectives in the same order; balance data across ranks", prior=0.3,
                  playbook="collective-mismatch"),
            Cause("network", "Network or InfiniBand failure between nodes",
                  verify="NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET; run nccl-tests all_reduce_perf across the nodes",
                  fix="Fix the fabric or set NCCL_IB_DISABLE=1 to confirm; replace the faulty node", prior=0.15),
            Cause("wrong_interface", "NCCL bound to the wrong network interface",
                  verify="NCCL_DEBUG=INFO: check 'NET/Socket : Using' lines",
                  fix="export NCCL_SOCKET_IFNAME=<the cluster interface>", prior=0.1),
            Cause("duplicate_gpu", "Two ranks were given the same GPU (the device was not picked from LOCAL_RANK, "
                  "or CUDA_VISIBLE_DEVICES shows each process the same one)",
                  verify="NCCL WARN 'Duplicate GPU detected : rank A and rank B both on CUDA device N'; print "
                         "torch.cuda.current_device() and CUDA_VISIBLE_DEVICES in every rank before init_process_group",
                  fix="torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before init_process_group (or device_id=...); "
                      "one visible GPU per process when the launcher sets CUDA_VISIBLE_DEVICES", prior=0.05),
        ),
        verify="NCCL_DEBUG=INFO TORCH_NCCL_DESYNC_DEBUG=1; nccl-tests all_reduce_perf",
        fix="Fix the first failing rank; for genuine slowness raise the timeout (init_process_group(timeout=...)); NCCL_IB_DISABLE=1 / NCCL_SOCKET_IFNAME for fabric problems",
        thresholds={},
        doc="""\
## Symptom
A rank's watchdog reports `Watchdog caught collective operation timeout: WorkNCCL(SeqNum=…, OpType=…)`,
a heartbeat-monitor abort or a peer's dump signal (`Received a dump signal due to a collective timeout
from rank N`), a gloo/store timeout, gloo's `Ranks N failed to pass monitoredBarrier` (naming the ranks
that never arrived), or an `NCCL error` (`unhandled system error`,
`internal error`, `remote process exited or there was a network error`).

## Why it matters
A timeout is almost always a consequence: the rank that did not arrive failed or stalled first. The
finding points to that rank when its own error is in the logs (the engine makes that error the root).

## Evidence
`events`: watchdog timeouts with their rank, SeqNum, op type, timeout and elapsed time; NCCL errors
with their `Last error` detail; `NCCL WARN` lines. Fabric errors (IB completions in error such as
`status=12` retry-exceeded, refused or aborted socket connects, `Connection closed by remote peer`)
rank the network cause first, unless another finding shows a peer died first (then its failure is
the root and this finding its consequence). A rank that cannot fetch the NCCL id from rank 0 through
the store (`is setting up NCCL communicator and retrieving ncclUniqueId from [0] … got error: …`)
is reported too; rank 0 usually died or stalled before it published the id. So is a store client that
gives up connecting to the master's TCPStore (`The client socket has timed out after …ms while trying to
connect to (host, port)`); its `- retrying (try=N, …)` warnings are not counted.

A rank that logs progress but neither a timeout nor an error while the others time out never reached
the collective: it is named, and the straggler cause ranks first.

NCCL's own `Duplicate GPU detected : rank 0 and rank 1 both on CUDA device N` (two ranks on one GPU)
ranks the duplicate-GPU cause first: it is a launch misconfiguration, not a peer's failure.

## Known false positives
`NCCL INFO` chatter and the advice sentences that follow a timeout (`Due to the asynchronous nature of
CUDA kernels …`) are not counted. `NCCL WARN` lines alone (no error, no timeout, no fabric failure)
are not a crash: topology and plugin probing warnings (`Could not find real path`, `NET/Plugin`) give
an `info` finding, other warnings a `medium` one.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Timeouts and NCCL errors, with the lagging rank told from the sequence numbers."""
    timeouts = events(ctx, TIMEOUT_CODES)
    if timeouts.height == 0:
        timeouts = events(ctx, FRAME_CODES)
    errors = combine(events(ctx, ERROR_CODES), ctx.events_of(*STORE_CONNECT_CODES, severity=("error",)))
    if timeouts.height == 0 and errors.height == 0:
        return None
    ev = combine(timeouts, errors)
    causes: dict[str, float] = {"peer_died_first": 0.3}
    facts: dict = {}
    if timeouts.height:
        seq = timeouts.with_columns(field("seq").cast(pl.Int64, strict=False).alias("seq"), field("op").alias("op"))
        seqs = seq.filter(pl.col("seq").is_not_null() & pl.col("rank").is_not_null()).group_by("rank").agg(pl.col("seq").min())
        if seqs.height > 1 and seqs.get_column("seq").n_unique() > 1:
            causes["desync_or_straggler"] = 0.8
            lag = seqs.sort("seq").row(0, named=True)
            facts["lagging_rank"], facts["lagging_seq"] = lag["rank"], lag["seq"]
        ops = seq.get_column("op").drop_nulls().unique().to_list()
        if ops:
            facts["op_types"] = sorted(ops)
        absent = timeouts.filter(pl.col("code") == "gloo_monitored_barrier_failed").select(field("failed_ranks")).to_series()
        absent_ranks = sorted({int(r) for v in absent.drop_nulls().to_list() for r in v.replace(" ", "").split(",") if r.isdigit()})
        if absent_ranks:
            facts["barrier_absent_ranks"] = absent_ranks
        silent = _silent_ranks(ctx, timeouts)
        if silent:
            # Ranks whose logs show progress but neither a timeout nor any error: they never reached the
            # collective the others waited in (a straggler or a rank stuck outside collectives).
            causes["desync_or_straggler"] = max(causes.get("desync_or_straggler", 0.0), 0.8)
            facts["silent_ranks"] = silent
    text = pl.concat([ev.get_column("message"), ev.get_column("text")]).str.join("\n")[0] if ev.height else ""
    if pl.Series([text]).str.contains(NETWORK_TEXT)[0]:
        causes["network"] = 0.6
    # The store errors of a rank waiting for rank 0's NCCL id say rank 0 went away or never got there
    # (a crash or hang before it created the communicator) more often than that the fabric failed.
    fabric = errors.filter(pl.col("code") != "nccl_unique_id_store_error")
    if fabric.filter(pl.col("code").is_in(list(FABRIC_CODES)) | pl.col("message").str.contains(FABRIC_TEXT)).height:
        # The fabric reported the failure itself: unless another finding shows a peer died first,
        # the network is the likelier cause.
        causes["network"] = 1.0
        causes["peer_died_first"] = 0.15
    if pl.Series([text]).str.contains(INTERFACE_TEXT)[0]:
        causes["wrong_interface"] = 0.6
    if errors.filter(pl.col("code") == "nccl_duplicate_gpu").height:
        # NCCL names the misconfiguration itself, on every rank it hit: no peer failed first.
        causes["duplicate_gpu"] = 1.0
        causes.pop("peer_died_first", None)
    ranks = sorted({r for r in ev.get_column("rank").to_list() if r is not None})
    severity = None
    warn_only = timeouts.height == 0 and errors.filter(pl.col("code") != "nccl_warn").height == 0
    if warn_only and causes.get("network", 0.0) < 1.0:
        # NCCL warnings with no error, no timeout and no fabric failure: topology or plugin probing
        # (known-benign forms) is noted only; other warnings are worth a look but are not a crash.
        benign = errors.get_column("message").str.contains(BENIGN_WARN).all()
        severity = Severity.INFO if benign else Severity.MEDIUM
    kind = "collective timeout" if timeouts.height else "NCCL error" if severity is None else "NCCL warning"
    if timeouts.height and timeouts.get_column("message").str.contains(RETHROW_FRAME).all():
        # The work-cleanup thread rethrew a work's stored exception: an async NCCL error or a timeout, either one.
        kind = "a collective that failed or timed out, rethrown by the NCCL watchdog,"
    summary = f"{kind} on {ranks_text(ranks) or 'an unknown rank'}: {first_message(timeouts if timeouts.height else errors)}"
    if "lagging_rank" in facts:
        summary += f" (rank {facts['lagging_rank']} is behind at SeqNum {facts['lagging_seq']})"
    if facts.get("barrier_absent_ranks"):
        summary += f" ({ranks_text(facts['barrier_absent_ranks'])} never reached the monitored barrier)"
    if facts.get("silent_ranks"):
        summary += f" ({ranks_text(facts['silent_ranks'])} logged no timeout and no error: it never reached the collective)"
    return detection(ev, summary, causes, confidence=0.9 if severity is None else 0.5, facts=facts, severity=severity)


def _silent_ranks(ctx: Context, timeouts: pl.DataFrame) -> list[int]:
    """Ranks with progress lines in the run but no timeout and no error of their own, when others timed out."""
    waited = set(ranks_of(timeouts))
    if not waited:
        return []
    known = set(ranks_of(ctx.metric_lines().filter(pl.col("step").is_not_null()).select("rank").collect())) if ctx.has("metrics") else set()
    # The launcher's account of the end (its report rows, the signals it sent) names every rank it
    # stopped, the straggler included: not an error of that rank's own.
    own = ctx.events_where((pl.col("severity") == "error") & ~pl.col("code").is_in(list(LAUNCHER_CODES)))
    erred = set(ranks_of(own))
    return sorted(known - waited - erred)

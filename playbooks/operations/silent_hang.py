"""silent-hang: a rank's log stops without an error while the rest of the run goes on, or stuck-worker dumps."""

from __future__ import annotations

import datetime as dt

import polars as pl
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import combine, detection, events, first_message
from forensics.playbooks.fields import field

from forensics.contracts.context import Context, event_count, evidence_rows, plain
from forensics.contracts.model import Cause, Detection, Onset, Severity

DUMP_CODES = ("nccl_heartbeat_timeout", "nccl_watchdog_stuck", "dataloader_timeout", "faulthandler_timeout", "py_spy_dump",
              "flight_recorder_missing_ranks")
# faulthandler's per-thread headers and frames: a hang's dump unless a fatal error of the same file asked for it.
DUMP_THREAD_CODES = ("faulthandler_thread",)
FRAME_CODES = ("faulthandler_frame",)
ERROR_SEVERITIES = ("error",)
# The job was stopped from outside (scheduler time limit, cancel, preemption): the launcher or slurmstepd
# (`*** JOB 608 ON node CANCELLED AT 2022-08-12T02:06:12 DUE TO TIME LIMIT ***`) says so.
KILL_CODES = ("torchrun_death_signal", "preemption_exit", "slurm_job_cancelled")
# What the launcher and srun print while they stop the workers after such a signal (not errors of the run).
SHUTDOWN_CODES = KILL_CODES + ("torchrun_closing_worker", "torchrun_child_failed", "torchrun_child_failed_report",
                              "torchrun_worker_signal", "python_traceback", "shell_signal_exit", "process_killed",
                              "slurm_task_failed")

def run_errored(ctx: Context) -> bool:
    """Whether the run logged any error: a log that merely stops at a start-up line then crashed, and its playbook says
    why (the at-end hang readings of the silent_hang_* modules stay quiet)."""
    return ctx.events_where(pl.col("severity").is_in(ERROR_SEVERITIES)).height > 0


def quiet_end(ctx: Context, form: str) -> pl.DataFrame:
    """The `log_end` rows of one form (a log's last line read as a waiting point), none when the run logged an error:
    then the log stopped at its crash, which its own playbook reads, not at a wait."""
    stop = events(ctx, ("log_end",)).filter(field("form") == form)
    return stop.clear() if stop.height and run_errored(ctx) else stop


PLAYBOOK = declare(
    Playbook(
        id="silent-hang",
        title="A rank stopped making progress without an error",
        category="operations",
        severity=Severity.HIGH,
        tables=("events", "metrics"),
        explains=("nccl-timeout", "rank-straggler"),
        codes=("dataloader_timeout", "faulthandler_timeout", "flight_recorder_missing_ranks", "nccl_heartbeat_timeout",
               "nccl_watchdog_stuck",
               "preemption_exit", "process_killed", "py_spy_dump", "python_traceback", "shell_signal_exit",
               "slurm_job_cancelled", "slurm_task_failed", "torchrun_child_failed", "torchrun_child_failed_report",
               "torchrun_closing_worker", "torchrun_death_signal", "torchrun_worker_signal", "fatal_python_error", "faulthandler_frame", "faulthandler_thread",
               "checkpoint_saved", "dist_member_init", "log_end", "torch_extension_lock", "torch_extensions_root",
               "python_stack", "interrupt_echo", "progress_eta", "eval_in_training"),
        causes=(
            Cause("collective_deadlock", "The rank is blocked in a collective the others never issued (or issued differently)",
                  verify="py-spy dump --pid <pid> on the stuck rank; TORCH_NCCL_DUMP_ON_TIMEOUT=1 flight recorder",
                  fix="Make all ranks issue the same collectives; add a timeout to init_process_group", prior=0.45),
            Cause("stuck_dataloader", "The data loader is stuck (a worker deadlocked, a hung file system read)",
                  verify="py-spy dump --pid <pid> shows the main thread in DataLoader __next__ / worker queue get",
                  fix="DataLoader(timeout=...) to turn the hang into an error; fix the worker; check the file system", prior=0.3),
            Cause("dead_peer", "A peer died silently (OOM-killed, node lost) and this rank waits forever",
                  verify="Check the scheduler / dmesg of the other nodes for kills at that time",
                  fix="Fix the peer's failure; use torchrun's elastic restart / heartbeat timeouts", prior=0.25),
            Cause("stale_build_lock", "A JIT extension build (torch.utils.cpp_extension) waits on the `lock` file an interrupted "
                  "build left in the extensions root",
                  verify="ls <extensions root>/<extension>/lock (e.g. ~/.cache/torch_extensions/py310_cu118/*/lock)",
                  fix="Delete the stale lock file (or the whole torch_extensions folder) and rerun; set TORCH_EXTENSIONS_DIR "
                      "per job on shared file systems", prior=0.2),
            Cause("duplicate_ranks", "Processes were launched with the same global rank, so the process group can never "
                  "gather all its members (launcher and trainer disagree on processes per node)",
                  verify="Print RANK / LOCAL_RANK / WORLD_SIZE (SLURM_PROCID, SLURM_NTASKS) in every process",
                  fix="Launch one process per GPU with matching settings (srun --ntasks-per-node equal to the trainer's "
                      "devices per node)", prior=0.2),
            Cause("rendezvous_incomplete", "The process group never formed: a rank or node never reached the rendezvous "
                  "(an unreachable MASTER_ADDR, a MASTER_PORT of 0 or in use, the wrong network interface, a node that "
                  "never started)",
                  verify="NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL; check every rank prints the same MASTER_ADDR, "
                         "MASTER_PORT and world size; nc -zv <MASTER_ADDR> <MASTER_PORT> from each node",
                  fix="Give every rank one reachable address and a fixed free port (not 0); set NCCL_SOCKET_IFNAME; pass a "
                      "timeout to init_process_group so the wait becomes an error", prior=0.2),
            Cause("input_prompt", "The process waits at an interactive prompt for keyboard input that a batch job, a "
                  "launcher's worker or a non-zero rank never receives (a logger's login menu when no API key is set)",
                  verify="The log's last line is the prompt; py-spy dump --pid <pid> shows the main thread in the prompt's "
                         "read of stdin (input / click.prompt)",
                  fix="Answer it before the job starts: `wandb login` or WANDB_API_KEY on every node, or WANDB_MODE="
                      "offline / disabled where nothing should be uploaded; run jobs with stdin from /dev/null",
                  prior=0.2),
            Cause("unschedulable_workers", "The job's workers wait for resources the cluster does not have (Ray Train "
                  "actors asking for more GPUs or CPUs than the nodes offer: num_workers=2 with use_gpu=True on a "
                  "one-GPU machine), so the worker group never starts",
                  verify="ray status (pending resource demands against the cluster's resources); the scheduler's "
                         "`resource request cannot be scheduled right now` warning",
                  fix="Ask for no more than the cluster has (num_workers x GPUs per worker <= GPUs), or add nodes",
                  prior=0.2),
        ),
        verify="py-spy dump --pid <pid>; TORCH_NCCL_DUMP_ON_TIMEOUT=1 (flight recorder)",
        fix="As the cause says; add timeouts so hangs become errors",
        thresholds={
            "gap_minutes": Threshold(10, "minutes between a rank's last progress line and the other ranks' last progress line", "ours; matches the default NCCL timeout"),
            "lag_steps": Threshold(20, "steps a rank's last logged step trails the furthest rank", "ours"),
            "stall_intervals": Threshold(30, "silence before an outside kill, in typical intervals between progress lines, that counts as a hang of every rank", "ours"),
            "stall_minutes": Threshold(2, "shortest silence before an outside kill that counts as a hang of every rank", "ours"),
        },
        doc="""\
## Symptom
A rank's progress (step lines) stops while the other ranks' progress goes on for a long time
(default 10 minutes or 20 steps more), without an error on that rank; or every rank's progress stops together
and, after a long silence without any error (default 30 progress intervals and at least 2 minutes),
the job is stopped from outside (`Received 15 death signal` from a scheduler's time limit or a
cancel; Slurm's `*** JOB … CANCELLED AT … DUE TO TIME LIMIT ***`, whose stamp is taken as the time of
the kill); or stack dumps of stuck workers (`faulthandler` timeouts, `py-spy dump`, the NCCL heartbeat
monitor reporting the watchdog stuck, `DataLoader timed out`). Where the log stops is evidence too: a log
that ends at torch.utils.cpp_extension's `Using … as PyTorch extensions root...` (a JIT build waiting on a
stale `lock` file); registration lines (`Initializing distributed: GLOBAL_RANK: r, MEMBER: m/N`) in which
two processes claim one rank while others never appear, and nothing after; a progress bar that never
advanced (`0/N [00:00<?, ?it/s]`) after an earlier loop finished and saved a checkpoint (medium: only
the last line proves it); a log whose last line is a process-group start-up line (DeepSpeed's
`Initializing TorchBackend in DeepSpeed with backend nccl` / `cdb=None`, torch's `Added key:
store_based_barrier_key:1 to store for rank: 0` or `Waiting in store based barrier …`, torchrun's `[default]
Rendezvous'ing worker group`; Ray Train's `Trainer logs will be logged in: …` or Ray's `resource request cannot be
scheduled right now`: workers waiting for resources) with no error in the run (low: a paste may just stop there); a log that stops on a
later line of the JIT build (`Emitting ninja build file …`, `Building extension module X...`, `Loading extension module
X...`) with no error in the run (low); a log that stops on the announcement that training starts (`Starting
training...`, `Starting training from iteration 0`) or that a checkpoint restore finished (`Restoring... Done.`,
TensorFlow's `Restoring parameters from …`), on the first epoch's header (`Epoch 1/5`, `Epoch 0/64`) or on
tf.distribute's all-reduce set-up of the first step (`batch_all_reduce: 369 all-reduces with algorithm = nccl`),
at most two number-free lines before its end, with no metric line in
that log and no error in the run (low: the first step never came, or a paste stopped there); a Ctrl-C traceback whose innermost frame is a blocking wait (a queue get, a poll,
a lock, a join, a collective), or a log that ends in such a stack with no exception line (low: an interrupt alone proves
no hang); a `^C` that interrupted worker processes (`^CProcess Process-8:`, or tracebacks from multiprocessing's child
bootstrap) when no traceback shows work under way (low). A log whose last line is Paddle's store client still retrying (`Retry to connect to
host:port while the server is not yet listening.`), a Keras progress bar one step short of its total (`999/1000
[====>.] - ETA: 1s - …`: Keras draws the bar at the total only after the validation pass), or the training-set size a
trainer prints before its first batch (`Num training images: N`), with no error in the run (low); a log that ends in
an evaluation between epochs (yolact's `Computing validation mAP …`) with no progress line after it while the last one
expected at least ten more minutes of training (`ETA: 3 days, 23:57:23`), with no error (low); a log that stops at
ps-lite's start-up (`Bind to role=scheduler, …` or a node's `cmd=ADD_NODE` registration before ids are assigned: a
node never reached the scheduler), with no error (low); a log that stops at wandb's interactive login menu (`wandb:
(3) Don't visualize my results`, `wandb: Enter your choice:`), with no error: the process waits on stdin (low); a log
that stops at the announcement of a validation pass (`starting validation in mode val_sampling.`, `Running
validation...`) after training metric lines, with no error (low); a log that stops at Caffe's `Data layer prefetch
queue empty` (the net waits for a batch that never came), with no error (low). The lines a keyboard interrupt leaves after such an
end (`^C`, ssh's `Killed by signal 2.`, the dmlc launcher's `Stop launcher`) do not move it.

## Why it matters
Hung jobs burn GPU hours until someone notices; the rank that stopped first is where to look.

## Evidence
`metrics` (last step and time per rank) against the other ranks' latest progress; `events` for dumps,
for the outside kill, and for errors that would explain the stop (a rank that ends with an error is
a crash, not a hang; the launcher's own shutdown messages after the kill are not such errors).

## Known false positives
A rank that simply logs less often (only rank 0 logs metrics) is not compared: only ranks that log
progress are. A run whose logs all end together is not a hang by this rule. A job the scheduler
cancels while it still makes progress (a time limit too short, `scancel`, preemption) is no finding:
the stop is the scheduler's, not a failure of the run; srun's `task N: Terminated` / `Killed` lines
that follow are its consequence. A log whose extensions-root line is followed by anything (the build,
`Loading extension module`, training), a restart that prints every rank twice, and a paste that ends on a
fresh progress bar with no finished loop before it are no finding; nor are start-up lines followed by
anything (most DeepSpeed logs print them and go on), or Lightning's registration lines of every member. A start announcement followed by a line with a number (a
progress bar, a step, a loss), or in a log that logged any metric line before it, is no finding; nor is one that
resumes from a later iteration (`Starting training from iteration:600000`): a resumed run with nothing left to train
ends right there. A Ctrl-C
whose tracebacks show work (a forward, a worker's `__getitem__`) is an ordinary interrupt and no finding. A Keras bar anywhere else in its epoch (a paste cut mid-epoch) or at its total, a
retry or a training-set size followed by anything, and the evaluation after the last iteration (ETA about zero) are
no finding. ps-lite logs that go on to `assign rank=` / `the scheduler is connected to …`, a wandb prompt answered
(`You chose …`, or newer versions' 30-second timeout), and a validation announcement with no training metric line
before it or followed by a number are no finding.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect_dumps(ctx: Context, th: dict) -> Detection | None:
    """Stack dumps and stuck-watchdog reports, quoting the stuck (innermost) frame of the first dumped thread."""
    ev = combine(events(ctx, DUMP_CODES), _thread_dumps(ctx))
    if ev.height == 0:
        return None
    stuck = _stuck_frame(ctx, ev)
    quoted = combine(ev, stuck) if stuck.height else ev
    text = " ".join(quoted.get_column("message").to_list()[:20]).lower()
    causes = {"stuck_dataloader": 0.8} if "dataloader" in text else {"collective_deadlock": 0.6, "dead_peer": 0.4}
    at = ""
    if stuck.height:
        f = stuck.select(field("function").alias("fn"), field("file").alias("src"), field("line").alias("ln")).row(0, named=True)
        at = f"; stuck in {f['fn']} ({str(f['src']).replace(chr(92), '/').rsplit('/', 1)[-1]}:{f['ln']})"
    lead = stuck if stuck.height else None
    return detection(quoted, f"stuck process: {first_message(ev)}{at}", causes, confidence=0.8, lead=lead)


def _thread_dumps(ctx: Context) -> pl.DataFrame:
    """faulthandler thread headers of a dump asked for while the process lived (a timeout, a signal), not of a crash:
    a `Fatal Python error` earlier in the same file makes the dump the crash's own."""
    heads = events(ctx, DUMP_THREAD_CODES)
    if heads.height == 0:
        return heads
    fatal = ctx.events_of("fatal_python_error").group_by("file").agg(pl.col("line").min().alias("_fatal"))
    if fatal.height == 0:
        return heads
    return heads.join(fatal, on="file", how="left").filter(
        pl.col("_fatal").is_null() | (pl.col("line") < pl.col("_fatal"))).drop("_fatal")


def _stuck_frame(ctx: Context, dumps: pl.DataFrame) -> pl.DataFrame:
    """The first frame line after the first thread header of a dump (faulthandler prints innermost first)."""
    heads = dumps.filter(pl.col("code") == "faulthandler_thread")
    if heads.height == 0:
        return heads
    first = heads.row(0, named=True)
    frames = ctx.events_of(*FRAME_CODES).filter((pl.col("file") == first["file"]) & (pl.col("line") > first["line"]))
    return frames.sort("line").head(1)


@PLAYBOOK.detector(("metrics",))
def detect_stalled_rank(ctx: Context, th: dict) -> Detection | None:
    """A rank whose progress lines end long before the rest of the run's logs."""
    # Aggregated lazily over the stored table: a big run has millions of progress rows.
    # The metrics lines (one row per progress line): what is asked is where and when each rank logged.
    m = ctx.metric_lines().filter(pl.col("rank").is_not_null() & pl.col("step").is_not_null())
    size = m.select(pl.len().alias("n"), pl.col("rank").n_unique().alias("ranks"), pl.col("ts").max().alias("end")
                    ).collect(engine="streaming").row(0)
    if size[0] == 0 or size[1] < 2:
        return None
    # Streamed aggregations (a big run's progress rows never sit in memory at once): each rank's last step,
    # time and highest line number, then the file of that line (the first in table order when two files tie).
    ends = m.group_by("rank").agg(pl.col("step").max().alias("last_step"), pl.col("ts").max().alias("last_ts"),
                                  pl.col("line").max().alias("line")).collect(engine="streaming")
    files = (m.with_row_index("_i").join(ends.lazy().select("rank", "line"), on=["rank", "line"])
             .group_by("rank").agg(pl.col("file").sort_by("_i").first()).collect(engine="streaming"))
    last = plain(ends.join(files, on="rank").select("rank", "last_step", "last_ts", "file", "line"))
    ev = ctx.events_where(pl.col("severity").is_in(ERROR_SEVERITIES))  # the errors are all it looks at
    # Only the others' progress counts as the run going on: when every rank stops at the same point and
    # the others then time out in the collective, the timeout finding reports the rank that never came.
    run_end = size[2]
    max_step = last.get_column("last_step").max()
    # Each rank's own errors, split once: a run of thousands of ranks (one small log each) has most ranks without
    # any, and those need no query of their own.
    errors = ev.filter(pl.col("rank").is_not_null() & pl.col("code").is_in(DUMP_CODES).not_())
    by_rank = errors.partition_by("rank", as_dict=True) if errors.height else {}
    stalled = []
    for row in last.sort("rank").iter_rows(named=True):
        by_time = run_end is not None and row["last_ts"] is not None and run_end - row["last_ts"] >= dt.timedelta(minutes=th["gap_minutes"])
        by_step = max_step - row["last_step"] >= th["lag_steps"]
        if not (by_time or by_step):
            continue
        # A rank that ended with its own error crashed; the crash playbooks explain it.
        own_errors = by_rank.get((row["rank"],))
        if own_errors is None:
            stalled.append(row)
            continue
        if row["last_ts"] is not None:
            own_errors = own_errors.filter(pl.col("ts").is_null() | (pl.col("ts") >= row["last_ts"]))
        else:
            own_errors = own_errors.filter((pl.col("file") != row["file"]) | (pl.col("line") > row["line"]))
        if own_errors.height:
            continue
        stalled.append(row)
    if not stalled or len(stalled) == last.height:
        return None
    first = min(stalled, key=lambda r: (r["last_step"], r["rank"]))
    rows = ctx.metrics_select("file", "line", "ts", "rank", "step", "name", "value", where=(
        pl.col("rank").is_not_null() & pl.col("step").is_not_null() & (pl.col("rank") == first["rank"]) & (pl.col("line") == first["line"])))
    ranks = [r["rank"] for r in stalled]
    gap = f", {(run_end - first['last_ts']).total_seconds() / 60:.0f} min before the others' last progress line" if run_end is not None and first["last_ts"] is not None else ""
    return Detection(
        summary=f"rank {first['rank']} stopped at step {first['last_step']} (others reached step {max_step}){gap}, with no error of its own",
        onset=Onset(step=first["last_step"], time=first["last_ts"], rank=first["rank"], file=first["file"], line=first["line"]),
        evidence=evidence_rows(rows),
        evidence_count=len(stalled),
        causes={"collective_deadlock": 0.5, "stuck_dataloader": 0.4, "dead_peer": 0.4},
        confidence=0.7,
        facts={"stalled_ranks": ranks, "last_step": first["last_step"], "max_step": max_step},
        ranks=ranks,
    )


@PLAYBOOK.detector(("metrics",))
def detect_stalled_then_killed(ctx: Context, th: dict) -> Detection | None:
    """Every rank's progress stops at once; long after, with no error in between, the job is killed from outside."""
    kill = _kill_times(ctx.events_of(*KILL_CODES))
    if kill.height == 0:
        return None
    # Queried lazily: a big run has millions of progress rows, and only one per line is kept.
    m = ctx.metric_lines().filter(pl.col("step").is_not_null() & pl.col("ts").is_not_null())
    killed_at = kill.get_column("ts").min()
    # slurmstepd's stamp is the cluster's local time: progress logged after it means the clocks disagree.
    if kill.row(0, named=True)["_from_at"] and m.filter(pl.col("ts") > killed_at).select(pl.len()).collect().item():
        return None
    m = m.filter(pl.col("ts") <= killed_at)
    # Ordered (table order breaks ties in time): ranks that log their last step at the same instant
    # must not make the quoted line depend on hash order.
    progress = plain(m.group_by("file", "line", maintain_order=True).agg(
        pl.col("ts").first(), pl.col("step").first(), pl.col("rank").first()).collect()).sort("ts", maintain_order=True)
    if progress.height == 0:
        return None
    last_ts = progress.get_column("ts").max()
    silence = (killed_at - last_ts).total_seconds()
    gaps = progress.sort("file", "line").with_columns(pl.col("ts").diff().over("file").dt.total_seconds().alias("gap"))
    typical = gaps.get_column("gap").drop_nulls().filter(gaps.get_column("gap").drop_nulls() > 0).median()
    if typical is None or silence < max(th["stall_intervals"] * float(typical), th["stall_minutes"] * 60):
        return None
    # An error between the last progress and the kill means the run crashed (its playbook says why).
    ev = ctx.events_where(pl.col("severity").is_in(ERROR_SEVERITIES) & ~pl.col("code").is_in(list(SHUTDOWN_CODES)))
    if ev.filter(pl.col("ts").is_null() | (pl.col("ts") > last_ts)).height:
        return None
    last = progress.filter(pl.col("ts") == last_ts).row(0, named=True)
    last_step = int(progress.get_column("step").max())
    # The quoted row is a metrics row (its name and value stand for the line until the line's text is read).
    rows = plain(ctx.metrics_lazy().filter((pl.col("file") == last["file"]) & (pl.col("line") == last["line"])
                                           & pl.col("step").is_not_null() & (pl.col("ts") <= killed_at)).head(1).collect())
    k = kill.row(0, named=True)
    return Detection(
        summary=f"every rank stopped making progress at step {last_step} ({last_ts:%H:%M:%S}); nothing was logged for "
                f"{silence / 60:.0f} min, with no error, until the job was stopped from outside ({k['message']})",
        onset=Onset(step=last_step, time=last_ts, file=last["file"], line=last["line"]),
        evidence=evidence_rows(rows) + evidence_rows(kill.head(1).drop("_from_at")),
        evidence_count=event_count(kill) + 1,
        causes={"collective_deadlock": 0.5, "stuck_dataloader": 0.5, "dead_peer": 0.3},
        confidence=0.7,
        facts={"last_step": last_step, "silence_s": round(silence, 1), "typical_interval_s": float(typical)},
    )


def _kill_times(kill: pl.DataFrame) -> pl.DataFrame:
    """Outside kills with a time, earliest first: a line's own stamp, else slurmstepd's `CANCELLED AT` stamp.

    That stamp has no zone; like every zoneless stamp of the logs it is taken as UTC.
    """
    if kill.height == 0:
        return kill.with_columns(pl.lit(False).alias("_from_at"))
    at = field("at").str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False).dt.replace_time_zone("UTC")
    return (kill.with_columns(pl.col("ts").is_null().alias("_from_at"), pl.coalesce(pl.col("ts"), at).alias("ts"))
            .filter(pl.col("ts").is_not_null()).sort("ts"))

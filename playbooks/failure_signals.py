"""The signs that a run failed: final exceptions, fatal signals, launcher exits, kills, errors nothing followed."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.fields import field

from forensics.contracts.context import Context, sort_by_onset

# Codes that end a process whatever else the log says: an uncaught exception, a C++ abort, a fatal signal,
# a launcher or scheduler reporting a child's non-zero exit, a kill.
FATAL_CODES = ("python_traceback", "terminate_called", "fatal_python_error", "shell_signal_exit", "process_killed",
               "dataloader_worker_fault", "dataloader_worker_killed", "dataloader_worker_exited", "spawn_process_exited",
               "torchrun_child_failed", "torchrun_child_failed_report", "torchrun_worker_signal", "torchrun_error_file",
               "slurm_task_failed", "deepspeed_launcher_exit", "cpp_stacktrace", "native_check_failed",
               "job_failed_report")
# A stop from outside (time limit, scancel, preemption, a launcher's death signal) is the scheduler's, not a failure.
OUTSIDE_STOP_CODES = ("slurm_job_cancelled", "torchrun_death_signal", "preemption_exit")
# Exceptions that end a run without it failing: the user's interrupt, an explicit exit, warnings raised as errors.
BENIGN_EXCEPTIONS = r"^(?:\w+\.)*(?:KeyboardInterrupt|SystemExit|\w*Warning)$"
# An interrupt pasted from a terminal: `^C` echoed before the traceback opener (the exception line may be cut).
CTRL_C = r"^\^C|\n\^C|KeyboardInterrupt"
# The terminal's `^C` echo as its own event (parsers/signatures.toml): the interrupt's tracebacks may start lines later.
INTERRUPT_CODES = ("interrupt_echo",)
# The innermost frame of an exception raised while stopping (a GUI wrapper's terminate, __del__, __exit__,
# a close or cleanup hook): an error of the shutdown after the run, not the run's failure.
WARNING_TEXT = r"(?i)warning\b"
# A thread the training loop cannot go on without: PyTorch's DataLoader checks its pin-memory thread on every batch it
# waits for and raises `RuntimeError('Pin memory thread exited unexpectedly')` once it died (torch/utils/data/
# dataloader.py `_get_data`), so that thread's traceback ends the run even where the paste stops before the main one
# (torchmd/torchmd-net#290, Abe404/root_painter#168, AllenCell/cyto-dl#65; with the main traceback
# layumi/Person_reID_baseline_pytorch#365). Named by the thread (`Thread-104 (_pin_memory_loop)` on Python 3.10+) or
# by its frames (`pin_memory.py", line 49, in _pin_memory_loop` under the 3.8 name `Thread-570`).
LOADER_THREAD = r"\b_pin_memory_loop\b"
TEARDOWN_FUNCTIONS = r"^(?:terminate|shutdown|_?shutdown_\w*|close|_?cleanup\w*|__del__|__exit__|_exitfunc|atexit\w*|stop)$"


def failure_signals(ctx: Context) -> pl.DataFrame:
    """Every event that shows the run (or one of its processes) failed, earliest first.

    Fatal codes count unless the exception is benign (an interrupt, an exit, a warning) or raised in a teardown
    function; any other error counts when no progress line of its rank follows it in its file (an error the
    program recovered from is followed by more training). Nothing counts after a stop from outside.
    """
    ev = ctx.events_where(pl.col("severity") == "error")
    if ev.height == 0:
        return ev
    ev = _before_outside_stop(ctx, ev.filter(~pl.col("code").is_in(list(OUTSIDE_STOP_CODES))))
    # srun's `Terminated` is SIGTERM sent to the tasks (a time limit, a cancel): a stop, not a failure of theirs.
    ev = ev.filter(~((pl.col("code") == "slurm_task_failed") & (field("status").fill_null("") == "Terminated")))
    tb = pl.col("code") == "python_traceback"
    exc = field("exc_type").fill_null("")
    benign = tb & (exc.str.contains(BENIGN_EXCEPTIONS) | pl.col("text").str.contains(CTRL_C) | after_interrupt(ctx, ev))
    teardown = tb & field("function").fill_null("").str.contains(TEARDOWN_FUNCTIONS)
    # A background thread's uncaught exception (threading's `Exception in thread NAME:` above the traceback): Python prints
    # it and the main thread goes on (a logger's upload thread, a prefetcher); it is not how the run ended. A signature
    # that reads the exception's own line still counts, and so does a LOADER_THREAD's traceback.
    thread = tb & field("thread").is_not_null() & ~pl.col("text").fill_null("").str.contains(LOADER_THREAD)
    ev = ev.filter(~(benign | teardown | thread))
    fatal = pl.col("code").is_in(list(FATAL_CODES))
    # An error-level line that says it is a warning (`UserWarning: CUDA initialization: …`, fairseq's `| WARNING: ran
    # out of memory …` before it skips the batch) ends nothing by itself.
    ev = ev.filter(fatal | ~pl.col("message").str.contains(WARNING_TEXT))
    ev = ev.with_columns(progress_after(ctx, ev).alias("_went_on"))
    # A traceback followed by more progress of its rank was caught (logged) and training went on.
    return sort_by_onset(ev.filter(~pl.col("_went_on") | (fatal & ~tb)).drop("_went_on"))


def after_interrupt(ctx: Context, ev: pl.DataFrame) -> pl.Series:
    """Whether each event comes after a `^C` echoed earlier in its file: the tracebacks Ctrl-C makes the main process
    and its workers print (each worker's under its `Process <name>:` header, the echo often on the first of them)."""
    echo = ctx.events_of(*INTERRUPT_CODES)
    if echo.height == 0 or ev.height == 0:
        return pl.Series([False] * ev.height, dtype=pl.Boolean)
    first = echo.group_by("file").agg(pl.col("line").min().alias("_echo"))
    keyed = ev.select("file", "line").with_row_index("_i").join(first, on="file", how="left").sort("_i")
    return keyed.select((pl.col("line") >= pl.col("_echo")).fill_null(False).alias("x")).get_column("x")


def _before_outside_stop(ctx: Context, ev: pl.DataFrame) -> pl.DataFrame:
    """Signals before the first stop from outside: what follows a cancel or a preemption is the stop's own doing."""
    stops = ctx.events_of(*OUTSIDE_STOP_CODES)
    if stops.height == 0 or ev.height == 0:
        return ev
    first_line = stops.group_by("file").agg(pl.col("line").min().alias("_stop"))
    first_ts = stops.get_column("ts").drop_nulls().min()
    ev = ev.join(first_line, on="file", how="left").filter(pl.col("_stop").is_null() | (pl.col("line") < pl.col("_stop"))).drop("_stop")
    if first_ts is not None:
        ev = ev.filter(pl.col("ts").is_null() | (pl.col("ts") < first_ts))
    return ev


def progress_after(ctx: Context, ev: pl.DataFrame) -> pl.Series:
    """Whether a progress line follows the event in its file: of its own rank, or without a rank; any rank's for
    an event without one."""
    if ev.height == 0 or not ctx.has("metrics"):
        return pl.Series([False] * ev.height, dtype=pl.Boolean)
    last = (ctx.metric_lines().group_by("file", "rank").agg(pl.col("line").max().alias("_own")).collect()
            .with_columns(pl.col("file").cast(pl.String)))
    rankless = last.filter(pl.col("rank").is_null()).select("file", pl.col("_own").alias("_rankless"))
    any_rank = last.group_by("file").agg(pl.col("_own").max().alias("_any"))
    keyed = (ev.select(pl.col("file").cast(pl.String), "rank", pl.coalesce("end_line", "line").alias("_end"))
             .with_row_index("_i")
             .join(last.filter(pl.col("rank").is_not_null()), on=["file", "rank"], how="left")
             .join(rankless, on="file", how="left")
             .join(any_rank, on="file", how="left")
             .sort("_i"))
    after = pl.when(pl.col("rank").is_null()).then(pl.col("_any")).otherwise(pl.coalesce("_own", "_rankless"))
    return keyed.select((after > pl.col("_end")).fill_null(False).alias("x")).get_column("x")


def final_error(signals: pl.DataFrame) -> dict:
    """The row that says most about how the first failing rank ended: its last exception, else its last signal.

    The first failing rank is the rank of the earliest signal (None for a single-process log).
    """
    first = signals.row(0, named=True)
    own = signals.filter(pl.col("rank") == first["rank"]) if first["rank"] is not None else signals.filter(pl.col("rank").is_null())
    own = own if own.height else signals
    exceptions = own.filter(pl.col("code") == "python_traceback")
    pick = exceptions if exceptions.height else own
    return pick.row(pick.height - 1, named=True)

"""The postmortem's facts computed from the tables and findings: verdict, impact, causal chain, timeline lanes."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import orjson
import polars as pl

from forensics.contracts.context import Context, plain
from forensics.contracts.model import Onset, Severity
from forensics.engine import Analysis, Finding
from forensics.playbooks.evidence import ranks_text
from forensics.reports.postmortem.checkpoints import Save, last, save_rows
from forensics.reports.postmortem.digest import around, rank_extents, rows_at_times

# Events that end a wait on a peer that already failed (the time between the failure and these is lost).
TIMEOUT_CODES = ("nccl_watchdog_timeout", "nccl_heartbeat_timeout", "store_timeout", "store_socket_timeout",
                 "dataloader_timeout", "faulthandler_timeout", "gloo_monitored_barrier_failed")
# Events that say a process ended.
EXIT_CODES = ("torchrun_worker_signal", "torchrun_child_failed_report", "torchrun_child_failed", "spawn_process_exited",
              "shell_signal_exit", "host_oom_killed", "slurm_oom_kill", "process_killed", "terminate_called",
              "fatal_python_error", "deepspeed_launcher_exit", "preemption_exit", "nccl_process_teardown")
# Field names of events whose values describe the software and hardware (the appendix).
ENV_KEYS = ("version", "driver", "cuda", "gpu_name", "world_size")


@dataclass
class Fact:
    """One line of a facts table: what, the value, and how it was derived (or why it is unknown)."""

    label: str
    value: str
    note: str = ""


@dataclass
class Point:
    """One mark on a swim lane."""

    kind: str  # first_metric | last_metric | first_error | exit
    ts: dt.datetime | None
    step: int | None
    file: str | None
    line: int | None
    text: str = ""


@dataclass
class Lane:
    """One rank's life in the run (rank None: lines that name no rank, e.g. the launcher's)."""

    rank: int | None
    points: list[Point] = field(default_factory=list)
    first_failure: bool = False

    @property
    def name(self) -> str:
        """'rank 3' or 'no rank'."""
        return f"rank {self.rank}" if self.rank is not None else "no rank"

    def point(self, kind: str) -> Point | None:
        """The point of a kind, if the lane has one."""
        return next((p for p in self.points if p.kind == kind), None)


@dataclass
class ChainNode:
    """A finding and the findings it explains, as shown in the causal chain."""

    finding: Finding
    children: list[ChainNode] = field(default_factory=list)


def fmt_time(t: dt.datetime | None) -> str:
    """UTC wall time, to the second."""
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if t else "unknown"


def fmt_dur(seconds: float) -> str:
    """'1 h 02 min', '10 min 59 s', '58 s'."""
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h} h {m:02d} min"
    if m:
        return f"{m} min {sec:02d} s"
    return f"{sec} s"


def where(o: Onset) -> str:
    """'rank3.log:52' for an onset."""
    return f"{o.file}:{o.line}" if o.file else "no line"


def time_near(ctx: Context, file: str | None, line: int | None) -> dt.datetime | None:
    """The time of a line: that of the nearest earlier time-stamped row of the same file (events or metrics)."""
    if file is None or line is None:
        return None

    def compute() -> dt.datetime | None:
        cands = []
        ev = ctx.table("events")
        if ev.height:
            f = ev.filter((pl.col("file") == file) & (pl.col("line") <= line) & pl.col("ts").is_not_null()).sort("line")
            cands += f.get_column("ts").tail(1).to_list()
        cands += around(ctx, "ts", pl.DataFrame({"file": [file], "line": [line]})).get_column("back").to_list()
        return max((c for c in cands if c is not None), default=None)

    return ctx.memo(("postmortem", "time_near", file, line), compute)


def run_span(ctx: Context) -> tuple[dt.datetime | None, dt.datetime | None]:
    """First and last time stamp of any metric or event row."""
    los, his = [], []
    if ctx.has("metrics"):
        e = rank_extents(ctx)
        los.append(e.get_column("ts_min").min())
        his.append(e.get_column("ts_max").max())
    ev = ctx.table("events")
    if ev.height:
        los.append(ev.get_column("ts").min())
        his.append(ev.get_column("ts").max())
    los = [x for x in los if x is not None]
    his = [x for x in his if x is not None]
    return (min(los) if los else None, max(his) if his else None)


def failure_root(a: Analysis) -> Finding | None:
    """The finding whose onset is the first failure (else the top-ranked one)."""
    if a.first_failure is not None:
        for f in a.findings:
            if f.root_cause and f.onset == a.first_failure:
                return f
    return a.findings[0] if a.findings else None


def _explained(f: Finding, a: Analysis) -> list[Finding]:
    by_id = {x.id: x for x in a.findings}
    return [by_id[i] for i in f.explains if i in by_id]


def verdict(a: Analysis, ctx: Context, t_fail: dt.datetime | None, estimated: bool) -> str:
    """One paragraph a manager can read: what failed first, where, when, and the top cause."""
    worst = max((f.severity for f in a.findings), default=None)
    files = ctx.table("files").height
    if worst is None or worst <= Severity.INFO:
        return (f"No problem found: {len(a.ran)} playbooks ran over {files} file(s) and none reported a finding above info"
                + (f"; {len(a.skipped)} could not run for lack of evidence (see What could not be checked)." if a.skipped else "."))
    root = failure_root(a)
    assert root is not None
    o = root.onset
    who = f"rank {o.rank}" if o.rank is not None else (ranks_text(root.ranks) or "the run")
    gpu = root.facts.get("gpu")
    if gpu is not None:
        who += f" (GPU {gpu})"
    when = [f"step {o.step}"] if o.step is not None else []
    if t_fail is not None:
        when.append(("~" if estimated else "") + fmt_time(t_fail))
    if a.first_failure is not None:
        lead = "failed first" if o.rank is not None else "failed"
    else:
        lead = "shows no failure; its top problem"
    out = f"{who[0].upper() + who[1:]} {lead}: {root.playbook.title} ({root.id})"
    out += (" at " + ", ".join(when) if when else "") + f", {where(o)}. {root.summary.rstrip('.')}."
    if root.causes:
        c = root.causes[0]
        out += f" Most likely cause: {c.cause.title.rstrip('.')} ({c.likelihood:.0%} of the ranked causes; finding confidence {root.confidence:.2f})."
    later = _explained(root, a)
    if later:
        out += " It explains " + "; ".join(f.id + (f" on {ranks_text(f.ranks)}" if f.ranks else "") for f in later) + "."
    others = [f for f in a.findings if f.root_cause and f is not root and f.severity > Severity.INFO]
    if others:
        out += f" {len(others)} other root finding(s) below."
    return out


def gpu_count(ctx: Context) -> tuple[int | None, str]:
    """How many GPUs the run used, and how we know."""
    g = ctx.table("gpu")
    if g.height:
        n = g.filter(pl.col("gpu").is_not_null() & pl.col("mig_device").is_null()).get_column("gpu").n_unique()
        if n:
            return n, "GPUs in the nvidia-smi samples"
    ws = [v.get("world_size") for v in ctx.meta.values() if isinstance(v, dict) and v.get("world_size")]
    if ws:
        return int(max(ws)), "world size in the profiler trace"
    ranks: set[int] = set()
    if ctx.has("metrics"):
        ranks |= {r for r in rank_extents(ctx).get_column("rank").to_list() if r is not None}
    ev = ctx.table("events")
    if ev.height:
        ranks |= {r for r in ev.get_column("rank").unique().to_list() if r is not None}
    if len(ranks) > 1:
        return max(ranks) + 1, f"ranks {min(ranks)}-{max(ranks)} in the logs, one GPU per rank assumed"
    return None, "no GPU count in the logs (no nvidia-smi samples, trace world size or ranks)"


def impact(a: Analysis, ctx: Context, saves: pl.DataFrame) -> tuple[list[Fact], dt.datetime | None, bool]:
    """The impact facts, the time of the first failure and whether that time is estimated."""
    ff = a.first_failure
    start, end = run_span(ctx)
    facts: list[Fact] = []
    if ff is None:
        facts.append(Fact("First failure", "none", "no root finding of high or critical severity"))
        if start and end:
            facts.append(Fact("Logged span", fmt_dur((end - start).total_seconds()), f"{fmt_time(start)} to {fmt_time(end)}"))
        good = saves.filter(~pl.col("failed"))
        facts.append(Fact("Last checkpoint", _save_text(last(good)) if good.height else "none found",
                          f"{good.height} checkpoint save line(s) in the logs"))
        return facts, None, False
    t_fail, estimated = ff.time, False
    if t_fail is None:
        t_fail, estimated = time_near(ctx, ff.file, ff.line), True
    note = (f"{where(ff)} has no time of its own: time of the last time-stamped line before it" if estimated and t_fail
            else "" if t_fail else "no time stamp at or before the failing line")
    facts.append(Fact("First failure", ("~" if estimated and t_fail else "") + fmt_time(t_fail),
                      f"rank {ff.rank if ff.rank is not None else '?'}, step {ff.step if ff.step is not None else '?'}, {where(ff)}"
                      + (f"; {note}" if note else "")))
    last_ok = _last_healthy(ctx, ff, t_fail)
    facts.append(Fact("Last healthy step", str(last_ok) if last_ok is not None else "unknown",
                      "the last step logged before the failure" if last_ok is not None else "no step numbers in the logs"))
    before = saves.filter(~pl.col("failed") & pl.col("step").is_not_null() & (True if last_ok is None else pl.col("step") <= last_ok))
    failed = saves.filter(pl.col("failed"))
    ckpt = last(before.sort("step", "file", "line"))
    t_ckpt = time_near(ctx, ckpt.file, ckpt.line) if ckpt else None
    if ckpt:
        facts.append(Fact("Last checkpoint before it", _save_text(ckpt), f"{ckpt.file}:{ckpt.line}: {ckpt.text}"))
    else:
        why = "no checkpoint save line in the text logs" if saves.height == 0 else "no completed save at or before the last healthy step"
        if failed.height:
            gone = last(failed)
            why += f" ({failed.height} save(s) failed: {gone.file}:{gone.line})"
        facts.append(Fact("Last checkpoint before it", "none found", why))
    if last_ok is not None:
        base = ckpt.step if ckpt and ckpt.step is not None else 0
        facts.append(Fact("Steps lost", str(max(last_ok - base, 0)),
                          f"steps {base + 1}-{last_ok}, done since " + (f"the checkpoint of step {base}" if ckpt else "the start (no checkpoint to resume from)")))
    else:
        facts.append(Fact("Steps lost", "unknown", "no step numbers in the logs"))
    since = t_ckpt if ckpt else start
    if t_fail and since:
        facts.append(Fact("Training time lost", fmt_dur(max((t_fail - since).total_seconds(), 0.0)),
                          "from " + ("the checkpoint" if ckpt else "the first logged line") + f" ({fmt_time(since)}) to the failure"))
    else:
        facts.append(Fact("Training time lost", "unknown", "the logs carry no time stamps" if not since else "no time for the failure"))
    if t_fail and end and end > t_fail:
        facts.append(Fact("Time from failure to end of logs", fmt_dur((end - t_fail).total_seconds()), f"last time stamp {fmt_time(end)}"))
    wait = _timeout_wait(ctx, t_fail)
    facts.append(Fact("Waiting in timeouts", fmt_dur(wait[0]) if wait else "none seen",
                      wait[1] if wait else "no timeout event after the failure"))
    n, how = gpu_count(ctx)
    if n is not None and since and end:
        hours = n * max((end - since).total_seconds(), 0.0) / 3600
        facts.append(Fact("GPU-hours lost", f"{hours:.2f}", f"{n} GPUs ({how}) x {fmt_duration_between(since, end)} from "
                          + ("the checkpoint" if ckpt else "the first logged line") + " to the end of the logs"))
    else:
        facts.append(Fact("GPU-hours lost", "unknown", how if n is None else "the logs carry no time stamps"))
    return facts, t_fail, estimated


def fmt_duration_between(a: dt.datetime, b: dt.datetime) -> str:
    """The duration from a to b, formatted."""
    return fmt_dur((b - a).total_seconds())


def _save_text(s: Save) -> str:
    return f"step {s.step}" if s.step is not None else f"{s.file}:{s.line}"


def _last_healthy(ctx: Context, ff: Onset, t_fail: dt.datetime | None) -> int | None:
    """A metric onset (NaN loss at step N) means step N was not healthy; an event carries the last step logged."""

    def max_step(where: pl.Expr, all_before: bool) -> int | None:
        # A failure after every metrics row (the usual crash at the end) is answered by the extents already
        # computed; otherwise aggregated lazily (the rows before a late failure are most of a big metrics table).
        if all_before:
            got = rank_extents(ctx).get_column("step_hi").max()
        else:
            got = ctx.metric_lines().filter(where & pl.col("step").is_not_null()).select(pl.col("step").max()).collect().item()
        return int(got) if got is not None else None

    if ff.step is not None:
        if ff.file and ctx.has("metrics"):
            at = ctx.metric_lines().filter((pl.col("file") == ff.file) & (pl.col("line") == ff.line)).select("line").collect()
            if at.height:
                top = rank_extents(ctx).get_column("step_hi").max()
                return max_step(pl.col("step") < ff.step, top is not None and top < ff.step)
        return int(ff.step)
    if t_fail is not None and ctx.has("metrics"):
        e = rank_extents(ctx)
        # Rows without a time are outside `ts <= t_fail`: the shortcut holds only when every row has one.
        late = e.get_column("ts_max").max()
        return max_step(pl.col("ts") <= t_fail, e.get_column("ts_nulls").sum() == 0 and late is not None and late <= t_fail)
    return None


def _timeout_wait(ctx: Context, t_fail: dt.datetime | None) -> tuple[float, str] | None:
    ev = ctx.table("events")
    if t_fail is None or ev.height == 0:
        return None
    hits = ev.filter(pl.col("code").is_in(list(TIMEOUT_CODES)) & (pl.col("ts") > t_fail)).sort("ts")
    if hits.height == 0:
        return None
    r = hits.row(0, named=True)
    return (r["ts"] - t_fail).total_seconds(), f"until the first {r['code']} at {fmt_time(r['ts'])} ({r['file']}:{r['line']})"


def chain(a: Analysis) -> list[ChainNode]:
    """Root findings, each with the tree of findings it explains (each finding shown once)."""
    by_id = {f.id: f for f in a.findings}
    placed: set[str] = set()

    def node(f: Finding) -> ChainNode:
        placed.add(f.id)
        kids = [by_id[c] for c in f.explains if c in by_id and c not in placed]
        return ChainNode(f, [node(k) for k in kids if k.id not in placed])

    return [node(f) for f in a.findings if f.root_cause and f.id not in placed]


def lanes(ctx: Context, a: Analysis) -> list[Lane]:
    """Per-rank swim lanes: first and last metric line, first error, exit."""
    out: dict[int | None, Lane] = {}
    if ctx.has("metrics"):
        for r in _metric_ends(ctx).iter_rows(named=True):
            lane = out.setdefault(r["rank"], Lane(r["rank"]))
            lane.points.append(Point("first_metric", r["f_ts"], r["f_step"], r["f_file"], r["f_line"], "first metric line"))
            lane.points.append(Point("last_metric", r["l_ts"], r["l_step"], r["l_file"], r["l_line"], "last metric line"))
    ev = ctx.table("events")
    if ev.height:
        # Only the errors and the exits are marked: those are the rows whose time is looked up.
        ev = ev.filter(pl.col("severity").is_in(["error", "info"])
                       & ((pl.col("severity") == "error") | pl.col("code").is_in(list(EXIT_CODES))))
        ev = timed_events(ctx, ev).sort("ts_fill", "file", "line", nulls_last=True)
        errs = ev.filter(pl.col("severity") == "error").group_by("rank", maintain_order=True).first()
        for r in errs.iter_rows(named=True):
            lane = out.setdefault(r["rank"], Lane(r["rank"]))
            lane.points.append(Point("first_error", r["ts_fill"], r["step"], r["file"], r["line"], f"first error: {r['code']}"))
        ex = ev.filter(pl.col("code").is_in(list(EXIT_CODES))).group_by("rank", maintain_order=True).last()
        for r in ex.iter_rows(named=True):
            lane = out.setdefault(r["rank"], Lane(r["rank"]))
            lane.points.append(Point("exit", r["ts_fill"], r["step"], r["file"], r["line"], f"exit: {r['code']}"))
    ff = a.first_failure
    if ff is not None and ff.rank in out:
        out[ff.rank].first_failure = True
        out[ff.rank].points.append(Point("first_failure", ff.time or time_near(ctx, ff.file, ff.line), ff.step, ff.file, ff.line,
                                         "first failure"))
    return [out[k] for k in sorted(out, key=lambda r: (r is None, r if r is not None else 0))]


def _metric_ends(ctx: Context) -> pl.DataFrame:
    """Per rank, the first and last metrics row by time (by step when the logs carry no time): f_/l_ ts, step, file, line."""
    cols = ("ts", "step", "file", "line")
    e = rank_extents(ctx)
    if e.get_column("ts_min").is_not_null().any():
        ends = e.group_by("rank").agg(pl.col("ts_min").min().alias("_a"), pl.col("ts_max").max().alias("_b"))
        # The rows at those times, read by a filter on a handful of values; a tie goes to the earliest line.
        rows = rows_at_times(ctx, ends.get_column("_a").drop_nulls().to_list() + ends.get_column("_b").drop_nulls().to_list())
        rows = rows.join(ends, on="rank", nulls_equal=True).sort("file", "line")
        first = rows.filter(pl.col("ts") == pl.col("_a")).group_by("rank", maintain_order=True).first()
        last = rows.filter(pl.col("ts") == pl.col("_b")).group_by("rank", maintain_order=True).first()
        return (first.select("rank", *[pl.col(c).alias(f"f_{c}") for c in cols])
                .join(last.select("rank", *[pl.col(c).alias(f"l_{c}") for c in cols]), on="rank", how="left", nulls_equal=True))
    lf = ctx.metric_lines().filter(pl.col("step").is_not_null())
    return plain(lf.group_by("rank").agg(*[pl.col(c).get(pl.col("step").arg_min()).alias(f"f_{c}") for c in cols],
                                         *[pl.col(c).get(pl.col("step").arg_max()).alias(f"l_{c}") for c in cols]).collect())


def timed_events(ctx: Context, ev: pl.DataFrame) -> pl.DataFrame:
    """Events with `ts_fill`: their own time, else that of the nearest earlier time-stamped row (event or
    metric) of the same file, else of the nearest later one (a traceback's lines carry no time)."""
    todo = ev.filter(pl.col("ts").is_null()).select("file", "line").unique()
    if todo.height == 0:
        return ev.with_columns(pl.col("ts").alias("ts_fill"))
    stamped = (ctx.table("events").filter(pl.col("ts").is_not_null() & pl.col("file").is_in(todo.get_column("file").unique().to_list()))
               .select("file", "line", pl.col("line").alias("_el"), pl.col("ts").alias("_et")).sort("line"))
    near = todo.sort("line")
    near = pl.concat([near.join_asof(stamped, on="line", by="file", strategy=s, check_sortedness=False)
                      .rename({"_el": f"e_{s}_line", "_et": f"e_{s}"}).drop("file", "line") for s in ("backward", "forward")]
                     + [near], how="horizontal")
    m = around(ctx, "ts", todo) if ctx.has("metrics") else todo.with_columns(
        *[pl.lit(None).alias(c) for c in ("back_line", "back", "fwd_line", "fwd")])
    near = near.join(m, on=["file", "line"], how="left")
    # The nearer of the event and the metric stamp on each side (a tie: the metric looking back, the event ahead).
    back = pl.when(pl.col("back_line").is_not_null() & (pl.col("e_backward_line").is_null() | (pl.col("back_line") >= pl.col("e_backward_line"))))
    fwd = pl.when(pl.col("e_forward_line").is_not_null() & (pl.col("fwd_line").is_null() | (pl.col("e_forward_line") <= pl.col("fwd_line"))))
    near = near.select("file", "line", back.then(pl.col("back")).otherwise(pl.col("e_backward")).alias("_b"),
                       fwd.then(pl.col("e_forward")).otherwise(pl.col("fwd")).alias("_f"))
    return (ev.join(near, on=["file", "line"], how="left", maintain_order="left")
            .with_columns(pl.coalesce("ts", "_b", "_f").alias("ts_fill")).drop("_b", "_f"))


def unchecked_files(ctx: Context) -> list[dict]:
    """Files not fully parsed, with why (the files table)."""
    f = ctx.table("files")
    if f.height == 0:
        return []
    bad = f.filter((pl.col("status") != "parsed") | pl.col("error").is_not_null())
    return bad.select("file", "kind", "status", "error").to_dicts()


def environment(ctx: Context) -> list[Fact]:
    """Software and hardware facts found in the logs, traces and samples."""
    out: dict[tuple[str, str], Fact] = {}
    for key, value in ctx.meta.items():
        if isinstance(value, dict):
            if key.startswith("trace:"):
                prof = value.get("profiler") or {}
                for k in ("cuda_runtime_version", "cuda_driver_version", "cupti_version"):
                    if prof.get(k) is not None:
                        out[(k, str(prof[k]))] = Fact(k.replace("_", " "), str(prof[k]), key.removeprefix("trace:"))
            continue
        if not isinstance(value, list) and value is not None:
            out[(key, str(value))] = Fact(key.replace("_", " "), str(value), "run metadata")
    g = ctx.table("gpu")
    if g.height:
        for name in sorted(x for x in g.get_column("name").unique().to_list() if x):
            out[("gpu", name)] = Fact("GPU model", name, "nvidia-smi samples")
    ev = ctx.table("events")
    if ev.height:
        cand = ev.filter(pl.col("fields").is_not_null() & pl.col("fields").str.contains("(?i)version|driver|cuda")).head(200)
        for r in cand.select("file", "line", "fields").iter_rows(named=True):
            try:
                fields = orjson.loads(r["fields"])
            except orjson.JSONDecodeError:
                continue
            for k, v in sorted(fields.items()):
                if any(w in k.lower() for w in ENV_KEYS) and v:
                    out.setdefault((k, str(v)), Fact(k.replace("_", " "), str(v)[:120], f"{r['file']}:{r['line']}"))
    return sorted(out.values(), key=lambda f: (f.label, f.value))[:40]


def checkpoint_saves(ctx: Context) -> pl.DataFrame:
    """The run's checkpoint save lines (the columns of `Save`); one that names no step takes the step of the last
    metric line before it."""
    saves = save_rows(ctx.table("events"))
    need = saves.filter(pl.col("step").is_null()).get_column("file").unique().to_list()
    if not need or not ctx.has("metrics"):
        return saves
    # One aggregation over the metrics for every save line (a long run saves thousands of times).
    want = saves.filter(pl.col("file").is_in(need)).select("file", pl.col("line") - 1)
    back = around(ctx, "step", want).select("file", pl.col("line").alias("_prev"), pl.col("back").cast(pl.Int64))
    return (saves.with_columns((pl.col("line") - 1).alias("_prev")).join(back, on=["file", "_prev"], how="left", maintain_order="left")
            .with_columns(pl.coalesce("step", "back").alias("step")).drop("_prev", "back"))

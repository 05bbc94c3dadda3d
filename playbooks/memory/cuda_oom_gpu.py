"""cuda-oom, foreign-process cause from nvidia-smi: another PID holds memory on the GPU that ran out."""

from __future__ import annotations

import datetime as dt

import polars as pl
from forensics.playbooks import gpu_samples as S
from forensics.playbooks.fields import field, fmt_mib, size_mib
from forensics.playbooks.memory.cuda_oom import OOM_CODES, PLAYBOOK

from forensics.contracts.context import Context, evidence_rows, onset_of
from forensics.contracts.model import Detection


def _oom_targets(ctx: Context, ev: pl.DataFrame, n_gpus: int) -> list[dict]:
    """For each OOM: the GPUs it may be on (the message's index, and the rank's local GPU), its time and sizes."""
    ev = ev.with_columns(field("gpu").cast(pl.Int32, strict=False).alias("_gpu"), size_mib(field("capacity")).alias("_cap"),
                         size_mib(field("this_process")).alias("_own"), size_mib(field("requested")).alias("_req"))
    out = []
    for row in ev.iter_rows(named=True):
        gpus = []
        if row["_gpu"] is not None:
            gpus.append(int(row["_gpu"]))
        # The message counts devices after CUDA_VISIBLE_DEVICES: one GPU per rank shows as GPU 0.
        if row.get("rank") is not None and n_gpus:
            gpus.append(int(row["rank"]) % n_gpus)
        t = row.get("ts") or S.time_of(ctx, row["file"], int(row["line"]))
        out.append({"row": row, "gpus": list(dict.fromkeys(gpus)), "ts": t, "cap": row["_cap"], "own": row["_own"], "req": row["_req"]})
    return out


def _at_failure(p: pl.DataFrame, gpu: int, t: dt.datetime | None, lookback_s: float) -> pl.DataFrame:
    """The last process sample of one GPU before the failure (all of its processes in that sample)."""
    on = p.filter(pl.col("gpu") == gpu)
    if t is not None and on.get_column("ts").null_count() == 0:
        on = on.filter(pl.col("ts").is_between(t - dt.timedelta(seconds=lookback_s), t))
    if on.height == 0:
        return on
    last = on.sort(["ts", "seq", "line"], nulls_last=False).tail(1).row(0, named=True)
    return on.filter((pl.col("file") == last["file"]) & (pl.col("source") == last["source"]) & (pl.col("seq") == last["seq"]))


@PLAYBOOK.detector(("gpu_procs",))
def detect_foreign_process(ctx: Context, th: dict) -> Detection | None:
    """Processes other than the job's on the GPU that ran out of memory, shortly before it did."""
    ev = ctx.events_of(*OOM_CODES).filter(pl.col("severity") != "advice")
    if ev.height == 0:
        return None
    p = S.procs_with_gpu(ctx).filter(pl.col("gpu").is_not_null() & pl.col("used_memory_mib").is_not_null())
    if p.height == 0:
        return None
    g = ctx.table("gpu")
    n_gpus = int(g.get_column("gpu").drop_nulls().n_unique()) if g.height else int(p.get_column("gpu").n_unique())
    totals = g.filter(pl.col("memory_total_mib").is_not_null()).group_by("gpu").agg(pl.col("memory_total_mib").max()) if g.height else None
    counts = p.group_by(["gpu", "pid"]).len()
    for target in _oom_targets(ctx, ev, n_gpus):
        for gpu in target["gpus"]:
            snap = _at_failure(p, gpu, target["ts"], th["proc_lookback_s"])
            if snap.height < 2:
                continue
            cap = target["cap"]
            if cap is None and totals is not None:
                hit = totals.filter(pl.col("gpu") == gpu)
                cap = float(hit.item(0, "memory_total_mib")) if hit.height else None
            if not cap:
                continue
            # The job's own process: the one whose memory matches the OOM's `this process has X`, else
            # the one seen most often on this GPU (it was there all along).
            if target["own"] is not None:
                own = snap.with_columns((pl.col("used_memory_mib") - target["own"]).abs().alias("_d")).sort("_d").item(0, "pid")
            else:
                seen = counts.filter(pl.col("gpu") == gpu).sort("len", descending=True)
                own = seen.item(0, "pid")
            foreign = snap.filter((pl.col("pid") != own) & (pl.col("used_memory_mib") >= th["foreign_share"] * cap))
            if foreign.height == 0:
                continue
            held = float(foreign.get_column("used_memory_mib").sum())
            who = ", ".join(f"PID {r['pid']} {r.get('process') or ''} {fmt_mib(r['used_memory_mib'])}".replace("  ", " ")
                            for r in foreign.iter_rows(named=True))
            row = target["row"]
            rank = f" rank {row['rank']}" if row.get("rank") is not None else ""
            first_seen = p.filter((pl.col("gpu") == gpu) & pl.col("pid").is_in(foreign.get_column("pid").implode())).sort("line").head(1)
            ev_rows = evidence_rows(ev.filter((pl.col("file") == row["file"]) & (pl.col("line") == row["line"])))
            proof = S.proc_evidence(pl.concat([first_seen, foreign]).unique(["file", "line"], maintain_order=True), 4)
            return Detection(
                summary=f"Another process held {fmt_mib(held)} on GPU {gpu} ({held / cap:.0%} of {fmt_mib(cap)}) when{rank} ran out of memory: {who}",
                onset=onset_of(ev),
                evidence=ev_rows + proof,
                evidence_count=len(ev_rows) + foreign.height,
                causes={"foreign_process": 1.0},
                cause_evidence={"foreign_process": proof},
                # Without the other process the allocation would have fit: demand is not the cause.
                discount={"demand_above_capacity": 0.25} if target.get("req") is None or held >= target["req"] else {},
                confidence=0.9,
                facts={"foreign_gpu": gpu, "foreign_pids": foreign.get_column("pid").to_list(), "foreign_mib_nvsmi": held},
            )
    return None

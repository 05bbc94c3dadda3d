"""cuda-context-corruption from nvidia-smi: the compute mode flipping, several processes on one GPU."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import gpu_samples as S
from forensics.playbooks.device.cuda_context_corruption import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# Graphics (G) and MPS (M, M+C) entries legitimately share a GPU with the job.
SHARED_TYPES_EXCLUDED = ["G", "M", "M+C"]


def _mode_flips(ctx: Context) -> list[tuple[str, pl.DataFrame]]:
    out = []
    g = S.physical(ctx)
    if g.height == 0:
        return out
    for (_file, _source, gpu), part in S.streams(g.filter(pl.col("compute_mode").is_not_null())):
        changed = part.filter(pl.col("compute_mode") != pl.col("compute_mode").shift(1))
        if changed.height:
            seq = " -> ".join([part.get_column("compute_mode")[0], *changed.get_column("compute_mode").to_list()])
            out.append((f"GPU {gpu} compute mode {seq} ({', '.join(f'{t:%H:%M:%S}' for t in changed.get_column('ts').drop_nulls().to_list()[:4])})"
                        if changed.get_column("ts").null_count() == 0 else f"GPU {gpu} compute mode {seq}", changed))
    return out


def _shared(ctx: Context, th: dict) -> list[tuple[str, pl.DataFrame]]:
    out = []
    p = S.procs_with_gpu(ctx)
    if p.height == 0:
        return out
    p = p.filter(pl.col("gpu").is_not_null() & ~pl.col("type").fill_null("C").is_in(SHARED_TYPES_EXCLUDED))
    per = p.group_by(["file", "source", "seq", "gpu"]).agg(pl.col("pid").n_unique().alias("n"))
    many = per.filter(pl.col("n") >= 2)
    for (file, source, gpu), part in many.group_by(["file", "source", "gpu"], maintain_order=True):
        if part.height < th["min_shared_samples"]:
            continue
        rows = p.filter((pl.col("file") == file) & (pl.col("source") == source) & (pl.col("gpu") == gpu)
                        & pl.col("seq").is_in(part.get_column("seq").implode())).sort("line")
        pids = sorted(set(rows.get_column("pid").to_list()))
        first = rows.filter(pl.col("seq") == rows.get_column("seq").min())
        out.append((f"GPU {gpu} ran {int(part.get_column('n').max())} processes at once (PIDs {', '.join(map(str, pids[:6]))}) "
                    f"in {part.height} samples{S.when(first.row(0, named=True))}", first))
    return out


@PLAYBOOK.detector(("gpu", "gpu_procs"))
def detect_gpu_samples(ctx: Context, th: dict) -> Detection | None:
    """Compute-mode changes and GPUs shared by several compute processes."""
    shared = _shared(ctx, th)
    flips = _mode_flips(ctx)
    if not shared and not flips:
        return None
    found = shared + flips
    firsts = [rows.sort("line").row(0, named=True) for _w, rows in found]
    timed = [r for r in firsts if r.get("ts") is not None]
    first = min(timed, key=lambda r: r["ts"]) if timed else firsts[0]
    ev = []
    for _w, rows in shared:
        ev += S.proc_evidence(rows, 4)
    for _w, rows in flips:
        ev += S.evidence(rows, 3)
    return Detection(
        summary="GPU shared or reconfigured under the job: " + "; ".join(w for w, _r in found),
        onset=S.onset(first),
        evidence=ev[:8],
        evidence_count=sum(r.height for _w, r in found),
        causes={"shared_gpu": 1.0},
        confidence=0.8 if shared and flips else 0.7,
        # Sharing alone (no mode change, no context error) makes a GPU crowded, not yet corrupt.
        severity=None if flips else Severity.MEDIUM,
        facts={"symptoms": [w for w, _r in found]},
    )

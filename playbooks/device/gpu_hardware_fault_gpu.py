"""gpu-hardware-fault from nvidia-smi samples: uncorrectable ECC, pending retired pages / row remaps,
a GPU reported lost or `ERR!`, a GPU missing from later samples."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import gpu_samples as S
from forensics.playbooks.device.gpu_hardware_fault import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection


def _counter_faults(g: pl.DataFrame) -> list[tuple[str, str, pl.DataFrame]]:
    """(cause, what, first rows) for ECC / retirement / remap counters, per stream."""
    out = []
    for (_file, _source, gpu), part in S.streams(g):
        vol = part.filter(pl.col("ecc_uncorrected_volatile").fill_null(0) > 0)
        if vol.height:
            vals = part.get_column("ecc_uncorrected_volatile").drop_nulls()
            out.append(("failing_gpu", f"GPU {gpu}: uncorrectable ECC errors (volatile) {int(vals.min())} -> {int(vals.max())}", vol))
        for col, label in (("ecc_uncorrected_aggregate", "uncorrectable ECC errors (aggregate)"),
                           ("remapped_rows_uncorrectable", "rows remapped for uncorrectable errors"),
                           ("retired_pages_dbe", "pages retired for double-bit errors")):
            vals = part.select(pl.col(col)).to_series().drop_nulls()
            # Lifetime counters: only a rise during the run is news.
            if vals.len() >= 2 and vals.max() > vals[0]:
                rise = part.filter(pl.col(col) > vals[0])
                out.append(("failing_gpu", f"GPU {gpu}: {label} {int(vals[0])} -> {int(vals.max())}", rise))
        for col, label in (("retired_pages_pending", "a page pending retirement"), ("remapped_rows_pending", "a row remap pending (reset needed)")):
            pend = part.filter(pl.col(col).fill_null(False))
            if pend.height:
                out.append(("failing_gpu", f"GPU {gpu}: {label}", pend))
    return out


def _lost(ctx: Context, th: dict) -> list[tuple[str, str, pl.DataFrame]]:
    """GPUs the tool reported as lost / ERR!, and GPUs missing from later samples while others go on."""
    out = []
    g = ctx.table("gpu")
    if g.height == 0:
        return out
    faults = g.filter(pl.col("fault").is_not_null()).sort(["file", "line"])
    for (gpu, bus, what), part in faults.group_by(["gpu", "bus_id", "fault"], maintain_order=True):
        name = f"GPU {gpu}" if gpu is not None else f"GPU {bus}"
        out.append(("bus_or_power", f"{name}: nvidia-smi reports '{what}' ({part.height} time(s))", part))
    ok = g.filter(pl.col("fault").is_null() & pl.col("mig_device").is_null() & pl.col("gpu").is_not_null())
    # Only monitoring printouts list every GPU each time; tables pasted into a log may come from
    # containers that see different GPUs.
    files = ctx.table("files")
    in_logs = files.filter(pl.col("kind") == "text_log").get_column("file").to_list() if files.height else []
    ok = ok.filter(~((pl.col("source") == "nvsmi_table") & pl.col("file").is_in(in_logs)))
    for (file, source), part in ok.group_by(["file", "source"], maintain_order=True):
        last = int(part.get_column("seq").max())
        per = part.group_by("gpu").agg(pl.col("seq").max().alias("last"), pl.len().alias("n"))
        for gpu, glast, n in per.iter_rows():
            after = part.filter(pl.col("seq") > glast).get_column("seq").n_unique()
            if n >= th["min_present"] and glast < last and after >= th["min_missing"]:
                first_missing = part.filter(pl.col("seq") > glast).sort("line").head(1)
                seen = part.filter((pl.col("gpu") == gpu) & (pl.col("seq") == glast)).head(1)
                out.append(("bus_or_power", f"GPU {gpu} missing from {source} ({file}) after its sample{S.when(seen.row(0, named=True))} "
                                            f"while the other GPUs kept reporting ({after} more samples)", pl.concat([seen, first_missing])))
    return out


@PLAYBOOK.detector(("gpu",))
def detect_gpu_samples(ctx: Context, th: dict) -> Detection | None:
    """Hardware symptoms in the GPU samples."""
    g = S.physical(ctx)
    found = _counter_faults(g) if g.height else []
    found += _lost(ctx, th)
    if not found:
        return None
    found.sort(key=lambda f: (f[2].get_column("ts").min() is None, f[2].get_column("ts").min() or 0, f[2].get_column("line").min()))
    causes: dict[str, float] = {}
    for cause, _what, _rows in found:
        causes[cause] = 0.9
    first = found[0][2].sort("line").row(0, named=True)
    rows = pl.concat([f[2].sort("line").head(2) for f in found], how="diagonal_relaxed")
    whats = list(dict.fromkeys(w for _c, w, _r in found))
    summary = "GPU hardware fault in nvidia-smi samples: " + "; ".join(whats[:4]) + (f" (+{len(whats) - 4} more)" if len(whats) > 4 else "")
    return Detection(
        summary=summary,
        onset=S.onset(first),
        evidence=S.evidence(rows),
        evidence_count=sum(f[2].height for f in found),
        causes=causes,
        confidence=0.9,
        facts={"symptoms": whats},
    )

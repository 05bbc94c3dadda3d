"""dataloader-bottleneck from profiler traces: DataLoader `__next__` share of each ProfilerStep, and GPU idle meanwhile."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import trace_spans as S
from forensics.playbooks.performance.dataloader_bottleneck import PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection

# `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` (num_workers=0) or
# `..._MultiProcessingDataLoaderIter.__next__` (workers); older profilers name it the same way.
LOADER = r"DataLoader.*__next__"


def loader_shares(sp: pl.DataFrame) -> pl.DataFrame:
    """Per trace and step: step time, loader time, loader share, GPU busy time during loading."""
    st = S.steps(sp)
    loader = sp.filter(pl.col("name").str.contains(LOADER) & pl.col("step").is_not_null())
    if st.height == 0 or loader.height == 0:
        return pl.DataFrame()
    per = S.union_us(loader, ["file", "step"]).rename({"union_us": "loader_us"})
    gpu = sp.filter(pl.col("kind").is_in(S.GPU_ACTIVITY))
    if gpu.height:
        ov = S.overlap_us(loader, gpu, ["file", "step"]).rename({"overlap_us": "gpu_busy_us"})
        per = per.join(ov, on=["file", "step"], how="left").with_columns(pl.col("gpu_busy_us").fill_null(0.0))
    else:
        per = per.with_columns(pl.lit(None, dtype=pl.Float64).alias("gpu_busy_us"))
    out = st.join(per, on=["file", "step"], how="inner").with_columns((pl.col("loader_us") / pl.col("step_us")).alias("share"))
    return out.sort("file", "step")


@PLAYBOOK.detector(("spans",))
def detect_trace(ctx: Context, th: dict) -> list[Detection]:
    """Median over the profiled steps of the DataLoader share of step time, per trace."""
    sp = S.spans(ctx)
    if sp.height == 0:
        return []
    shares = loader_shares(sp)
    if shares.height == 0:
        return []
    out = []
    for (file,), part in shares.group_by(["file"], maintain_order=True):
        if part.height < th["min_steps"]:
            continue
        med = float(part["share"].median())
        if med <= th["data_share"]:
            continue
        loader = sp.filter((pl.col("file") == file) & pl.col("name").str.contains(LOADER))
        names = loader["name"].unique().to_list()
        single = any("_SingleProcessDataLoaderIter" in n for n in names)
        has_gpu = part["gpu_busy_us"].is_not_null().any()
        idle = None
        if has_gpu:
            idle = 1.0 - float(part["gpu_busy_us"].sum()) / max(float(part["loader_us"].sum()), 1e-9)
        pageable = sp.filter((pl.col("file") == file) & pl.col("name").str.contains(r"Memcpy HtoD \(Pageable")).height
        causes = {"too_few_workers": 0.9 if single else 0.4, "heavy_transforms": 0.6, "no_prefetch": 0.5 if pageable else 0.15}
        worst = part.sort("share", descending=True)
        w = worst.row(0, named=True)
        quoted = loader.join(worst.select("step", "share", "step_us").head(4), on="step", how="inner").sort("share", descending=True)
        text = pl.format("{} took {} µs of ProfilerStep#{} ({} µs): {}% of the step", pl.col("name"), pl.col("dur_us").round(0),
                         pl.col("step"), pl.col("step_us").round(0), (pl.col("share") * 100).round(1))
        rank = part["rank"][0]
        where = f"rank {rank} " if rank is not None else ""
        gpu_txt = f"; the GPU idles {idle:.0%} of the loading time" if idle is not None else ""
        mode = "num_workers=0 (_SingleProcessDataLoaderIter)" if single else "worker processes"
        summary = (f"{where}waits for the DataLoader a median {med:.0%} of each step ({part.height} profiled steps, "
                   f"worst step {w['step']}: {w['share']:.0%} = {S.ms(w['loader_us'])} of {S.ms(w['step_us'])}; "
                   f"threshold {th['data_share']:.0%}){gpu_txt}; loader: {mode}")
        first = quoted.sort("ts_us").row(0, named=True)
        out.append(Detection(
            summary=summary, onset=S.step_onset(sp, file, first["step"]) or S.onset(first), evidence=S.quote(quoted.head(6), text), evidence_count=loader.height,
            causes=causes, confidence=0.9 if part.height >= 5 else 0.75,
            facts={"median_share": round(med, 3), "steps": part.height, "single_process_loader": single,
                   "gpu_idle_during_loading": None if idle is None else round(idle, 3),
                   "per_step_share": {int(s): round(float(x), 3) for s, x in zip(part["step"], part["share"], strict=True)}},
            ranks=[rank] if rank is not None else [],
        ))
    return out

"""Shared reading of nvidia-smi / DCGM samples for the GPU playbooks: streams, training window, quotes.

A *stream* is the samples of one GPU from one printout (`file`, `source`, `gpu`): trends and
shares are judged per stream, because two printouts of the same GPU sample at different rates
and one of them may have no time of its own (`seq` orders it then).
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from forensics.contracts.context import Context, plain
from forensics.contracts.model import Evidence, Onset

STREAM = ["file", "source", "gpu"]


def physical(ctx: Context) -> pl.DataFrame:
    """Samples of whole GPUs (MIG devices and the tool's failure lines excluded), in stream order."""
    g = ctx.table("gpu")
    if g.height == 0:
        return g
    g = g.filter(pl.col("mig_device").is_null() & pl.col("fault").is_null() & pl.col("gpu").is_not_null())
    return g.sort([*STREAM, "seq", "line"])


def training_window(ctx: Context) -> tuple[dt.datetime, dt.datetime] | None:
    """First and last logged training step (time-stamped step metrics), or None when the logs do not say."""
    if not ctx.has("metrics"):
        return None
    steps = ctx.metrics_select("ts", where=pl.col("step").is_not_null() & pl.col("ts").is_not_null() & (pl.col("name") != "eval_loss"))
    if steps.height < 2:
        return None
    lo, hi = steps.get_column("ts").min(), steps.get_column("ts").max()
    return (lo, hi) if lo is not None and hi is not None and lo < hi else None


def in_window(df: pl.DataFrame, window: tuple[dt.datetime, dt.datetime] | None, trim_share: float,
              active: pl.Expr | None = None) -> pl.DataFrame:
    """The samples of one stream taken during training.

    With a training window and time stamps, the samples inside it. Otherwise the span from the
    first to the last `active` sample (the GPU working), less `trim_share` of it at each end:
    start-up and shutdown are not judged.
    """
    if df.height == 0:
        return df
    if window is not None and df.get_column("ts").null_count() == 0:
        inside = df.filter(pl.col("ts").is_between(window[0], window[1]))
        if inside.height:
            return inside
    if active is not None:
        idx = df.with_row_index("_i").filter(active).get_column("_i")
        if idx.len() == 0:
            return df.clear()
        df = df.slice(int(idx[0]), int(idx[-1]) - int(idx[0]) + 1)
    cut = int(df.height * trim_share)
    return df.slice(cut, max(df.height - 2 * cut, 0))


def streams(df: pl.DataFrame) -> list[tuple[tuple, pl.DataFrame]]:
    """(file, source, gpu) and its samples; streams whose samples carry a time come first, then file order."""
    if df.height == 0:
        return []
    parts = [(k, part) for k, part in df.group_by(STREAM, maintain_order=True)]
    return sorted(parts, key=lambda kv: (kv[1].get_column("ts").null_count() > 0, str(kv[0][0]), str(kv[0][1]), kv[0][2]))


def x_axis(df: pl.DataFrame) -> pl.Series:
    """Seconds since the first sample when every sample has a time, else the sample number."""
    if df.get_column("ts").null_count() == 0:
        first = df.get_column("ts").min()
        return ((df.get_column("ts") - first).dt.total_microseconds() / 1e6).alias("x")
    return df.get_column("seq").cast(pl.Float64).alias("x")


def gpu_ids(df: pl.DataFrame) -> str:
    """'GPU 2' / 'GPUs 0-3' / 'GPUs 0, 2' for the GPUs of some rows."""
    ids = sorted({int(g) for g in df.get_column("gpu").drop_nulls().to_list()})
    if len(ids) == 1:
        return f"GPU {ids[0]}"
    if ids and ids == list(range(ids[0], ids[-1] + 1)):
        return f"GPUs {ids[0]}-{ids[-1]}"
    return "GPUs " + ", ".join(map(str, ids))


def when(row: dict) -> str:
    """` at 11:47:10` from a sample's time (`` when it has none)."""
    ts = row.get("ts")
    return f" at {ts:%H:%M:%S}" if ts is not None else ""


def span(df: pl.DataFrame) -> str:
    """`11:47:10-11:51:40` (or `samples 12-80`) for some rows of one stream."""
    ts = df.get_column("ts").drop_nulls()
    if ts.len():
        return f"{ts.min():%H:%M:%S}-{ts.max():%H:%M:%S}"
    seq = df.get_column("seq")
    return f"samples {seq.min()}-{seq.max()}"


def describe(row: dict) -> str:
    """A sample as one line of evidence text (replaced by the real line where the file has one)."""
    parts = [f"GPU {row['gpu']}"]
    for col, fmt in (("utilization_gpu_pct", "{:.0f}% util"), ("memory_used_mib", "{:.0f} MiB used"), ("temperature_c", "{:.0f} C"),
                     ("power_w", "{:.0f} W"), ("sm_clock_mhz", "SM {:.0f} MHz"), ("compute_mode", "{}"),
                     ("throttle_reasons", "reasons [{}]"), ("ecc_uncorrected_volatile", "uncorrectable ECC {}"),
                     ("retired_pages_pending", "retired pages pending {}"), ("fault", "{}")):
        v = row.get(col)
        if v is not None and v != "":
            parts.append(fmt.format(v))
    return f"{row['source']}: " + ", ".join(parts)


def evidence(df: pl.DataFrame, limit: int = 8) -> list[Evidence]:
    """Samples as evidence rows; the engine quotes the real input line for line-based printouts."""
    out = []
    for row in df.head(limit).iter_rows(named=True):
        out.append(Evidence(file=row["file"], line=int(row["line"]), text=describe(row), ts=row.get("ts"), synthetic=True))
    return out


def proc_evidence(df: pl.DataFrame, limit: int = 8) -> list[Evidence]:
    """gpu_procs rows as evidence rows."""
    out = []
    for row in df.head(limit).iter_rows(named=True):
        mem = f", {row['used_memory_mib']:.0f} MiB" if row.get("used_memory_mib") is not None else ""
        text = f"{row['source']}: GPU {row.get('gpu')} PID {row['pid']} {row.get('process') or ''}{mem}"
        out.append(Evidence(file=row["file"], line=int(row["line"]), text=text, ts=row.get("ts"), synthetic=True))
    return out


def onset(row: dict) -> Onset:
    """The onset of a finding shown first by this sample."""
    return Onset(time=row.get("ts"), file=row["file"], line=int(row["line"]))


def procs_with_gpu(ctx: Context) -> pl.DataFrame:
    """gpu_procs with `gpu` filled from the run's gpu samples where a printout named the GPU only by uuid or bus id."""
    p = ctx.table("gpu_procs")
    if p.height == 0 or p.get_column("gpu").null_count() == 0:
        return p
    g = ctx.table("gpu").filter(pl.col("gpu").is_not_null() & pl.col("mig_device").is_null())
    for key in ("uuid", "bus_id"):
        ids = g.filter(pl.col(key).is_not_null()).group_by(key).agg(pl.col("gpu").first().alias("_g"))
        if ids.height:
            p = p.join(ids, on=key, how="left").with_columns(pl.coalesce("gpu", "_g").alias("gpu")).drop("_g")
    return p


def time_of(ctx: Context, file: str, line: int) -> dt.datetime | None:
    """The time of a log line: its own, else that of the nearest earlier time-stamped row of the same file."""
    best = None
    for name in ("events", "metrics"):
        near = (pl.col("file") == file) & (pl.col("line") <= line) & pl.col("ts").is_not_null()
        hit = ctx.table(name).filter(near) if name == "events" else plain(ctx.metric_lines().filter(near).collect())
        if hit.height:
            cand = hit.sort("line").get_column("ts")[-1]
            best = cand if best is None or cand > best else best
    return best

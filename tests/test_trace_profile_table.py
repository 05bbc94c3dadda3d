"""prof.key_averages().table() printouts in text logs become a profile summary in `counters`."""

from __future__ import annotations

import polars as pl

from forensics.ingest import ingest
from tests.conftest import SAMPLES
from tests.helpers import frame, ingest_text


def profile(run) -> pl.DataFrame:
    return frame(run, "counters").filter(pl.col("source") == "key_averages")


def test_real_cpu_table_from_a_recorded_log():
    # sample_logs/dataloader-bottleneck/profiler-trace/train.log: printed by torch 2.13 (record_traces.py).
    c = profile(ingest(SAMPLES / "dataloader-bottleneck" / "profiler-trace"))
    tanh = {r["name"]: r["value"] for r in c.filter(pl.col("series") == "aten::tanh").to_dicts()}
    assert tanh["self_cpu_us"] == 224034.0 and tanh["self_cpu_pct"] == 27.16 and tanh["cpu_avg_us"] == 1750.0
    assert tanh["cpu_mem_bytes"] == 37.5 * 1024**2 and tanh["calls"] == 128
    loader = c.filter(pl.col("series") == "enumerate(DataLoader)#_SingleProcessDataLoaderIter._...")
    got = {r["name"]: r["value"] for r in loader.to_dicts()}
    assert got["cpu_total_us"] == 706300.0 and got["self_cpu_mem_bytes"] == -115.5 * 1024**2
    total = c.filter(pl.col("name") == "self_cpu_total_us")
    assert total["value"].to_list() == [824873.0] and total["line"].to_list() == [31]
    assert set(c.filter(pl.col("name") == "calls")["line"]) == set(range(18, 30))


# Header and separators as printed with CUDA activity (pytorch/pytorch#60783); rows laid out as
# _build_table does (name right-aligned in 55, every other column right-aligned in 12, 2-space gaps).
SEP = "-" * 55 + "  " + ("-" * 12 + "  ") * 10
HEAD = ("                                                   Name    Self CPU %      Self CPU   CPU total %     CPU total  "
        "CPU time avg     Self CUDA   Self CUDA %    CUDA total  CUDA time avg    # of Calls  ")


def row(*cells: str) -> str:
    return f"{cells[0]:>55}  " + "".join(f"{c:>12}  " for c in cells[1:])


CUDA_TABLE = "\n".join([
    "step 10 loss 1.23", SEP, HEAD, SEP,
    row("aten::_softmax", "0.32%", "512.000us", "0.60%", "960.000us", "9.600us", "45.120ms", "73.10%", "45.120ms", "451.200us", "100"),
    row("aten::to", "0.41%", "656.000us", "1.20%", "1.920ms", "9.600us", "16.600ms", "26.90%", "16.600ms", "83.000us", "200"),
    SEP, "Self CPU time total: 160.000ms", "Self CUDA time total: 61.720ms", "",
])


def test_device_columns_and_totals(tmp_path):
    c = profile(ingest_text(tmp_path, CUDA_TABLE))
    soft = {r["name"]: r["value"] for r in c.filter(pl.col("series") == "aten::_softmax").to_dicts()}
    assert soft["self_device_us"] == 45120.0 and soft["self_device_pct"] == 73.10
    assert soft["device_total_us"] == 45120.0 and soft["device_avg_us"] == 451.2 and soft["calls"] == 100
    totals = {r["name"]: r["value"] for r in c.filter(pl.col("series").is_null()).to_dicts()}
    assert totals == {"self_cpu_total_us": 160000.0, "self_device_total_us": 61720.0}


def test_dash_lines_alone_are_not_a_table(tmp_path):
    text = "-------  -------  -------\nName  Self CPU  total\n-------  -------  -------\nnot a profile\n"
    assert profile(ingest_text(tmp_path, text)).height == 0

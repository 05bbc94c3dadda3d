"""Every real nvidia-smi recording of ../shared/corpus/nvidia_smi parses, field by field."""

from __future__ import annotations

import datetime as dt
import shutil

import polars as pl
import pytest

from forensics.ingest import ingest
from tests.helpers import frame

UTC = dt.timezone.utc
H100 = "h100_80gb_hbm3_driver590_capture_q_csv_dmon_pmon.txt"
H200 = "h200_driver590_capture_q_csv_dmon_pmon.txt"
NANOGPT = "nanogpt_pr643_8gpu_query_csv_noheader_nounits_timeseries.csv"
A100_XML = "a100_sxm4_80gb_x4_mig_q_x_v12.xml"
RTX_XML = "rtx_pro6000_blackwell_q_x_v13.xml"
LAST_TS = dt.datetime(2025, 9, 24, 3, 51, 11, 16000, tzinfo=UTC)


def _ingest(tmp_path, corpus, name):
    root = tmp_path / "run"
    root.mkdir()
    shutil.copy(corpus / "nvidia_smi" / name, root / name)
    run = ingest(root)
    files = frame(run, "files")
    assert files["status"].to_list() == ["parsed"], files.to_dicts()
    return run, frame(run, "gpu"), frame(run, "gpu_procs")


def _row(df: pl.DataFrame, **where) -> dict:
    rows = df.filter(**where).to_dicts()
    assert len(rows) == 1, (where, rows)
    return rows[0]


def test_every_corpus_file_is_parsed(tmp_path, corpus):
    root = tmp_path / "run"
    shutil.copytree(corpus / "nvidia_smi", root)
    files = frame(ingest(root), "files")
    assert dict(zip(files["file"], files["kind"], strict=True)) == {
        A100_XML: "nvsmi_xml", H100: "nvsmi_capture", H200: "nvsmi_capture",
        NANOGPT: "nvsmi_query_csv", RTX_XML: "nvsmi_xml",
    }
    assert set(files["status"]) == {"parsed"}


def test_capture_sections_samples_per_source(tmp_path, corpus):
    _run, gpu, procs = _ingest(tmp_path, corpus, H100)
    counts = dict(gpu.group_by("source").len().iter_rows())
    # idle + load: a table, a -q report and a query-gpu row each; dmon -c 5 twice.
    assert counts == {"nvsmi_table": 2, "nvsmi_q": 2, "query_gpu": 2, "dmon": 10}
    assert set(gpu["gpu"]) == {0}
    # seq runs over the whole file in section order.
    assert gpu.sort("line")["seq"].to_list() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 17, 18, 19, 20, 21]
    pcounts = dict(procs.group_by("source").len().iter_rows())
    # Three processes under load (2 memhog + gpu_burn); pmon's idle `-` rows are dropped.
    assert pcounts == {"nvsmi_table": 3, "nvsmi_q": 3, "query_compute_apps": 3, "pmon": 15}


def test_capture_query_gpu_row(tmp_path, corpus):
    _run, gpu, _ = _ingest(tmp_path, corpus, H100)
    idle = _row(gpu, source="query_gpu", line=1741)
    assert idle["ts"] == dt.datetime(2026, 7, 14, 8, 12, 38, 696000, tzinfo=UTC)
    assert idle["name"] == "NVIDIA H100 80GB HBM3"
    assert idle["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    assert idle["bus_id"] == "00000000:00:09.0"
    assert (idle["pstate"], idle["compute_mode"], idle["mig_mode"]) == ("P0", "Default", "Disabled")
    # clocks_event_reasons.active = 0x0000000000000001: GPU idle only.
    assert (idle["throttle_mask"], idle["throttle_reasons"]) == (1, "gpu_idle")
    assert (idle["memory_total_mib"], idle["memory_used_mib"], idle["memory_free_mib"]) == (81559.0, 0.0, 81081.0)
    assert (idle["temperature_c"], idle["memory_temperature_c"]) == (41.0, 48.0)
    assert (idle["power_w"], idle["power_limit_w"]) == (69.85, 700.0)
    assert (idle["sm_clock_mhz"], idle["sm_clock_max_mhz"], idle["mem_clock_mhz"]) == (345.0, 1980.0, 2619.0)
    assert (idle["pcie_link_gen"], idle["pcie_link_width"]) == (5, 16)
    assert (idle["ecc_uncorrected_volatile"], idle["ecc_corrected_aggregate"]) == (0, 0)
    # retired_pages.* are [N/A] on this GPU (row remapping instead): null, not zero.
    assert idle["retired_pages_sbe"] is None and idle["retired_pages_pending"] is None
    assert (idle["remapped_rows_uncorrectable"], idle["remapped_rows_pending"]) == (0, False)
    assert idle["fan_pct"] is None  # [N/A]
    load = _row(gpu, source="query_gpu", line=2105)
    assert (load["utilization_gpu_pct"], load["utilization_mem_pct"], load["memory_used_mib"]) == (100.0, 11.0, 19818.0)
    assert (load["power_w"], load["sm_clock_mhz"], load["throttle_mask"], load["throttle_reasons"]) == (631.95, 1980.0, 0, "")


def test_capture_q_text_and_table(tmp_path, corpus):
    _run, gpu, procs = _ingest(tmp_path, corpus, H100)
    q = _row(gpu, source="nvsmi_q", seq=9)
    assert q["line"] == 1833  # the `GPU 00000000:00:09.0` line of the load report
    assert q["ts"] == dt.datetime(2026, 7, 14, 8, 12, 53, tzinfo=UTC)
    # Average Power Draw wins over Instantaneous; GPU Memory Power Readings is not the board power.
    assert (q["power_w"], q["memory_temperature_c"], q["utilization_mem_pct"]) == (629.45, 55.0, 11.0)
    assert (q["pcie_rx_mb_per_s"], q["pcie_tx_mb_per_s"]) == (6.346, 3.092)
    assert (q["throttle_mask"], q["ecc_uncorrected_volatile"], q["remapped_rows_pending"]) == (0, 0, False)
    idle_q = _row(gpu, source="nvsmi_q", seq=1)
    assert (idle_q["throttle_reasons"], idle_q["sm_clock_mhz"], idle_q["memory_free_mib"]) == ("gpu_idle", 345.0, 81081.0)
    t = _row(gpu, source="nvsmi_table", seq=8)
    assert t["line"] == 1805
    assert t["ts"] == dt.datetime(2026, 7, 14, 8, 12, 53, tzinfo=UTC)
    assert (t["temperature_c"], t["power_w"], t["power_limit_w"]) == (59.0, 629.0, 700.0)
    assert (t["memory_used_mib"], t["memory_total_mib"], t["utilization_gpu_pct"]) == (19818.0, 81559.0, 100.0)
    assert (t["compute_mode"], t["mig_mode"], t["ecc_uncorrected_volatile"], t["fan_pct"]) == ("Default", "Disabled", 0, None)
    tp = procs.filter(source="nvsmi_table").sort("line")
    assert tp.select("line", "gpu", "pid", "type", "process", "used_memory_mib").rows() == [
        (1815, 0, 11327, "C", "/root/tools/memhog", 2566.0),
        (1816, 0, 11328, "C", "/root/tools/memhog", 1542.0),
        (1817, 0, 11345, "C", "./gpu_burn", 15690.0),
    ]
    qp = procs.filter(source="nvsmi_q").sort("line")
    assert qp.select("line", "pid", "process", "used_memory_mib", "uuid").rows()[2] == (
        2091, 11345, "./gpu_burn", 15690.0, "GPU-00000000-0000-0000-0000-000000000000")


def test_capture_compute_apps_dmon_pmon(tmp_path, corpus):
    _run, gpu, procs = _ingest(tmp_path, corpus, H100)
    apps = procs.filter(source="query_compute_apps").sort("line")
    assert apps["ts"].unique().to_list() == [dt.datetime(2026, 7, 14, 8, 12, 53, 500000, tzinfo=UTC)]
    assert apps.select("pid", "process", "used_memory_mib", "bus_id").rows() == [
        (11327, "/root/tools/memhog", 2566.0, "00000000:00:09.0"),
        (11328, "/root/tools/memhog", 1542.0, "00000000:00:09.0"),
        (11345, "./gpu_burn", 15690.0, "00000000:00:09.0"),
    ]
    # compute-apps names the GPU by uuid/bus id only.
    assert apps["gpu"].null_count() == 3
    d = gpu.filter(source="dmon").sort("line")
    first_load = _row(d, line=2163)
    assert (first_load["power_w"], first_load["temperature_c"], first_load["memory_temperature_c"]) == (631.0, 63.0, 57.0)
    assert (first_load["utilization_gpu_pct"], first_load["utilization_mem_pct"]) == (100.0, 10.0)
    assert (first_load["mem_clock_mhz"], first_load["sm_clock_mhz"]) == (2619.0, 1980.0)
    assert d["ts"].null_count() == 10  # dmon without -o T has no time of its own
    p = procs.filter(source="pmon")
    burn = p.filter(process="gpu_burn")
    assert burn.height == 5 and set(burn["sm_pct"]) == {99.0} and set(burn["mem_pct"]) == {10.0}
    # memhog rows print `-` for sm/mem: null.
    assert p.filter(process="memhog")["sm_pct"].null_count() == 10
    assert p.group_by("seq").len()["len"].to_list() == [3] * 5


def test_h200_capture(tmp_path, corpus):
    _run, gpu, procs = _ingest(tmp_path, corpus, H200)
    assert dict(gpu.group_by("source").len().iter_rows()) == {"nvsmi_table": 2, "nvsmi_q": 2, "query_gpu": 2, "dmon": 10}
    t = gpu.filter(source="nvsmi_table").sort("line").row(0, named=True)
    assert (t["name"], t["bus_id"], t["memory_total_mib"], t["power_w"], t["temperature_c"]) == (
        "NVIDIA H200", "00000000:83:00.0", 143771.0, 77.0, 28.0)
    assert t["ts"] == dt.datetime(2026, 7, 3, 22, 10, 45, tzinfo=UTC)
    pm = procs.filter(source="pmon").sort("line")
    # The 4th tick: memhog 10291 briefly shows 19% SM, gpu_burn drops to 79%.
    tick = pm.filter(seq=pm["seq"].unique().sort()[3]).select("pid", "sm_pct").rows()
    assert tick == [(10291, 19.0), (10293, None), (10309, 79.0)]
    d = gpu.filter(source="dmon").sort("line")
    assert d.tail(5)["power_w"].to_list() == [630.0, 628.0, 629.0, 632.0, 630.0]
    assert d.tail(5)["mem_clock_mhz"].to_list() == [3201.0] * 5


def test_nanogpt_iso_timestamped_csv(tmp_path, corpus):
    _run, gpu, _ = _ingest(tmp_path, corpus, NANOGPT)
    # 8 GPUs x 639 samples, own header `timestamp,gpu_index,temperature_C,...` of a shell loop.
    assert gpu.group_by("gpu").len().sort("gpu").rows() == [(i, 639) for i in range(8)]
    assert gpu["seq"].max() == 638
    first = gpu.filter(seq=0).sort("gpu")
    assert first["ts"].unique().to_list() == [dt.datetime(2025, 9, 24, 3, 48, 33, 493000, tzinfo=UTC)]
    assert first["temperature_c"].to_list() == [38.0, 60.0, 37.0, 37.0, 40.0, 35.0, 38.0, 36.0]
    assert first["power_w"].to_list() == [387.26, 422.55, 389.31, 370.96, 385.71, 372.66, 377.96, 375.69]
    assert set(first["utilization_gpu_pct"]) == {100.0}
    assert _row(gpu, line=10)["gpu"] == 0 and _row(gpu, line=10)["power_w"] == 387.36
    last = gpu.filter(seq=638)
    assert last["ts"].unique().to_list() == [LAST_TS]
    assert last.height == 8


def test_a100_mig_xml_v12(tmp_path, corpus):
    _run, gpu, procs = _ingest(tmp_path, corpus, A100_XML)
    phys = gpu.filter(pl.col("mig_device").is_null()).to_dicts()
    assert len(phys) == 1
    phys = phys[0]
    assert phys["line"] == 8 and phys["gpu"] == 0 and phys["seq"] == 0
    assert phys["ts"] == dt.datetime(2023, 8, 4, 11, 44, 30, tzinfo=UTC)
    assert (phys["name"], phys["bus_id"], phys["uuid"]) == (
        "NVIDIA A100-SXM4-80GB", "00000000:01:00.0", "GPU-513536b6-7d19-9063-b049-1e69664bb298")
    assert (phys["mig_mode"], phys["pstate"], phys["compute_mode"]) == ("Enabled", "P0", "Default")
    # utilization is N/A with MIG enabled.
    assert phys["utilization_gpu_pct"] is None
    assert (phys["memory_total_mib"], phys["memory_used_mib"], phys["memory_free_mib"]) == (81920.0, 50.0, 80999.0)
    assert (phys["temperature_c"], phys["memory_temperature_c"]) == (27.0, 44.0)
    assert (phys["power_w"], phys["power_limit_w"]) == (67.03, 500.0)
    assert (phys["sm_clock_mhz"], phys["mem_clock_mhz"], phys["sm_clock_max_mhz"]) == (1275.0, 1593.0, 1410.0)
    assert (phys["throttle_mask"], phys["throttle_reasons"]) == (0, "")
    assert (phys["ecc_uncorrected_volatile"], phys["ecc_corrected_aggregate"]) == (0, 0)
    # <remapped_rows>N/A</remapped_rows> and N/A retired pages stay null.
    assert phys["remapped_rows_pending"] is None and phys["retired_pages_dbe"] is None
    assert (phys["pcie_link_gen"], phys["pcie_link_width"], phys["pcie_tx_mb_per_s"]) == (4, 16, 4.0)
    migs = gpu.filter(pl.col("mig_device").is_not_null()).sort("mig_device")
    assert migs.select("line", "mig_device", "memory_total_mib", "memory_used_mib", "ecc_uncorrected_volatile").rows() == [
        (21, 0, 19968.0, 12.0, 0), (52, 1, 19968.0, 12.0, 0), (83, 2, 19968.0, 12.0, 0), (114, 3, 19968.0, 12.0, 0)]
    assert set(migs["gpu"]) == {0} and set(migs["uuid"]) == {phys["uuid"]}
    assert procs.height == 0


def test_rtx_blackwell_xml_v13(tmp_path, corpus):
    _run, gpu, procs = _ingest(tmp_path, corpus, RTX_XML)
    g = _row(gpu, gpu=0)
    assert g["name"] == "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"
    assert (g["fan_pct"], g["pstate"], g["utilization_gpu_pct"]) == (30.0, "P8", 0.0)
    assert (g["memory_used_mib"], g["memory_total_mib"]) == (65720.0, 97887.0)
    # average_power_draw (v13) is the board power; ECC disabled: counters null.
    assert (g["power_w"], g["power_limit_w"], g["temperature_c"]) == (3.97, 300.0, 24.0)
    assert g["ecc_uncorrected_volatile"] is None
    assert (g["remapped_rows_uncorrectable"], g["remapped_rows_pending"]) == (0, False)
    assert (g["pcie_link_gen"], g["pcie_rx_mb_per_s"]) == (1, 0.485)
    p = procs.to_dicts()
    assert len(p) == 1
    assert (p[0]["pid"], p[0]["type"], p[0]["used_memory_mib"], p[0]["gpu"]) == (116860, "C", 65710.0, 0)
    assert p[0]["process"] == "/root/src/llama.cpp/build/bin/llama-server"
    assert p[0]["gpu_instance_id"] is None  # N/A outside MIG


@pytest.mark.parametrize("name", [H100, H200])
def test_capture_sniffs_above_text_log(tmp_path, corpus, name):
    run, _, _ = _ingest(tmp_path, corpus, name)
    assert frame(run, "files")["kind"].to_list() == ["nvsmi_capture"]

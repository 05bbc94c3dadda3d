"""`nvidia-smi dmon` / `pmon`: headers of every era, `-` values, date/time columns, sample numbering.

Header and row lines copy formats.md §3.3 (OBS) byte for byte; rows are repeated to make ticks.
"""

from __future__ import annotations

import datetime as dt

from tests.helpers import gpu_tables

UTC = dt.timezone.utc
DMON_HDR = ("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk\n"
            "# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz\n")
DMON_ROW = "    0      3     38      -      0      0      0      0      0      0      -    208\n"
ALL_HDR = ("# gpu   pwr  temp    sm   mem   enc   dec  mclk  pclk pviol tviol    fb  bar1 sbecc dbecc   pci rxpci txpci\n"
           "# Idx     W     C     %     %     %     %   MHz   MHz     %  bool    MB    MB  errs  errs  errs  MB/s  MB/s\n")
ALL_ROW = "    0   111    83    25     7     0     0  4513  1683     0     0 11651     2     -     -     0    41     8\n"
DT_HDR = ("#Date       Time        gpu     fb   bar1   ccpm     sm    mem    enc    dec    jpg    ofa  rxpci  txpci   mclk   pclk \n"
          "#YYYYMMDD   HH:MM:SS    Idx     MB     MB     MB      %      %      %      %      %      %   MB/s   MB/s    MHz    MHz \n")
DT_ROW = " 20240104   13:54:35      0    239      3      0      6      1      0      0      0      0      5     10   6250   1695 \n"
PMON_HDR = ("# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command\n"
            "# Idx           #    C/G      %      %      %      %      %      %    name\n")
PMON_ROWS = ("    0      43043     C      0      0      -      -      -      -    funasr-wss-serv\n"
             "    1          -     -      -      -      -      -      -      -    -\n")


def test_default_dmon_with_dash_values(tmp_path):
    f, gpu, _ = gpu_tables(tmp_path, DMON_HDR + DMON_ROW + DMON_ROW.replace("     3     38", "   250     71"), "dmon.log")
    assert (f["kind"], f["status"]) == ("nvsmi_dmon", "parsed")
    rows = gpu.sort("line").to_dicts()
    assert [(r["line"], r["seq"], r["gpu"]) for r in rows] == [(3, 0, 0), (4, 1, 0)]
    r = rows[0]
    assert (r["power_w"], r["temperature_c"], r["memory_temperature_c"]) == (3.0, 38.0, None)
    assert (r["utilization_gpu_pct"], r["utilization_mem_pct"], r["mem_clock_mhz"], r["sm_clock_mhz"]) == (0.0, 0.0, None, 208.0)
    assert rows[1]["power_w"] == 250.0 and rows[1]["ts"] is None and r["source"] == "dmon"


def test_all_groups_2016_driver(tmp_path):
    _f, gpu, _ = gpu_tables(tmp_path, ALL_HDR + ALL_ROW, "dmon.log")
    r = gpu.row(0, named=True)
    assert (r["power_w"], r["temperature_c"], r["utilization_gpu_pct"], r["utilization_mem_pct"]) == (111.0, 83.0, 25.0, 7.0)
    assert (r["mem_clock_mhz"], r["sm_clock_mhz"], r["power_violation_pct"], r["thermal_violation"]) == (4513.0, 1683.0, 0.0, 0.0)
    assert (r["memory_used_mib"], r["ecc_corrected_volatile"], r["ecc_uncorrected_volatile"]) == (11651.0, None, None)
    assert (r["pcie_rx_mb_per_s"], r["pcie_tx_mb_per_s"]) == (41.0, 8.0)


def test_date_and_time_columns(tmp_path):
    second = DT_ROW.replace("13:54:35", "13:54:36").replace("    239  ", "    251  ")
    _f, gpu, _ = gpu_tables(tmp_path, DT_HDR + DT_ROW + second, "dmon.log")
    rows = gpu.sort("line").to_dicts()
    assert [r["ts"] for r in rows] == [dt.datetime(2024, 1, 4, 13, 54, 35, tzinfo=UTC), dt.datetime(2024, 1, 4, 13, 54, 36, tzinfo=UTC)]
    assert [r["memory_used_mib"] for r in rows] == [239.0, 251.0]
    assert (rows[0]["utilization_gpu_pct"], rows[0]["mem_clock_mhz"], rows[0]["sm_clock_mhz"]) == (6.0, 6250.0, 1695.0)


def test_two_gpus_old_header_repeated_header_and_ticks(tmp_path):
    hdr = ("# gpu   pwr  temp    sm   mem   enc   dec  mclk  pclk\n"
           "# Idx     W     C     %     %     %     %   MHz   MHz\n")
    g0 = "    0   111    83    25     7     0     0  4513  1683\n"
    g1 = "    1    98    80    30     9     0     0  4513  1650\n"
    _f, gpu, _ = gpu_tables(tmp_path, hdr + g0 + g1 + g0 + g1 + hdr + g0 + g1, "dmon.log")
    assert gpu.sort("line").select("line", "gpu", "seq").rows() == [
        (3, 0, 0), (4, 1, 0), (5, 0, 1), (6, 1, 1), (9, 0, 2), (10, 1, 2)]
    assert gpu.filter(gpu=1)["sm_clock_mhz"].to_list() == [1650.0] * 3


def test_pmon_drops_idle_rows(tmp_path):
    f, gpu, procs = gpu_tables(tmp_path, PMON_HDR + PMON_ROWS + PMON_ROWS, "dmon.log")
    assert f["kind"] == "nvsmi_dmon" and gpu.height == 0
    assert procs.sort("line").select("line", "seq", "gpu", "pid", "type", "sm_pct", "mem_pct", "process").rows() == [
        (3, 0, 0, 43043, "C", 0.0, 0.0, "funasr-wss-serv"),
        (5, 1, 0, 43043, "C", 0.0, 0.0, "funasr-wss-serv"),
    ]
    assert set(procs["source"]) == {"pmon"}


def test_old_pmon_header(tmp_path):
    hdr = ("# gpu        pid  type    sm   mem   enc   dec   command\n"
           "# Idx          #   C/G     %     %     %     %   name\n")
    rows = ("    0      12345     C    97    40     -     -   python\n"
            "    0      12399     C     2     1     -     -   python\n")
    _f, _gpu, procs = gpu_tables(tmp_path, hdr + rows, "dmon.log")
    assert procs.sort("line").select("pid", "sm_pct", "mem_pct", "process", "seq").rows() == [
        (12345, 97.0, 40.0, "python", 0), (12399, 2.0, 1.0, "python", 0)]

"""DCGM `dcgmi dmon`: short-name headers, N/A, unordered entities per tick, repeated headers.

The first block copies formats.md §3.6 (OBS); the second follows the printf layout of
NVIDIA/DCGM dcgmi/DeviceMonitor.cpp (`{:<10}` entity column, short names, an `ID` units line).
"""

from __future__ import annotations

from tests.helpers import gpu_tables

OBS = """\
#Entity   GRACT        SMACT        TENSO        DRAMA
ID
GPU 2     0.984        0.930        0.000        0.252
GPU 0     N/A          N/A          N/A          N/A
"""

HDR = ("#Entity   POWER        TMPTR        GPUTL        FBUSD        SMCLK        DVCCTR                    \n"
       "ID         W            C                                                                          \n")


def _row(ent: str, power: str, temp: str, util: str, fb: str, clk: str, mask: str) -> str:
    return f"{ent:<10}{power:<13}{temp:<13}{util:<13}{fb:<13}{clk:<13}{mask:<26}\n"


def test_profiling_fields_and_na(tmp_path):
    f, gpu, _ = gpu_tables(tmp_path, OBS, "dcgm.txt")
    assert (f["kind"], f["status"]) == ("dcgm_dmon", "parsed")
    rows = gpu.sort("line").to_dicts()
    assert [(r["line"], r["gpu"], r["seq"]) for r in rows] == [(3, 2, 0), (4, 0, 0)]
    assert (rows[0]["gr_active_ratio"], rows[0]["sm_active_ratio"], rows[0]["tensor_active_ratio"], rows[0]["dram_active_ratio"]) == (
        0.984, 0.93, 0.0, 0.252)
    assert rows[1]["sm_active_ratio"] is None and rows[1]["source"] == "dcgm_dmon"


def test_device_fields_ticks_and_repeated_header(tmp_path):
    text = (HDR
            + _row("GPU 1", "301.223", "71", "99", "70011", "1410", "0")
            + _row("GPU 0", "298.870", "69", "98", "70002", "1410", "0")
            + _row("GPU 0", "305.100", "70", "97", "70002", "1215", "4")
            + _row("GPU 1", "296.400", "84", "99", "70011", "1005", "96")
            + HDR
            + _row("GPU 0", "N/A", "70", "96", "70004", "1410", "0")
            + _row("GPU-I 3", "N/A", "N/A", "N/A", "9800", "N/A", "N/A"))
    _f, gpu, _ = gpu_tables(tmp_path, text, "dcgm.txt")
    rows = gpu.sort("line").to_dicts()
    assert [(r["line"], r["gpu"], r["mig_device"], r["seq"]) for r in rows] == [
        (3, 1, None, 0), (4, 0, None, 0), (5, 0, None, 1), (6, 1, None, 1), (9, 0, None, 2), (10, None, 3, 2)]
    assert [r["power_w"] for r in rows] == [301.223, 298.87, 305.1, 296.4, None, None]
    assert [r["temperature_c"] for r in rows[:4]] == [71.0, 69.0, 70.0, 84.0]
    assert [r["memory_used_mib"] for r in rows] == [70011.0, 70002.0, 70002.0, 70011.0, 70004.0, 9800.0]
    # DVCCTR is the clocks-event reason mask as a decimal integer: 4 = SW power cap, 96 = SW+HW thermal.
    assert [r["throttle_reasons"] for r in rows[:4]] == ["", "", "sw_power_cap", "sw_thermal_slowdown,hw_thermal_slowdown"]
    assert [r["sm_clock_mhz"] for r in rows[:4]] == [1410.0, 1410.0, 1215.0, 1005.0]

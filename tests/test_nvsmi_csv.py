"""`--query-gpu` / `--query-compute-apps` CSV: headers, units, aliases, loops, masks, placeholders.

Inputs copy the printouts of formats.md §3.1-3.2 (OBS lines) byte for byte where given.
"""

from __future__ import annotations

import datetime as dt

from tests.helpers import gpu_tables

UTC = dt.timezone.utc
HDR_TS = ("timestamp, pstate, temperature.gpu, utilization.gpu [%], utilization.memory [%], memory.total [MiB], "
          "memory.free [MiB], memory.used [MiB]")
ROW_TS = "2024/01/16 14:44:16.977, P8, 25, 0 %, 0 %, 23028 MiB, 22494 MiB, 21 MiB"
HDR_1080 = ("name, fan.speed [%], memory.total [MiB], memory.used [MiB], utilization.gpu [%], temperature.gpu, "
            "power.draw [W], clocks.current.graphics [MHz], clocks.current.memory [MHz]")
ROW_1080 = "GeForce GTX 1080 Ti, 29 %, 11175 MiB, 2856 MiB, 36 %, 60, 106.56 W, 1936 MHz, 5508 MHz"
HDR_2017 = ("timestamp, pstate, temperature.gpu, utilization.gpu [%], utilization.memory [%], "
            "clocks_throttle_reasons.applications_clocks_setting, clocks_throttle_reasons.sw_power_cap, "
            "clocks_throttle_reasons.hw_slowdown, clocks_throttle_reasons.sync_boost, clocks_throttle_reasons.unknown, "
            "clocks.current.graphics [MHz], clocks.current.sm [MHz], clocks.current.memory [MHz], clocks.current.video [MHz]")
ROW_2017 = ("2017/03/20 19:58:43.613, P0, 67, 70 %, 32 %, Not Active, Not Active, Not Active, Not Active, Not Active, "
            "144 MHz, 144 MHz, 4006 MHz, 122 MHz")


def test_header_with_units_and_timestamp(tmp_path):
    f, gpu, _ = gpu_tables(tmp_path, f"{HDR_TS}\n{ROW_TS}\n", "gpu.csv")
    assert (f["kind"], f["status"]) == ("nvsmi_query_csv", "parsed")
    r = gpu.row(0, named=True)
    assert r["line"] == 2 and r["seq"] == 0 and r["source"] == "query_gpu"
    assert r["ts"] == dt.datetime(2024, 1, 16, 14, 44, 16, 977000, tzinfo=UTC)
    assert (r["pstate"], r["temperature_c"], r["utilization_gpu_pct"], r["utilization_mem_pct"]) == ("P8", 25.0, 0.0, 0.0)
    assert (r["memory_total_mib"], r["memory_free_mib"], r["memory_used_mib"]) == (23028.0, 22494.0, 21.0)
    # No index column: a single GPU keyed by nothing stays null, not guessed.
    assert r["gpu"] is None


def test_aliases_print_canonical_names(tmp_path):
    _f, gpu, _ = gpu_tables(tmp_path, f"{HDR_1080}\n{ROW_1080}\n", "gpu.csv")
    r = gpu.row(0, named=True)
    assert (r["name"], r["fan_pct"], r["memory_total_mib"], r["memory_used_mib"]) == ("GeForce GTX 1080 Ti", 29.0, 11175.0, 2856.0)
    assert (r["utilization_gpu_pct"], r["temperature_c"], r["power_w"]) == (36.0, 60.0, 106.56)
    assert (r["sm_clock_mhz"], r["mem_clock_mhz"]) == (1936.0, 5508.0)


def test_named_throttle_fields_build_the_mask(tmp_path):
    active = ROW_2017.replace("Not Active, Not Active, Not Active, Not Active, Not Active",
                              "Not Active, Active, Not Active, Not Active, Not Active")
    _f, gpu, _ = gpu_tables(tmp_path, f"{HDR_2017}\n{ROW_2017}\n{active}\n", "gpu.csv")
    rows = gpu.sort("line").to_dicts()
    assert (rows[0]["throttle_mask"], rows[0]["throttle_reasons"]) == (0, "")
    assert (rows[1]["throttle_mask"], rows[1]["throttle_reasons"]) == (0x4, "sw_power_cap")
    # clocks.current.sm wins over clocks.current.graphics for the SM clock.
    assert rows[0]["sm_clock_mhz"] == 144.0 and rows[0]["mem_clock_mhz"] == 4006.0


def test_loop_with_repeated_header_hex_masks_and_placeholders(tmp_path):
    hdr = ("timestamp, index, uuid, compute_mode, clocks_event_reasons.active, utilization.gpu [%], memory.used [MiB], "
           "clocks.current.sm [MHz], retired_pages.pending, ecc.errors.uncorrected.volatile.total, fan.speed [%]")
    uuid0, uuid1 = "GPU-a44622e3-2296-6285-0a86-84d0f6c67900", "GPU-b44622e3-2296-6285-0a86-84d0f6c67901"
    text = "\n".join([
        hdr,
        f"2024/05/01 10:00:00.100, 0, {uuid0}, Default, 0x0000000000000000, 97 %, 40000 MiB, 1980 MHz, No, 0, [N/A]",
        f"2024/05/01 10:00:00.104, 1, {uuid1}, Default, 0x0000000000000004, 95 %, 40100 MiB, 1755 MHz, No, 0, [Not Supported]",
        hdr,
        f"2024/05/01 10:00:01.101, 0, {uuid0}, Exclusive_Process, 0x0000000000000060, 96 %, 40010 MiB, 1410 MHz, Yes, 2, N/A",
        f"2024/05/01 10:00:01.105, 1, {uuid1}, Default, 0x0000000000000001, 0 %, 40100 MiB, 345 MHz, No, 0, N/A",
        "",
    ])
    _f, gpu, _ = gpu_tables(tmp_path, text, "gpu.csv")
    rows = gpu.sort("line").to_dicts()
    assert [(r["line"], r["seq"], r["gpu"]) for r in rows] == [(2, 0, 0), (3, 0, 1), (5, 1, 0), (6, 1, 1)]
    assert [r["throttle_reasons"] for r in rows] == ["", "sw_power_cap", "sw_thermal_slowdown,hw_thermal_slowdown", "gpu_idle"]
    assert [r["throttle_mask"] for r in rows] == [0, 4, 0x60, 1]
    assert [r["compute_mode"] for r in rows] == ["Default", "Default", "Exclusive_Process", "Default"]
    assert [r["retired_pages_pending"] for r in rows] == [False, False, True, False]
    assert [r["ecc_uncorrected_volatile"] for r in rows] == [0, 0, 2, 0]
    assert [r["fan_pct"] for r in rows] == [None] * 4
    assert rows[2]["uuid"] == uuid0 and rows[2]["sm_clock_mhz"] == 1410.0


def test_lost_gpu_line_inside_a_loop(tmp_path):
    text = "\n".join([
        "index, pci.bus_id, utilization.gpu [%]",
        "0, 00000000:01:00.0, 90 %",
        "1, 00000000:02:00.0, 91 %",
        "0, 00000000:01:00.0, 92 %",
        "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU",
        "",
    ])
    _f, gpu, _ = gpu_tables(tmp_path, text, "gpu.csv")
    rows = gpu.sort("line").to_dicts()
    assert [(r["line"], r["seq"], r["gpu"]) for r in rows[:3]] == [(2, 0, 0), (3, 0, 1), (4, 1, 0)]
    lost = rows[3]
    assert lost["gpu"] == 1  # the bus id the loop printed for index 1
    assert (lost["line"], lost["bus_id"], lost["fault"], lost["seq"]) == (5, "00000000:02:00.0", "GPU is lost", 1)


def test_noheader_with_units_is_inferred_and_noheader_nounits_is_refused(tmp_path):
    _f, gpu, _ = gpu_tables(tmp_path, f"{ROW_TS}\n{ROW_TS.replace('14:44:16.977', '14:44:17.980').replace(' 0 %, 0 %', ' 55 %, 7 %')}\n", "gpu.csv")
    rows = gpu.sort("line").to_dicts()
    assert [r["utilization_gpu_pct"] for r in rows] == [0.0, 55.0]
    assert [r["utilization_mem_pct"] for r in rows] == [0.0, 7.0]
    assert rows[1]["ts"] == dt.datetime(2024, 1, 16, 14, 44, 17, 980000, tzinfo=UTC) and rows[1]["pstate"] == "P8"
    f, gpu2, procs2 = gpu_tables(tmp_path / "b", "2025/09/07 22:37:17.908, NVIDIA GeForce RTX 3090, 1106871, /app/llama-server, 23342\n", "gpu.csv")
    assert f["kind"] == "nvsmi_query_csv" and f["status"] == "unrecognized"
    assert "header" in f["error"]
    assert gpu2.height == 0 and procs2.height == 0


def test_compute_apps(tmp_path):
    text = "\n".join([
        "gpu_uuid, pid, process_name, used_gpu_memory [MiB]",
        "GPU-a44622e3-2296-6285-0a86-84d0f6c67900, 1328667, /usr/local/bin/python3.10, 130004 MiB",
        "GPU-a44622e3-2296-6285-0a86-84d0f6c67900, 1328990, VLLM::EngineCore, 6265 MiB",
        "",
    ])
    _f, gpu, procs = gpu_tables(tmp_path, text, "gpu.csv")
    assert gpu.height == 0
    assert procs.sort("line").select("line", "uuid", "pid", "process", "used_memory_mib", "seq").rows() == [
        (2, "GPU-a44622e3-2296-6285-0a86-84d0f6c67900", 1328667, "/usr/local/bin/python3.10", 130004.0, 0),
        (3, "GPU-a44622e3-2296-6285-0a86-84d0f6c67900", 1328990, "VLLM::EngineCore", 6265.0, 0),
    ]


def test_compute_apps_header_only_means_no_process(tmp_path):
    f, gpu, procs = gpu_tables(tmp_path, "pid, process_name, used_gpu_memory [MiB]\n", "gpu.csv")
    assert f["kind"] == "nvsmi_query_csv" and gpu.height == 0 and procs.height == 0


def test_content_decides_the_kind(tmp_path):
    f, gpu, _ = gpu_tables(tmp_path, f"{HDR_1080}\n{ROW_1080}\n", "train.log")
    assert f["kind"] == "nvsmi_query_csv" and gpu.height == 1
    f2, _g, _p = gpu_tables(tmp_path / "b", "step 1 loss 2.3, lr 0.1, grad 1.0\n", "gpu.csv")
    assert f2["kind"] == "text_log"

"""The default nvidia-smi table: driver eras, processes, ERR!, and tables pasted into training logs.

Tables copy formats.md §3.4 (OBS, drivers 470 / 535 / 550) and public issue pastes
(driver 410: m0nad/Diamorphine#13 and NVIDIA/nvidia-docker#179; driver 325: cBio/cbio-cluster#24).
"""

from __future__ import annotations

import datetime as dt

from tests.helpers import tables

UTC = dt.timezone.utc

T470 = """\
Fri Dec 13 18:25:30 2024
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  Tesla P100-PCIE...  On   | 00000000:0D:00.0 Off |                  Off |
| N/A   29C    P0    30W / 250W |    789MiB / 16280MiB |      1%      Default |
|                               |                      |                  N/A |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|    0   N/A  N/A      3030      C   /usr/bin/python3                  787MiB |
+-----------------------------------------------------------------------------+
""".replace("·", " ")  # · marks the trailing spaces nvidia-smi prints

T535 = """\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA GeForce RTX 3090        On  | 00000000:01:00.0  On |                  N/A |
|  0%   29C    P8              38W / 350W |    513MiB / 24576MiB |      0%      Default |
|                                         |                      |                  N/A |
+-----------------------------------------+----------------------+----------------------+
·························································································
+---------------------------------------------------------------------------------------+
| Processes:                                                                            |
|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |
|        ID   ID                                                             Usage      |
|=======================================================================================|
|    0   N/A  N/A      3494      G   /usr/lib/xorg/Xorg                          152MiB |
+---------------------------------------------------------------------------------------+
""".replace("·", " ")  # · marks the trailing spaces nvidia-smi prints

T410 = """\
Wed Jun 26 02:44:30 2019·······
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 410.48                 Driver Version: 410.48                    |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla V100-DGXS...  Off  | 00000000:82:00.0 Off |                    0 |
| N/A   38C    P0    49W / 300W |    449MiB / 32478MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
···············································································
+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
|    0     28290    C   python                                        1012MiB |
+-----------------------------------------------------------------------------+
""".replace("·", " ")  # · marks the trailing spaces nvidia-smi prints

T325 = """\
Fri Feb 28 20:48:48 2014·······
+------------------------------------------------------+·······················
| NVIDIA-SMI 5.325.15   Driver Version: 325.15         |·······················
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce GTX 680     Off  | 0000:03:00.0     N/A |                  N/A |
| 30%   29C  N/A     N/A /  N/A |        9MB /  4095MB |     N/A      Default |
+-------------------------------+----------------------+----------------------+
|   1  GeForce GTX 680     Off  | 0000:04:00.0     N/A |                  N/A |
| 30%   31C  N/A     N/A /  N/A |        9MB /  4095MB |     N/A      Default |
+-------------------------------+----------------------+----------------------+
""".replace("·", " ")  # · marks the trailing spaces nvidia-smi prints


def test_driver_470_table_and_processes(tmp_path):
    files, gpu, procs = tables(tmp_path, {"smi.txt": T470}, "files", "gpu", "gpu_procs")
    assert files.select("kind", "status").row(0) == ("nvsmi_table", "parsed")
    r = gpu.row(0, named=True)
    assert (r["line"], r["seq"], r["gpu"], r["name"], r["bus_id"]) == (9, 0, 0, "Tesla P100-PCIE...", "00000000:0D:00.0")
    assert r["ts"] == dt.datetime(2024, 12, 13, 18, 25, 30, tzinfo=UTC)
    assert (r["fan_pct"], r["temperature_c"], r["pstate"], r["power_w"], r["power_limit_w"]) == (None, 29.0, "P0", 30.0, 250.0)
    assert (r["memory_used_mib"], r["memory_total_mib"], r["utilization_gpu_pct"], r["compute_mode"]) == (789.0, 16280.0, 1.0, "Default")
    # `Off` in the ECC cell is no count; MIG M. `N/A` is null.
    assert r["ecc_uncorrected_volatile"] is None and r["mig_mode"] is None and r["fault"] is None
    assert procs.select("line", "gpu", "gpu_instance_id", "pid", "type", "process", "used_memory_mib", "seq").rows() == [
        (19, 0, None, 3030, "C", "/usr/bin/python3", 787.0, 0)]


def test_driver_535_and_410_layouts(tmp_path):
    _f, gpu, procs = tables(tmp_path, {"a.txt": T535, "b.txt": T410}, "files", "gpu", "gpu_procs")
    a = gpu.filter(file="a.txt").row(0, named=True)
    assert (a["fan_pct"], a["temperature_c"], a["pstate"], a["power_w"], a["memory_used_mib"]) == (0.0, 29.0, "P8", 38.0, 513.0)
    assert a["ts"] is None  # no ctime line above this table
    b = gpu.filter(file="b.txt").row(0, named=True)
    assert (b["name"], b["ecc_uncorrected_volatile"], b["memory_total_mib"]) == ("Tesla V100-DGXS...", 0, 32478.0)
    assert b["ts"] == dt.datetime(2019, 6, 26, 2, 44, 30, tzinfo=UTC)
    assert procs.sort("file").select("file", "pid", "type", "process", "used_memory_mib").rows() == [
        ("a.txt", 3494, "G", "/usr/lib/xorg/Xorg", 152.0), ("b.txt", 28290, "C", "python", 1012.0)]


def test_old_driver_mb_units_two_gpus(tmp_path):
    _f, gpu, _ = tables(tmp_path, {"smi.txt": T325}, "files", "gpu", "gpu_procs")
    assert gpu.sort("gpu").select("gpu", "bus_id", "fan_pct", "temperature_c", "memory_used_mib", "memory_total_mib",
                                  "utilization_gpu_pct", "power_w", "pstate").rows() == [
        (0, "00000000:03:00.0", 30.0, 29.0, 9.0, 4095.0, None, None, None),
        (1, "00000000:04:00.0", 30.0, 31.0, 9.0, 4095.0, None, None, None)]


def test_err_cells_mark_a_fault(tmp_path):
    bad = T410.replace("| N/A   38C    P0    49W / 300W |", "|ERR!   38C    P0   ERR! / 300W |")
    _f, gpu, _ = tables(tmp_path, {"smi.txt": bad}, "files", "gpu", "gpu_procs")
    r = gpu.row(0, named=True)
    assert (r["fault"], r["fan_pct"], r["power_w"], r["temperature_c"]) == ("ERR!", None, None, 38.0)


def test_snapshots_pasted_in_a_training_log(tmp_path):
    second = T470.replace("Fri Dec 13 18:25:30 2024", "Fri Dec 13 18:35:30 2024").replace(
        "    789MiB / 16280MiB |      1%", "  15873MiB / 16280MiB |     98%").replace("787MiB |", "15871MiB |")
    prefixed = "".join("[default0]:" + ln + "\n" for ln in second.splitlines())
    log = (
        "{'loss': 2.5, 'grad_norm': 1.5, 'learning_rate': 5e-05, 'epoch': 0.1}\n"
        + T470
        + "{'loss': 2.1, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.2}\n"
        + prefixed
        + "{'loss': 1.9, 'grad_norm': 1.1, 'learning_rate': 5e-05, 'epoch': 0.3}\n"
    )
    files, gpu, procs = tables(tmp_path, {"train.log": log}, "files", "gpu", "gpu_procs")
    assert files.select("kind", "status").row(0) == ("text_log", "parsed")
    assert gpu.sort("seq").select("line", "seq", "memory_used_mib", "utilization_gpu_pct").rows() == [
        (10, 0, 789.0, 1.0), (31, 1, 15873.0, 98.0)]
    assert gpu.sort("seq")["ts"].to_list() == [dt.datetime(2024, 12, 13, 18, 25, 30, tzinfo=UTC),
                                                dt.datetime(2024, 12, 13, 18, 35, 30, tzinfo=UTC)]
    assert set(gpu["source"]) == {"nvsmi_table"}
    assert procs.sort("seq").select("seq", "pid", "used_memory_mib").rows() == [(0, 3030, 787.0), (1, 3030, 15871.0)]


def test_no_running_processes_and_a_log_without_tables(tmp_path):
    t550 = T535.replace(
        "|    0   N/A  N/A      3494      G   /usr/lib/xorg/Xorg                          152MiB |",
        "|  No running processes found                                                           |")
    _f, gpu, procs = tables(tmp_path, {"smi.txt": t550, "train.log": "{'loss': 2.5, 'epoch': 0.1}\n"}, "files", "gpu", "gpu_procs")
    assert gpu.height == 1 and procs.height == 0

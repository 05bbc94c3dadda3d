"""`nvidia-smi -q` text of older drivers: Clocks Throttle Reasons, Power Readings, pre-Ampere ECC.

Section lines copy public pastes (kubeflow/kubeflow#68 for the throttle reasons,
NVIDIA/dcgm-exporter#16 for pre-Ampere ECC, retired pages and Power Readings,
NVIDIA/nvidia-docker#914 for the GPU header block); values changed where a test needs them.
"""

from __future__ import annotations

import datetime as dt

from forensics.ingest import ingest
from tests.helpers import frame, write_run

UTC = dt.timezone.utc


def _gpu(bus: str, uuid: str, *, sw_power_cap: str = "Not Active", hw_thermal: str = "Not Active", dbe_total: str = "0",
         pending: str = "No", used: str = "449 MiB", util: str = "0 %") -> str:
    return f"""\
GPU {bus}
    Product Name                    : Tesla V100-SXM2-16GB
    Product Brand                   : Tesla
    Persistence Mode                : Enabled
    GPU UUID                        : {uuid}
    Minor Number                    : 7
    PCI
        Bus                         : 0x8A
        Bus Id                      : {bus}
    Fan Speed                       : N/A
    Performance State               : P0
    Clocks Throttle Reasons
        Idle                        : Not Active
        Applications Clocks Setting : Not Active
        SW Power Cap                : {sw_power_cap}
        HW Slowdown                 : Not Active
            HW Thermal Slowdown     : {hw_thermal}
            HW Power Brake Slowdown : Not Active
        Sync Boost                  : Not Active
        SW Thermal Slowdown         : Not Active
    FB Memory Usage
        Total                       : 16160 MiB
        Used                        : {used}
        Free                        : 15711 MiB
    Compute Mode                    : Exclusive_Process
    Utilization
        Gpu                         : {util}
        Memory                      : 0 %
    Ecc Mode
        Current                     : Enabled
        Pending                     : Enabled
    ECC Errors
        Volatile
            Single Bit············
                Device Memory             : 0
                Register File             : 0
                L1 Cache                  : N/A
                L2 Cache                  : 0
                Texture Memory            : 0
                Texture Shared            : 0
                CBU                       : N/A
                Total                     : 3
            Double Bit············
                Device Memory             : 0
                Register File             : 0
                L1 Cache                  : N/A
                L2 Cache                  : 0
                Texture Memory            : 0
                Texture Shared            : 0
                CBU                       : N/A
                Total                     : {dbe_total}
    Retired Pages
        Single Bit ECC                    : 0
        Double Bit ECC                    : 1
        Pending Page Blacklist            : {pending}
    Remapped Rows                         : N/A
    Temperature
        GPU Current Temp                  : 24 C
        GPU Shutdown Temp                 : 85 C
        GPU Slowdown Temp                 : 82 C
        Memory Current Temp               : N/A
    Power Readings
        Power Management                  : Supported
        Power Draw                        : 25.33 W
        Power Limit                       : 250.00 W
        Default Power Limit               : 250.00 W
        Enforced Power Limit              : 250.00 W
    Clocks
        Graphics                          : 1350 MHz
        SM                                : 1350 MHz
        Memory                            : 877 MHz
    Max Clocks
        Graphics                          : 1530 MHz
        SM                                : 1530 MHz
        Memory                            : 877 MHz
    Processes                             : None

""".replace("·", " ")  # · marks trailing spaces of the paste


def _report(stamp: str, gpus: list[str]) -> str:
    return (f"\n==============NVSMI LOG==============\n\nTimestamp                       : {stamp}\n"
            f"Driver Version                  : 418.67\nCUDA Version                    : 10.1\n\n"
            f"Attached GPUs                   : {len(gpus)}\n" + "".join(gpus))


U0, U1 = "GPU-a20aa456-78c0-2d93-11a1-b6a6feefcc83", "GPU-b20aa456-78c0-2d93-11a1-b6a6feefcc84"


def test_old_driver_report_two_gpus_two_samples(tmp_path):
    first = _report("Thu Jan  4 14:41:13 2024", [_gpu("00000000:8A:00.0", U0), _gpu("00000000:8B:00.0", U1)])
    second = _report("Thu Jan  4 14:41:18 2024", [
        _gpu("00000000:8A:00.0", U0, sw_power_cap="Active", hw_thermal="Active", dbe_total="2", pending="Yes",
             used="15000 MiB", util="97 %"),
        _gpu("00000000:8B:00.0", U1)])
    run = ingest(write_run(tmp_path, {"q.log": first + second}))
    assert frame(run, "files").select("kind", "status").row(0) == ("nvsmi_query_text", "parsed")
    gpu = frame(run, "gpu").sort("line")
    assert gpu.select("seq", "gpu", "bus_id", "uuid").rows() == [
        (0, 0, "00000000:8A:00.0", U0), (0, 1, "00000000:8B:00.0", U1), (1, 0, "00000000:8A:00.0", U0), (1, 1, "00000000:8B:00.0", U1)]
    assert gpu["ts"].to_list() == [dt.datetime(2024, 1, 4, 14, 41, 13, tzinfo=UTC)] * 2 + [dt.datetime(2024, 1, 4, 14, 41, 18, tzinfo=UTC)] * 2
    a = gpu.row(0, named=True)
    assert (a["name"], a["pstate"], a["compute_mode"], a["fan_pct"]) == ("Tesla V100-SXM2-16GB", "P0", "Exclusive_Process", None)
    assert (a["throttle_mask"], a["throttle_reasons"]) == (0, "")
    assert (a["memory_total_mib"], a["memory_used_mib"], a["utilization_gpu_pct"], a["utilization_mem_pct"]) == (16160.0, 449.0, 0.0, 0.0)
    # Pre-Ampere ECC: the Single Bit / Double Bit totals.
    assert (a["ecc_corrected_volatile"], a["ecc_uncorrected_volatile"]) == (3, 0)
    assert (a["retired_pages_sbe"], a["retired_pages_dbe"], a["retired_pages_pending"]) == (0, 1, False)
    assert a["remapped_rows_pending"] is None
    # Old `Power Readings`: Power Draw, and the enforced limit before `Power Limit`.
    assert (a["power_w"], a["power_limit_w"], a["temperature_c"], a["memory_temperature_c"]) == (25.33, 250.0, 24.0, None)
    assert (a["sm_clock_mhz"], a["mem_clock_mhz"], a["sm_clock_max_mhz"]) == (1350.0, 877.0, 1530.0)
    hot = gpu.row(2, named=True)
    assert (hot["throttle_mask"], hot["throttle_reasons"]) == (0x44, "sw_power_cap,hw_thermal_slowdown")
    assert (hot["ecc_uncorrected_volatile"], hot["retired_pages_pending"], hot["utilization_gpu_pct"]) == (2, True, 97.0)
    assert frame(run, "gpu_procs").height == 0

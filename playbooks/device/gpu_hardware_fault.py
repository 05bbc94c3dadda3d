"""gpu-hardware-fault: Xid errors, uncorrectable ECC, a GPU fallen off the bus, retired pages."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import combine, detection, events, first_message
from forensics.playbooks.fields import field

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

# amdgpu's kernel lines are AMD's counterparts: a GPU page fault (like Xid 31, usually the program's bad
# address) and a ring timeout (the GPU stopped completing work and the driver reset it).
CODES = ("xid", "sxid", "ecc_error", "gpu_fallen_off_bus", "gpu_init_failed", "amdgpu_page_fault", "amdgpu_ring_timeout")
# Linux PCIe AER (kernel log): an uncorrectable error on a device's link or its root port, and a recovery that failed
# (`nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)`: the nvidia driver has no AER callbacks,
# so any uncorrectable error on the GPU's link leaves it dead until a reset). Counted only where a line of the same
# log names the nvidia driver: the same lines on a NIC, an NVMe disk or a Thunderbolt port are not the GPU's.
AER_CODES = ("pcie_aer_error",)
# Xid codes that mean the hardware (memory, bus, GPU) failed, not the program. 13/31/43 are usually application faults.
HW_XIDS = {"48", "63", "64", "74", "79", "92", "94", "95", "119", "120", "123", "140"}
# NVLink errors: 74 (older GPUs) and 144-150 (NVLink5 / NVL72 families).
NVLINK_XIDS = {"74", "144", "145", "146", "147", "148", "149", "150"}

PLAYBOOK = declare(
    Playbook(
        id="gpu-hardware-fault",
        title="GPU hardware fault",
        category="device",
        severity=Severity.CRITICAL,
        tables=("events", "gpu"),
        explains=("nccl-timeout", "silent-hang", "device-assert", "cuda-context-corruption", "rank-straggler"),
        codes=("amdgpu_page_fault", "amdgpu_ring_timeout", "ecc_error", "gpu_fallen_off_bus", "gpu_init_failed",
               "pcie_aer_error", "sxid", "xid"),
        causes=(
            Cause("failing_gpu", "The GPU's memory or chip is failing (uncorrectable ECC, row-remap failure, Xid 48/63/64/94/95)",
                  verify="nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER on the node; dmesg | grep -i xid",
                  fix="Drain the node and hand it to the hardware team; resume from the last checkpoint elsewhere", prior=0.5),
            Cause("bus_or_power", "The GPU fell off the bus (Xid 79) or lost power/PCIe link",
                  verify="dmesg | grep -iE 'xid|fallen off|pcie'; nvidia-smi shows the GPU missing or ERR!",
                  fix="Drain the node; check PCIe seating, power and cooling", prior=0.3),
            Cause("nvlink", "NVLink errors (Xid 74)",
                  verify="nvidia-smi nvlink -e",
                  fix="Drain the node; NVLink/NVSwitch replacement", prior=0.2),
        ),
        verify="nvidia-smi -q -d ECC,PAGE_RETIREMENT; dmesg -T | grep -i xid",
        fix="Drain the node",
        thresholds={
            "min_missing": Threshold(3, "samples of the other GPUs after a GPU's last one that make it missing (a cut-off last sample is not)", "ours"),
            "min_present": Threshold(3, "samples a GPU must have had before its absence counts", "ours"),
        },
        doc="""\
## Symptom
Kernel log `NVRM: Xid (PCI:…): N, …` lines, `uncorrectable ECC error encountered`, `GPU has fallen
off the bus`, PCIe AER `PCIe Bus Error: severity=Uncorrected (Fatal)` / `AER: Multiple Uncorrected (Fatal) error
received` / `nvidia 0000:…: AER: can't recover` on the GPU or its root port, `NVRM: GPU …: RmInitAdapter failed!` (the driver cannot initialise the GPU),
`Unable to determine the device handle for GPU … : GPU is lost`, pending retired pages
or uncorrectable ECC counts in nvidia-smi samples, a GPU missing from later samples; on AMD GPUs,
amdgpu `[gfxhub] page fault (src_id:… ring:… vmid:… pasid:…)` and `ring gfx_0.0.0 timeout` lines.

## Why it matters
No code change fixes failing hardware; the job must move off the node, and every other error on that
rank (timeouts, asserts, context errors) is a consequence.

## Evidence
`events` (Xid, ECC, bus errors, PCIe AER uncorrectable errors where the nvidia driver is named) and `gpu`
(ECC counters, retired pages, missing GPUs).

## Known false positives
Xid 13, 31 and 43 are usually raised by application faults (illegal address, exception); they are
reported with lower confidence, as are amdgpu `[gfxhub] page fault` lines (AMD's Xid 31). An amdgpu
`ring … timeout` (the driver reset a hung GPU) names a failing GPU with middling strength. PCIe AER
`severity=Corrected` lines are routine on healthy hosts and are not read; uncorrectable ones count only in a log
where the nvidia driver is named (the same lines on a NIC, a disk or a Thunderbolt port are not the GPU's). An Xid 45 (channel cleanup) `caused by previous Xid N` is judged by N.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect_events(ctx: Context, th: dict) -> Detection | None:
    """Xid, ECC and bus-loss lines in logs or kernel messages."""
    aer = _gpu_link_errors(ctx)
    ev = combine(events(ctx, CODES), aer)
    if ev.height == 0:
        return None
    # An Xid caused by an earlier one (`45 … caused by previous Xid 149`) counts as that earlier one too.
    xids = pl.concat([ev.with_columns(field(k).alias("x")).get_column("x") for k in ("xid", "previous_xid")]).drop_nulls().unique().to_list()
    text = " ".join(ev.get_column("message").to_list()[:50]).lower()
    causes: dict[str, float] = {}
    if {x for x in xids} & HW_XIDS or "ecc" in text or "remap" in text:
        causes["failing_gpu"] = 0.9
    if "79" in xids or "fallen off" in text or "gpu is lost" in text or aer.height:
        causes["bus_or_power"] = 0.9
    elif "rminitadapter failed" in text:
        # The driver cannot bring the GPU up: most often a link, power or firmware problem.
        causes["bus_or_power"] = 0.7
        causes["failing_gpu"] = max(causes.get("failing_gpu", 0.0), 0.4)
    if {x for x in xids} & NVLINK_XIDS or "nvlink" in text:
        causes["nvlink"] = 0.8
    codes = set(ev.get_column("code").to_list())
    ring_only = "amdgpu_ring_timeout" in codes and not causes
    if "amdgpu_ring_timeout" in codes:
        # A hung ring is a hardware or firmware fault as often as a runaway kernel: not proof of either.
        causes["failing_gpu"] = max(causes.get("failing_gpu", 0.0), 0.6)
    # Faults the program's own bad addresses raise: Xid 13/31/43, and amdgpu page faults.
    app_only = not causes and (bool(xids) or "amdgpu_page_fault" in codes) and set(xids) <= {"13", "31", "43"}
    if not causes:
        causes["failing_gpu"] = 0.3
    xid_text = f" (Xid {', '.join(sorted(xids, key=lambda x: int(x) if x.isdigit() else 0))})" if xids else ""
    return detection(ev, f"GPU hardware fault{xid_text}: {first_message(ev)}", causes,
                     confidence=0.5 if app_only else 0.7 if ring_only else 0.95, severity=Severity.MEDIUM if app_only else None,
                     facts={"xids": sorted(xids)})




def _gpu_link_errors(ctx: Context) -> pl.DataFrame:
    """PCIe AER uncorrectable errors and failed recoveries of logs in which the nvidia driver is named."""
    ev = events(ctx, AER_CODES)
    if ev.height == 0:
        return ev
    gpu_files = ev.filter(field("driver") == "nvidia").select("file").unique()
    return ev.join(gpu_files, on="file", how="semi")

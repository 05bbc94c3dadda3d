"""Kernel PCIe AER reports: an uncorrectable error on the GPU's link is gpu-hardware-fault; corrected noise and the
same errors on other devices stay quiet."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def problems(tmp: Path, text: str, name: str = "dmesg.txt") -> list:
    a = analyze(Context(ingest(write_run(tmp, {name: text}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


# https://github.com/rwth-i6/returnn/issues/1500 (`dmesg -H` deltas): fatal on the GPU's root port, the nvidia
# driver cannot recover.
FATAL = """[  +0.000001] pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: 0000:00:03.0
[  +0.000004] pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)
[  +0.000898] pcieport 0000:00:03.0:   device [8086:6f08] error status/mask=00004020/00000000
[  +0.000894] pcieport 0000:00:03.0:    [14] CmpltTO                (First)
[  +0.000921] nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)
[  +0.000041] pcieport 0000:00:03.0: AER: device recovery failed
"""
# linux-pci list (Thunderbolt dock power-down noise): the same recovery lines, no GPU involved.
THUNDERBOLT = """[   30.100246] pcieport 0000:00:1d.0: AER: Uncorrected (Non-Fatal) error received: 0000:00:1d.0
[   30.100251] pcieport 0000:00:1d.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)
[   30.100256] pcieport 0000:00:1d.0:   device [8086:7ab0] error status/mask=00100000/00004000
[   30.100262] pcieport 0000:00:1d.0:    [20] UnsupReq               (First)
[   30.100372] thunderbolt 0000:0a:00.0: AER: can't recover (no error_detected callback)
[   30.100401] xhci_hcd 0000:3e:00.0: AER: can't recover (no error_detected callback)
[   30.100427] pcieport 0000:00:1d.0: AER: device recovery failed
"""
# Corrected errors on a healthy GPU host (aer.c `severity=Corrected`; `Correctable` since 6.16).
CORRECTED = """[ 5123.456789] pcieport 0000:00:03.0: AER: Corrected error received: 0000:03:00.0
[ 5123.456801] nvidia 0000:03:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
[ 5123.456810] nvidia 0000:03:00.0:   device [10de:2204] error status/mask=00000001/0000a000
[ 5123.456818] nvidia 0000:03:00.0:    [ 0] RxErr                  (First)
[ 6001.000001] nvidia 0000:03:00.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)
"""


def test_fatal_error_on_the_gpus_link(tmp_path):
    top = problems(tmp_path, FATAL)[0]
    assert top.id == "gpu-hardware-fault" and top.causes[0].cause.id == "bus_or_power"
    assert any(e.line == 5 for e in top.evidence)


def test_the_same_errors_on_other_devices_stay_quiet(tmp_path):
    assert problems(tmp_path, THUNDERBOLT) == []


def test_corrected_errors_on_the_gpu_stay_quiet(tmp_path):
    assert problems(tmp_path, CORRECTED) == []

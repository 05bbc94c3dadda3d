"""gpu-throttling from one `nvidia-smi -q` snapshot, pasted whole or as a banner-less excerpt.

Texts copy public pastes: l4rz/reverse-engineering-dell-idrac-to-get-rid-of-gpu-throttling (README: a
V100-SXM2-32GB in a Dell C4130 held at 382 MHz by the chassis power brake), a second C4130 write-up of
the same fault quoting only the two Active lines and an annotated SM clock, kubeflow/kubeflow#68 (a
`grep -A8 'Clocks Throttle'` of an idle GPU), mlfoundations/open_clip#703 (rwightman's excerpt: SW Power
Cap alone, "okay as long as your utilization and power usage are high"), choderalab/perses#613 (`-q -d
POWER,CLOCK,TEMPERATURE,PERFORMANCE` of an idle GPU) and ollama/ollama#6163 (SW Power Cap at P2 under
load). Values are changed only where a test says so.
"""

from __future__ import annotations

import polars as pl

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run

IDRAC = """\
Clocks Throttle Reasons
    Idle                              : Not Active
    Applications Clocks Setting       : Not Active
    SW Power Cap                      : Not Active
    HW Slowdown                       : Active
        HW Thermal Slowdown           : Not Active
        HW Power Brake Slowdown       : Active

Clocks
    Graphics                          : 382 MHz
    SM                                : 382 MHz
    Memory                            : 877 MHz
    Video                             : 1372 MHz
"""

C4130_ANNOTATED = """\
Clocks Throttle Reasons
    HW Slowdown                       : Active
        HW Power Brake Slowdown       : Active

Clocks
    SM                                : 382 MHz   \u2190 should be ~1530 MHz
"""

KUBEFLOW_IDLE = """\
$ nvidia-smi -q | grep -A8 'Clocks Throttle'
    Clocks Throttle Reasons
        Idle                        : Active
        Applications Clocks Setting : Not Active
        SW Power Cap                : Not Active
        HW Slowdown                 : Not Active
            HW Thermal Slowdown     : Not Active
            HW Power Brake Slowdown : Not Active
        Sync Boost                  : Not Active
        SW Thermal Slowdown         : Not Active
"""

OPEN_CLIP_POWER_CAP = """\
    Clocks Event Reasons
        Idle                              : Not Active
        Applications Clocks Setting       : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Not Active
            HW Thermal Slowdown           : Not Active
            HW Power Brake Slowdown       : Not Active
        Sync Boost                        : Not Active
        SW Thermal Slowdown               : Not Active
        Display Clock Setting             : Not Active
"""


def _perses(*, idle: str = "Active", hw: str = "Not Active", thermal: str = "Not Active", pstate: str = "P8") -> str:
    return f"""\

==============NVSMI LOG==============

Timestamp                           : Thu Feb 20 14:04:14 2020
Driver Version                      : 440.33.01
CUDA Version                        : 10.2

Attached GPUs                       : 1
GPU 00000000:84:00.0
    Performance State               : {pstate}
    Clocks Throttle Reasons
        Idle                        : {idle}
        Applications Clocks Setting : Not Active
        SW Power Cap                : Not Active
        HW Slowdown                 : {hw}
            HW Thermal Slowdown     : {thermal}
            HW Power Brake Slowdown : Not Active
        Sync Boost                  : Not Active
        SW Thermal Slowdown         : Not Active
        Display Clock Setting       : Not Active
    Temperature
        GPU Current Temp            : 37 C
        GPU Shutdown Temp           : 96 C
        GPU Slowdown Temp           : 93 C
"""


OLLAMA_POWER_CAP = """\

==============NVSMI LOG==============

Timestamp                                 : Mon Aug  5 12:57:09 2024
Driver Version                            : 545.29.06
CUDA Version                              : 12.3

Attached GPUs                             : 1
GPU 00000000:0B:00.0
    Performance State                     : P2
    Clocks Event Reasons
        Idle                              : Not Active
        Applications Clocks Setting       : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Not Active
            HW Thermal Slowdown           : Not Active
            HW Power Brake Slowdown       : Not Active
        Sync Boost                        : Not Active
        SW Thermal Slowdown               : Not Active
        Display Clock Setting             : Not Active
    Temperature
        GPU Current Temp                  : 77 C
"""


def _findings(tmp_path, text: str, name: str = "nvidia-smi.txt"):
    run = ingest(write_run(tmp_path, {name: text}))
    return run, [f for f in analyze(Context(run)).findings if f.severity.name != "INFO"]


def test_banner_less_excerpt_is_one_sample_of_one_gpu(tmp_path):
    run, _ = _findings(tmp_path, IDRAC)
    g = pl.from_arrow(run.tables["gpu"])
    assert g.height == 1
    row = g.row(0, named=True)
    assert row["sm_clock_mhz"] == 382 and row["mem_clock_mhz"] == 877
    assert row["throttle_reasons"] == "hw_slowdown,hw_power_brake_slowdown"


def test_power_brake_snapshot_is_throttling(tmp_path):
    _, found = _findings(tmp_path, IDRAC)
    assert [f.id for f in found] == ["gpu-throttling"]
    f = found[0]
    assert "hw_power_brake_slowdown" in f.facts["reasons"] and f.facts["sm_clock_mhz"] == 382
    assert f.causes[0].cause.id == "power_limit"
    assert f.evidence[0].line == 1


def test_annotated_excerpt_of_the_same_fault(tmp_path):
    _, found = _findings(tmp_path, C4130_ANNOTATED)
    assert [f.id for f in found] == ["gpu-throttling"]
    assert found[0].facts["sm_clock_mhz"] == 382


def test_hw_thermal_slowdown_in_a_whole_report_of_a_working_gpu(tmp_path):
    _, found = _findings(tmp_path, _perses(idle="Not Active", hw="Active", thermal="Active", pstate="P0"))
    assert [f.id for f in found] == ["gpu-throttling"]
    assert found[0].causes[0].cause.id == "cooling"


def test_idle_and_power_cap_snapshots_stay_quiet(tmp_path):
    for k, text in enumerate((KUBEFLOW_IDLE, OPEN_CLIP_POWER_CAP, _perses(), OLLAMA_POWER_CAP)):
        _, found = _findings(tmp_path / str(k), text)
        assert found == [], (k, [(f.id, f.summary) for f in found])


def test_power_brake_on_an_idle_gpu_stays_quiet(tmp_path):
    # Idle active: the clocks are down because nothing runs, whatever else the chassis asserts.
    _, found = _findings(tmp_path, IDRAC.replace("Idle                              : Not Active", "Idle                              : Active"))
    assert found == []


def test_bare_hw_slowdown_needs_the_clock_halved(tmp_path):
    # HW Slowdown alone may show for a moment during a P-state or clock change (NVML): quiet without the clocks.
    bare = _perses(idle="Not Active", hw="Active", pstate="P0")
    _, found = _findings(tmp_path / "a", bare)
    assert found == []
    halved = bare + "    Clocks\n        SM                          : 600 MHz\n    Max Clocks\n        SM                          : 1530 MHz\n"
    _, found = _findings(tmp_path / "b", halved)
    assert [f.id for f in found] == ["gpu-throttling"]

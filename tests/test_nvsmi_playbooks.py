"""The GPU-evidenced playbooks on the generated telemetry samples: which GPU, which window, which numbers."""

from __future__ import annotations

import datetime as dt

import pytest

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.conftest import SAMPLES

UTC = dt.timezone.utc


def _finding(folder: str, pid: str):
    a = analyze(Context(ingest(SAMPLES / folder)))
    hits = [f for f in a.findings if f.id == pid]
    assert hits, [(f.id, f.summary) for f in a.findings]
    return hits[0]


def test_low_utilization_median_and_window():
    f = _finding("low-gpu-utilization/data-starved-h100", "low-gpu-utilization")
    # Judged over the training window of the log (start-up and shutdown idle excluded): ~25-30%.
    assert 20 <= f.facts["median_util_pct"] <= 35
    assert sorted(f.facts["per_gpu_median"]) == [0, 1, 2, 3]
    assert f.onset.time == dt.datetime(2025, 3, 5, 14, 3, 58, tzinfo=UTC) and f.onset.file == "dmon.log"
    assert f.causes[0].cause.id == "data_loading"
    # Synthetic sample text is replaced by the real dmon line.
    assert all(e.text.startswith(" 2025030") for e in f.evidence if e.file == "dmon.log")


def test_throttling_names_gpu_reasons_clock_and_steps():
    f = _finding("gpu-throttling/thermal-h100", "gpu-throttling")
    assert f.facts["gpu"] == 2 and f.facts["reasons"] == ["hw_thermal_slowdown", "sw_thermal_slowdown"]
    assert f.facts["sm_clock_usual_mhz"] == 1980.0 and 1185 <= f.facts["sm_clock_mhz"] <= 1410
    assert f.facts["step_ms_throttled"] > 1.3 * f.facts["step_ms_other"]
    assert f.onset.time.replace(microsecond=0) == dt.datetime(2025, 3, 6, 11, 47, 10, tzinfo=UTC)
    assert f.causes[0].cause.id == "cooling"
    assert "Active" in f.evidence[0].text  # the real CSV row with the named reason fields


@pytest.mark.parametrize("folder,needle", [
    ("gpu-hardware-fault/ecc", "GPU 1: uncorrectable ECC errors (volatile) 0 -> 2"),
    ("gpu-hardware-fault/ecc", "GPU 1: a page pending retirement"),
    ("gpu-hardware-fault/lost-gpu", "GPU 5: nvidia-smi reports 'GPU is lost'"),
    ("gpu-hardware-fault/lost-gpu", "GPU 5 missing from dmon (dmon.log)"),
])
def test_hardware_fault_symptoms(folder, needle):
    f = _finding(folder, "gpu-hardware-fault")
    assert any(needle in s for s in f.facts["symptoms"]), f.facts["symptoms"]


def test_shared_gpu_and_mode_flip():
    f = _finding("cuda-context-corruption/shared-gpu", "cuda-context-corruption")
    symptoms = f.facts["symptoms"]
    assert any(s.startswith("GPU 0 ran 4 processes at once (PIDs 7301, 7302, 7303, 7304)") for s in symptoms), symptoms
    assert any(s.startswith("GPU 0 compute mode Default -> Exclusive_Process -> Default") for s in symptoms), symptoms
    assert f.causes[0].cause.id == "shared_gpu"


def test_memory_leak_slope():
    f = _finding("memory-leak/gpu", "memory-leak")
    assert f.facts["gpu"] == 0 and f.facts["r2"] > 0.95
    # ~34 MiB/s simulated growth.
    assert 30 <= f.facts["slope_mib_per_s"] <= 38


def test_oom_foreign_process_from_compute_apps():
    f = _finding("cuda-oom/foreign-process", "cuda-oom")
    assert f.facts["foreign_gpu"] == 1 and f.facts["foreign_pids"] == [2718281] and f.facts["foreign_mib_nvsmi"] == 38912.0
    assert "foreign_process" in [c.cause.id for c in f.causes]
    foreign = next(c for c in f.causes if c.cause.id == "foreign_process")
    assert any(e.file == "compute_apps.csv" and "2718281" in e.text for e in foreign.evidence)


def test_gpu_missing_from_tables_counts_only_in_monitor_captures(tmp_path):
    from tests.helpers import write_run
    from tests.test_nvsmi_table import T325, T410

    snaps = T325 * 3 + T410 * 3  # GPU 1 of the first tables is absent from the later ones
    standalone = analyze(Context(ingest(write_run(tmp_path / "a", {"smi.txt": snaps}))))
    fault = [f for f in standalone.findings if f.id == "gpu-hardware-fault"]
    assert fault and any("GPU 1 missing from nvsmi_table (smi.txt)" in s for s in fault[0].facts["symptoms"])
    # The same tables pasted into a training log may come from different containers: no finding.
    pasted = analyze(Context(ingest(write_run(tmp_path / "b", {"train.log": "step 1 loss 2.0\n" + snaps}))))
    assert not [f for f in pasted.findings if f.id == "gpu-hardware-fault"]

"""GPU-only playbooks never fire on a profiler trace recorded without a GPU: every torch.profiler trace of
sample_logs/ whose events hold no kernel, copy or CUDA runtime call (recorded on CPU by
sample_logs/_scripts/record_traces.sh) is analysed, and none of them may report one of these playbooks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.conftest import ROOT

GPU_ONLY = {"host-device-sync", "kernel-launch-bound", "comm-compute-no-overlap", "low-gpu-utilization"}
# Kineto categories of device work and of the CUDA calls that start it.
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "gpu_user_annotation"}


def _cpu_only(trace: Path) -> bool:
    events = json.loads(gzip.decompress(trace.read_bytes())).get("traceEvents", [])
    return not any(str(e.get("cat", "")).lower() in DEVICE_CATS for e in events)


CPU_TRACES = sorted(t.parent for t in (ROOT / "sample_logs").glob("*/*/*.pt.trace.json.gz") if _cpu_only(t))


def test_the_cpu_recordings_cover_each_gpu_only_shape():
    # The item() sync, the small-op loop and the gloo all-reduce after backward: the shapes these playbooks read on a GPU.
    names = {f"{p.parent.name}/{p.name}" for p in CPU_TRACES}
    assert {"host-device-sync/cpu-only-trace-nearmiss", "kernel-launch-bound/cpu-only-trace-nearmiss",
            "comm-compute-no-overlap/cpu-gloo-trace-nearmiss"} <= names


@pytest.mark.parametrize("folder", CPU_TRACES, ids=[f"{p.parent.name}/{p.name}" for p in CPU_TRACES])
def test_no_gpu_only_finding_on_a_cpu_trace(folder: Path):
    a = analyze(Context(ingest(folder)))
    assert not a.errored, a.errored
    fired = {f.id: f.summary for f in a.findings if f.severity > Severity.INFO and f.id in GPU_ONLY}
    assert fired == {}

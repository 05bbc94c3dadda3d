"""An uncaught `std::bad_alloc` (host heap) is host-memory-exhaustion; Thrust's bad_alloc of a failed cudaMalloc
is cuda-oom, never host RAM."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# ljanyst/ssd-tensorflow#8: the model's graph built on a laptop's RAM; the maintainer: `You've run out of memory.`
SSD = ["[i] Image size:            Size(w=300, h=300)", "[i] Creating the model...",
       "terminate called after throwing an instance of 'std::bad_alloc'", "  what():  std::bad_alloc", "Aborted"]
# tensorflow/tensor2tensor#192: during an evaluation, `Aborted` by the shell.
T2T = ["INFO:tensorflow:Evaluation [2/10]", "INFO:tensorflow:Evaluation [3/10]",
       "terminate called after throwing an instance of 'std::bad_alloc'", "  what():  std::bad_alloc", "Aborted"]
# NVIDIA/cccl#2092 and NVIDIA/MinkowskiEngine#357: Thrust's allocation on the GPU failed.
THRUST = ["terminate called after throwing an instance of 'thrust::THRUST_200400_860_NS::system::detail::bad_alloc'",
          "  what():  std::bad_alloc: cudaErrorMemoryAllocation: out of memory"]
MINKOWSKI = ["/home/geza/workspace/MinkowskiEngine/src/kernel_map.cuh:314 Decomposing 10267625 elements",
             "terminate called after throwing an instance of 'thrust::system::system_error'",
             "  what():  parallel_for failed: cudaErrorMemoryAllocation: out of memory",
             "[1]    4024 abort (core dumped)  python test.py"]
# tensorflow/tensorflow#14885: a thread the process could not start (max user processes), not an allocation.
SYSTEM_ERROR = ["terminate called after throwing an instance of 'std::system_error'",
                "  what():  Resource temporarily unavailable", "Aborted (core dumped)"]


def _problems(tmp_path: Path, lines: list[str]) -> list:
    a: Analysis = analyze(Context(ingest(write_run(tmp_path, {"console.log": "\n".join(lines) + "\n"}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


def test_std_bad_alloc_is_host_memory(tmp_path):
    for i, lines in enumerate((SSD, T2T)):
        top = _problems(tmp_path / str(i), lines)[0]
        assert top.id == "host-memory-exhaustion"
        assert top.evidence[0].line == 3


def test_thrust_bad_alloc_is_device_memory(tmp_path):
    for i, lines in enumerate((THRUST, MINKOWSKI)):
        found = _problems(tmp_path / str(i), lines)
        assert found[0].id == "cuda-oom"
        assert "host-memory-exhaustion" not in {f.id for f in found}


def test_other_cxx_exception_is_no_memory_finding(tmp_path):
    ids = {f.id for f in _problems(tmp_path, SYSTEM_ERROR)}
    assert ids and not ids & {"host-memory-exhaustion", "cuda-oom"}

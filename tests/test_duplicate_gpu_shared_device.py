"""NCCL's `Duplicate GPU detected` (ncclInvalidUsage) means several processes share one GPU: cuda-context-corruption
is the root with the shared-GPU cause, and the NCCL error that carries it is its consequence, whatever the order in
which the lines were pasted. Other NCCL errors stay nccl-timeout's."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def problems(tmp: Path, text: str) -> list:
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


# https://github.com/Peterande/D-FINE/issues/289 (a default GPU set in train.py for every process)
DFINE = """torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3
ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
Last error:
Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 2000
"""
# https://github.com/verl-project/verl/issues/1096: the paste reversed (last line first).
VERL_REVERSED = """Duplicate GPU detected : rank 9 and rank 1 both on CUDA device 34000
 Last error:
ncclInvalidUsage: This usually reflects invalid usage of NCCL library.
torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5
"""
# Near miss, https://github.com/LianjiaTech/BELLE/issues/136: an NCCL system error, no GPU shared.
SYSTEM_ERROR = """NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1169, unhandled system error, NCCL version 21.0.3 ncclSystemError: System call (socket, malloc, munmap, etc) failed.
"""

def test_duplicate_gpu_is_a_shared_gpu_root(tmp_path: Path):
    for i, text in enumerate((DFINE, VERL_REVERSED)):
        found = problems(tmp_path / str(i), text)
        top = found[0]
        assert top.id == "cuda-context-corruption" and top.root_cause, [(f.id, f.summary) for f in found]
        assert top.causes[0].cause.id == "shared_gpu"
        nccl = next(f for f in found if f.id == "nccl-timeout")
        assert nccl.explained_by == ["cuda-context-corruption"]


def test_other_nccl_errors_are_not_a_shared_gpu(tmp_path: Path):
    found = problems(tmp_path, SYSTEM_ERROR)
    assert "cuda-context-corruption" not in {f.id for f in found}
    assert found and found[0].id == "nccl-timeout"

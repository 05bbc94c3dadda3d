"""cuBLAS failing to create its handle (CUBLAS_STATUS_NOT_INITIALIZED at cublasCreate) reads as a GPU out of memory,
unless a kernel's assert came first; NOT_INITIALIZED elsewhere says nothing of memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# karpathy/llama2.c#279 (PyTorch's form; "most probably due to not having enough memory"), the same line in
# QwenLM/Qwen#120 and OpenBMB/VisCPM#3 (maintainers: out of GPU memory).
TORCH = ["Traceback (most recent call last):", '  File "train.py", line 44, in <module>',
         "    return F.linear(input, self.weight, self.bias)",
         "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`"]
# tensorflow/tensorflow#9489 (stream executor's form; "an out-of-memory being masked by" it).
TF = ["2019-02-11 16:42:08.131786: E tensorflow/stream_executor/cuda/cuda_blas.cc:366] failed to create cublas handle: "
      "CUBLAS_STATUS_NOT_INITIALIZED"]
# microsoft/CNTK#1843 (CNTK's form, the handle created in GetCublasHandle).
CNTK = ["CUBLAS failure 1: CUBLAS_STATUS_NOT_INITIALIZED ; GPU=1 ; hostname=TERATORNIS ; expr=cublasCreate(&cuHandle)"]
# A kernel's out-of-bounds index reported first (EleutherAI/lm-evaluation-harness#1689's other reading): the handle
# failure after it is the assert's aftermath.
ASSERT_FIRST = ["../aten/src/ATen/native/cuda/Indexing.cu:1146: indexSelectLargeIndex: block: [12,0,0], thread: [64,0,0] "
                "Assertion `srcIndex < srcSelectDimSize` failed.",
                "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`"]
# cupy/cupy#3935: the status without the handle's call in the line: not read as memory.
CUPY = ["cupy.cuda.cublas.CUBLASError: CUBLAS_STATUS_NOT_INITIALIZED"]


def _problems(tmp_path: Path, lines: list[str]) -> list:
    a: Analysis = analyze(Context(ingest(write_run(tmp_path, {"console.log": "\n".join(lines) + "\n"}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


@pytest.mark.parametrize("lines", [TORCH, TF, CNTK], ids=["pytorch_cublas_create", "tensorflow_create_handle", "cntk_expr"])
def test_handle_creation_failure_is_a_cuda_oom(tmp_path, lines):
    top = _problems(tmp_path, lines)[0]
    assert (top.id, top.causes[0].cause.id) == ("cuda-oom", "demand_above_capacity")
    assert "CUBLAS_STATUS_NOT_INITIALIZED" in top.summary and top.confidence < 0.95
    assert top.evidence[0].line == len(lines)


def test_after_a_device_assert_it_is_the_assert(tmp_path):
    # The index assert names its bound (`srcIndex < srcSelectDimSize`): bad input data, not memory.
    ids = [f.id for f in _problems(tmp_path, ASSERT_FIRST)]
    assert ids[0] == "bad-input-data" and "cuda-oom" not in ids


def test_status_without_the_handle_call_is_not_memory(tmp_path):
    assert "cuda-oom" not in {f.id for f in _problems(tmp_path, CUPY)}

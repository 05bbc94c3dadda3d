"""Which signature wins when several match one line or block, and which events a line gives together."""

from __future__ import annotations

import json

from tests.helpers import events_of, only

# formats.md 2.1 OBS (tests/cases/signatures/cuda_oom.toml, oom_current_this_process): the hint sits on the OOM line.
OOM_LINE = 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 19.68 GiB. GPU 0 has a total capacity of 23.68 GiB of which 11.88 GiB is free. Including non-PyTorch memory, this process has 11.79 GiB memory in use. Of the allocated memory 11.44 GiB is allocated by PyTorch, and 43.59 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)'


def test_oom_runtime_form_beats_the_generic_cuda_error():
    """`CUDA error: out of memory` is an OOM, not the catch-all cuda_error (fallback gives way)."""
    assert events_of("RuntimeError: CUDA error: out of memory").get_column("code").to_list() == ["cuda_oom"]


def test_oom_hint_on_the_same_line_is_not_a_separate_advice_event():
    row = only(OOM_LINE)
    assert row["code"] == "cuda_oom"


def test_specific_cuda_error_suppresses_generic_and_advice_lines_stay_advice():
    ev = events_of(
        "RuntimeError: CUDA error: device-side assert triggered",
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    )
    assert ev.select("line", "code", "severity").rows() == [
        (1, "device_side_assert", "error"),
        (2, "cuda_launch_blocking_advice", "advice"),
        (3, "cuda_launch_blocking_advice", "advice"),
        (4, "cuda_dsa_advice", "advice"),
    ]


def test_nccl_comm_aborted_carries_the_original_timeout():
    ev = events_of('RuntimeError: NCCL communicator was aborted on rank 2.  Original reason for failure was: [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1806151 milliseconds before timing out.')
    codes = dict(zip(ev.get_column("code").to_list(), ev.get_column("fields").to_list(), strict=True))
    assert json.loads(codes["nccl_comm_aborted"])["rank"] == "2"
    assert json.loads(codes["nccl_watchdog_timeout"])["seq"] == "5"
    assert ev.get_column("rank").to_list() == [2, 2]

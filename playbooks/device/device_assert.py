"""device-assert: an asynchronous CUDA error (device-side assert, illegal memory access)."""

from __future__ import annotations

from forensics.playbooks.base import Playbook, declare
from forensics.playbooks.evidence import detection, events, first_message, where

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

CODES = ("device_side_assert", "cuda_kernel_assert", "illegal_memory_access", "misaligned_address", "illegal_instruction",
         "cuda_launch_failure")

PLAYBOOK = declare(
    Playbook(
        id="device-assert",
        title="Asynchronous CUDA kernel error",
        category="device",
        severity=Severity.CRITICAL,
        tables=("events",),
        explains=("nccl-timeout", "silent-hang", "cuda-context-corruption"),
        codes=("cuda_kernel_assert", "cuda_launch_failure", "device_side_assert", "illegal_instruction",
               "illegal_memory_access", "misaligned_address"),
        causes=(
            Cause("index_out_of_range", "An index (label, token id, gather index) is outside its tensor's range",
                  verify="CUDA_LAUNCH_BLOCKING=1 python train.py (the traceback then points at the real op); check labels/ids against num_classes/vocab",
                  fix="Validate labels and token ids in collate_fn; set num_classes / resize_token_embeddings correctly", prior=0.6,
                  playbook="bad-input-data"),
            Cause("kernel_bug", "A custom or library kernel reads or writes out of bounds",
                  verify="compute-sanitizer --tool memcheck python train.py",
                  fix="Fix or update the kernel/extension; fall back to the reference implementation to confirm", prior=0.4),
        ),
        verify="CUDA_LAUNCH_BLOCKING=1 python train.py",
        fix="Find the real failing op with CUDA_LAUNCH_BLOCKING=1, then fix the index or the kernel",
        thresholds={},
        doc="""\
## Symptom
`CUDA error: device-side assert triggered`, `an illegal memory access was encountered`,
`unspecified launch failure`, `misaligned address`, or a kernel assertion line
(`Assertion `t >= 0 && t < n_classes` failed`).

## Why it matters
CUDA errors are reported asynchronously: the Python traceback usually points at a later, innocent
line, so people debug the wrong code. Every later CUDA call on that process fails too.

## Evidence
`events` with these codes. The advice lines that come with them (`CUDA kernel errors might be
asynchronously reported …`, `For debugging consider passing CUDA_LAUNCH_BLOCKING=1`) are not evidence.
A device-side assert is an index check, so it ranks the out-of-range cause first; an illegal memory
access without an assert, or one raised by a Triton kernel (`Triton Error [CUDA]: …`), ranks the
kernel bug first.

## Known false positives
None known: these messages are only printed on a real failure.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Asynchronous CUDA errors; an index assert makes the out-of-range cause likely."""
    ev = events(ctx, CODES)
    if ev.height == 0:
        return None
    text = " ".join(ev.get_column("message").to_list()[:20])
    index_like = any(k in text for k in ("n_classes", "srcIndex < srcSelectDimSize", "index out of", "indexSelect", "IndexKernel", "device-side assert"))
    # A fault raised inside a Triton or custom extension kernel points at that kernel.
    custom_kernel = any(k in text for k in ("Triton Error", "triton", "CUDADriverError"))
    if custom_kernel and not index_like:
        causes = {"kernel_bug": 0.9, "index_out_of_range": 0.3}
    elif index_like:
        causes = {"index_out_of_range": 0.8, "kernel_bug": 0.3}
    else:
        # An illegal address without any assert: a kernel reading or writing out of bounds first.
        causes = {"kernel_bug": 0.7, "index_out_of_range": 0.4}
    row = ev.row(0, named=True)
    return detection(ev, f"CUDA kernel error{where(row)}: {first_message(ev)}", causes, confidence=0.95)

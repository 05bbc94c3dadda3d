"""An OOM is fragmentation only when the reserved-but-unallocated memory alone would hold the request: what stays
reserved at the failure sits in segments partly in use and cannot join the free memory."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# frostinassiky/gtad#30 (PyTorch 1.0-1.3 form, `cached` = reserved minus allocated after the allocator's flush):
# 4 GiB asked, 3.78 GiB cached, 1.75 GiB free; halving the batch fixed it.
GTAD = ("CUDA out of memory. Tried to allocate 4.00 GiB (GPU 0; 10.73 GiB total capacity; 4.41 GiB already allocated; "
        "1.75 GiB free; 3.78 GiB cached)")
# kerrj/lerf#73 (2.x form): 3 GiB asked with 4.84 GiB reserved but unallocated: the cache held the bytes.
LERF = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.00 GiB. GPU 0 has a total capacty of 23.65 "
        "GiB of which 1.66 GiB is free. Including non-PyTorch memory, this process has 20.81 GiB memory in use. Of the "
        "allocated memory 12.09 GiB is allocated by PyTorch, and 4.84 GiB is reserved by PyTorch but unallocated. If "
        "reserved but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See "
        "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF")


def _problems(tmp_path: Path, line: str) -> list:
    a = analyze(Context(ingest(write_run(tmp_path, {"console.log": line + "\n"}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


def test_request_above_the_cached_memory_is_demand(tmp_path):
    found = _problems(tmp_path, GTAD)
    assert "allocator-fragmentation" not in {f.id for f in found}
    assert (found[0].id, found[0].causes[0].cause.id) == ("cuda-oom", "demand_above_capacity")


def test_request_within_the_cached_memory_is_fragmentation(tmp_path):
    assert _problems(tmp_path, LERF)[0].id == "allocator-fragmentation"

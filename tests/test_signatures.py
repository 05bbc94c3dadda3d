"""The signature table on literal lines of reference/formats.md section 2 (and the §1/§4 lines it covers).

Every case names its formats.md section. Each asserts the code, the severity and the extracted
field values; near misses assert that nothing (or only a weaker code) matches.
"""

from __future__ import annotations

import json
import re

import polars as pl
import pytest
from forensics.parsers import signatures
from forensics.parsers.prefixes import split_prefixes

from forensics.contracts.fields import field_expr, size_to_mib


def events_of(*lines: str) -> pl.DataFrame:
    """Signature events of some log lines (prefix splitting included), with `fields` decoded."""
    frame = pl.DataFrame(
        {"line": list(range(1, len(lines) + 1)), "seg": [0] * len(lines), "text": list(lines)},
        schema={"line": pl.Int64, "seg": pl.Int32, "text": pl.String},
    )
    return signatures.extract(split_prefixes(frame, 2024))


def only(line: str) -> dict:
    """The one event a line gives (fields decoded)."""
    ev = events_of(line)
    assert ev.height == 1, ev.select("code", "fields").rows()
    row = ev.row(0, named=True)
    row["fields"] = json.loads(row["fields"])
    return row


# (id, formats.md section, line, code, severity, fields that must be present with these values)
CASES = [
    # --- 2.1 CUDA OOM, sentence form (2.1+) ---
    ("oom_current_this_process", "2.1 OBS",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 19.68 GiB. GPU 0 has a total capacity of 23.68 GiB of which 11.88 GiB is free. Including non-PyTorch memory, this process has 11.79 GiB memory in use. Of the allocated memory 11.44 GiB is allocated by PyTorch, and 43.59 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
     "cuda_oom", "error",
     {"requested": "19.68 GiB", "gpu": "0", "capacity": "23.68 GiB", "free": "11.88 GiB", "this_process": "11.79 GiB",
      "allocated": "11.44 GiB", "reserved_unallocated": "43.59 MiB", "form": "sentence", "device": "CUDA"}),
    ("oom_current_other_process_private_pools", "2.1 OBS",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 546.00 MiB. GPU 0 has a total capacity of 15.77 GiB of which 514.19 MiB is free. Process 562167 has 15.25 GiB memory in use. Of the allocated memory 13.73 GiB is allocated by PyTorch, with 46.00 MiB allocated in private pools (e.g., CUDA Graphs), and 736.86 MiB is reserved by PyTorch but unallocated. If reserved ...",
     "cuda_oom", "error",
     {"requested": "546.00 MiB", "free": "514.19 MiB", "other_pids": "562167", "other_memory": "15.25 GiB",
      "processes": "Process 562167 has 15.25 GiB memory in use.", "private_pools": "46.00 MiB",
      "allocated": "13.73 GiB", "reserved_unallocated": "736.86 MiB"}),
    ("oom_current_no_nvml", "2.1 OBS",
     "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 4.00 GiB of which 2.35 GiB is free. Of the allocated memory 825.15 MiB is allocated by PyTorch, and 24.85 MiB is reserved by PyTorch but unallocated. ...",
     "cuda_oom", "error",
     {"requested": "20.00 MiB", "capacity": "4.00 GiB", "free": "2.35 GiB", "allocated": "825.15 MiB",
      "reserved_unallocated": "24.85 MiB"}),
    ("oom_2_1_typo_capacty", "2.1 version history 2.1 OBS",
     "CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacty of 23.69 GiB of which 7.11 GiB is free. Process 2006998 has 256.00 MiB memory in use. Including non-PyTorch memory, this process has 16.31 GiB memory in use. Of the allocated memory 16.01 GiB is allocated by PyTorch, and 7.47 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
     "cuda_oom", "error",
     {"requested": "8.00 GiB", "capacity": "23.69 GiB", "free": "7.11 GiB", "other_pids": "2006998",
      "other_memory": "256.00 MiB", "this_process": "16.31 GiB", "allocated": "16.01 GiB", "reserved_unallocated": "7.47 MiB"}),
    ("oom_zero_bytes_free", "2.1 notes (0 bytes)",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB of which 0 bytes is free. Of the allocated memory 77.00 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.",
     "cuda_oom", "error", {"gpu": "3", "free": "0 bytes", "capacity": "79.15 GiB"}),
    # --- 2.1 bracket forms (1.0 - 2.0) ---
    ("oom_1_0_cached", "2.1 version history 1.0-1.3 OBS PR #13751",
     "CUDA out of memory. Tried to allocate 16.00 GiB (GPU 0; 11.93 GiB total capacity; 4.00 GiB already allocated; 7.33 GiB free; 179.00 KiB cached)",
     "cuda_oom", "error",
     {"requested": "16.00 GiB", "gpu": "0", "capacity": "11.93 GiB", "allocated": "4.00 GiB", "free": "7.33 GiB",
      "reserved_unallocated": "179.00 KiB", "form": "bracket"}),
    ("oom_1_4_reserved", "2.1 version history ~1.4-1.9 OBS pytorch#32101",
     "RuntimeError: CUDA out of memory. Tried to allocate 152.00 MiB (GPU 0; 31.72 GiB total capacity; 24.89 GiB already allocated; 6.12 MiB free; 30.70 GiB reserved in total by PyTorch)",
     "cuda_oom", "error",
     {"requested": "152.00 MiB", "capacity": "31.72 GiB", "allocated": "24.89 GiB", "free": "6.12 MiB",
      "reserved": "30.70 GiB", "reserved_unallocated": "5949.44 MiB"}),
    ("oom_1_10_hint", "2.1 version history ~1.10-2.0 OBS YingqianWang/iPASSR#9",
     "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 10.73 GiB (GPU 0; 8.00 GiB total capacity; 17.20 GiB already allocated; 0 bytes free; 19.15 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
     "cuda_oom", "error", {"free": "0 bytes", "reserved": "19.15 GiB", "reserved_unallocated": "1996.8 MiB"}),
    ("oom_allowed_fraction", "2.1 version history (memory fraction inserts `{X} allowed; `)",
     "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.90 GiB total capacity; 7.50 GiB already allocated; 7.10 GiB free; 8.00 GiB allowed; 7.60 GiB reserved in total by PyTorch)",
     "cuda_oom", "error", {"allowed": "8.00 GiB", "reserved": "7.60 GiB"}),
    ("oom_thc", "2.1 version history <=0.4 OBS pytorch#465",
     "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/generic/THCStorage.cu:58",
     "cuda_oom", "error", {"form": "thc", "file": "/pytorch/aten/src/THC/generic/THCStorage.cu", "line": "58"}),
    ("oom_thc_check", "2.1 version history <=0.4 (THCudaCheck)",
     "THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=66 error=2 : out of memory",
     "cuda_oom", "error", {"form": "thc", "thc_line": "66"}),
    ("oom_runtime", "2.1 related OOM texts",
     "RuntimeError: CUDA error: out of memory", "cuda_oom", "error", {"form": "runtime", "device": "CUDA"}),
    ("oom_malloc_async", "2.1 cudaMallocAsync [OBS first line]",
     "Allocation on device 0 would exceed allowed memory. (out of memory)", "cuda_oom", "error",
     {"gpu": "0", "form": "cuda_malloc_async"}),
    ("oom_xpu", "2.1 other devices share the sentence form",
     "XPU out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.11 GiB of which 1.00 GiB is free.",
     "cuda_oom", "error", {"device": "XPU", "requested": "2.00 GiB"}),
    ("oom_mps", "2.1 other devices", "RuntimeError: MPS backend out of memory", "mps_oom", "error", {}),
    ("cublas_alloc", "2.1 related OOM texts / 2.7 OBS",
     "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
     "cublas_error", "error", {"status": "CUBLAS_STATUS_ALLOC_FAILED", "call": "cublasCreate"}),
    # --- 2.2 host memory ---
    ("cpu_alloc_posix", "2.2 OBS",
     "RuntimeError: [enforce fail at alloc_cpu.cpp:117] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 2359296 bytes. Error code 12 (Cannot allocate memory)",
     "cpu_alloc_failed", "error", {"requested_bytes": "2359296", "errno": "12", "reason": "Cannot allocate memory"}),
    ("cpu_alloc_windows", "2.2 SRC (Windows/Android)",
     "RuntimeError: [enforce fail at ..\\c10\\core\\impl\\alloc_cpu.cpp:72] data. DefaultCPUAllocator: not enough memory: you tried to allocate 1073741824 bytes.",
     "cpu_alloc_failed", "error", {"requested_bytes": "1073741824"}),
    ("kernel_oom_killer", "2.2 kernel log [REC mm/oom_kill.c]",
     "Out of memory: Killed process 1234 (python) total-vm:123456kB, anon-rss:654321kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1234kB oom_score_adj:0",
     "host_oom_killed", "error", {"pid": "1234", "process": "python", "total_vm": "123456kB", "anon_rss": "654321kB"}),
    ("cgroup_oom_killer", "2.2 cgroup variant",
     "Memory cgroup out of memory: Killed process 4321 (pt_main_thread) total-vm:1kB, anon-rss:2kB",
     "host_oom_killed", "error", {"pid": "4321", "process": "pt_main_thread", "cgroup": "Memory cgroup "}),
    ("slurm_oom", "2.2 Slurm OBS",
     "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=5005.batch. Some of your processes may have been killed by the cgroup out-of-memory handler.",
     "slurm_oom_kill", "error", {"count": "1", "step_id": "5005.batch"}),
    # --- 2.3 DataLoader ---
    ("dl_exited_pids", "2.3 SRC",
     "RuntimeError: DataLoader worker (pid(s) 1234, 1235) exited unexpectedly",
     "dataloader_worker_exited", "error", {"pids": "1234, 1235"}),
    ("dl_exited_code", "2.3 SRC",
     "RuntimeError: DataLoader worker (pid 4321) exited unexpectedly with exit code 1. Details are lost due to multiprocessing. Rerunning with num_workers=0 may give better error trace.",
     "dataloader_worker_exited", "error", {"pids": "4321", "exitcode": "1"}),
    ("dl_killed", "2.3 SRC (trailing space kept)",
     "RuntimeError: DataLoader worker (pid 1817) is killed by signal: Killed. ",
     "dataloader_worker_killed", "error", {"pids": "1817", "signal": "Killed"}),
    ("dl_bus_error", "2.3 SRC SIGBUS hint",
     "RuntimeError: DataLoader worker (pid 77) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
     "dataloader_worker_killed", "error", {"pids": "77", "signal": "Bus error"}),
    ("dl_worker_bus", "2.3 SRC worker stderr",
     "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
     "dataloader_worker_bus_error", "error", {}),
    ("dl_worker_segv", "2.3 SRC worker stderr",
     "ERROR: Unexpected segmentation fault encountered in worker.",
     "dataloader_worker_fault", "error", {"fault": "segmentation fault"}),
    ("dl_worker_fpe", "2.3 SRC worker stderr",
     "ERROR: Unexpected floating-point exception encountered in worker.",
     "dataloader_worker_fault", "error", {"fault": "floating-point exception"}),
    ("dl_too_many_files", "2.3 SRC",
     "RuntimeError: Too many open files. Communication with the workers is no longer possible. Please increase the limit using `ulimit -n` in the shell or change the sharing strategy by calling `torch.multiprocessing.set_sharing_strategy('file_system')` at the beginning of your code",
     "dataloader_too_many_open_files", "error", {}),
    ("dl_timeout", "2.3 REC", "RuntimeError: DataLoader timed out after 120 seconds",
     "dataloader_timeout", "error", {"timeout_s": "120"}),
    ("dl_caught", "2.3 REC", "ValueError: Caught ValueError in DataLoader worker process 0.",
     "dataloader_worker_exception", "error", {"exc_type": "ValueError", "worker": "0"}),
    ("dl_collate", "2.3 SRC newer copy", "RuntimeError: DataLoader collate process (pid 999) exited unexpectedly",
     "dataloader_worker_exited", "error", {"pids": "999", "process": "collate"}),
    # --- 2.4.1 NCCL watchdog, three eras ---
    ("nccl_2_0", "2.4.1 ~PyTorch 2.0 (PR #97066)",
     "[E ProcessGroupNCCL.cpp:464] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=10000) ran for 10917 milliseconds before timing out.",
     "nccl_watchdog_timeout", "error",
     {"rank": "0", "seq": "1", "op": "ALLREDUCE", "timeout_ms": "10000", "elapsed_ms": "10917"}),
    ("nccl_2_2_terminated", "2.4.1 ~2.2/2.3",
     "[rank7]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 7] Process group watchdog thread terminated with exception: [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600017 milliseconds before timing out.",
     "nccl_watchdog_timeout", "error",
     {"pg": "0", "rank": "7", "seq": "1", "op": "BROADCAST", "numel_in": "1", "numel_out": "1",
      "timeout_ms": "600000", "elapsed_ms": "600017"}),
    ("nccl_2_4_glog", "2.4.1 >=2.4",
     "[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
     "nccl_watchdog_timeout", "error",
     {"rank": "1", "seq": "808", "op": "ALLREDUCE", "numel_in": "9801523", "timeout_ms": "600000", "elapsed_ms": "600020"}),
    ("nccl_what_guid", "2.4.1 >=2.4 terminate what()",
     "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with exception: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for 1800011 milliseconds before timing out.",
     "nccl_watchdog_timeout", "error",
     {"pg": "0", "pg_guid": "0(default_pg)", "rank": "3", "seq": "4", "timeout_ms": "1800000", "elapsed_ms": "1800011"}),
    ("nccl_wrapped", "0.1 hazard 5 (hard-wrapped `millisecond\\ns`)",
     "[Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLGATHER, Timeout(ms)=600000) ran for 600123 millisecond",
     "nccl_watchdog_timeout", "error", {"rank": "2", "op": "ALLGATHER", "elapsed_ms": "600123"}),
    ("nccl_work_status_2_2", "2.4.1 ~2.2/2.3",
     "[rank7]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 7] Timeout at NCCL work: 1, last enqueued NCCL work: 1, last completed NCCL work: 3452013982.",
     "nccl_work_status", "error",
     {"pg": "0", "rank": "7", "seq": "1", "last_enqueued": "1", "last_completed": "3452013982"}),
    ("nccl_work_status_2_4", "2.4.1 >=2.4",
     "[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.",
     "nccl_work_status", "error",
     {"pg": "0", "pg_guid": "0(default_pg)", "rank": "1", "seq": "808", "last_enqueued": "811", "last_completed": "807"}),
    ("nccl_ops_failed", "2.4.1 handleException",
     "[rank7]:[E ProcessGroupNCCL.cpp:577] [Rank 7] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
     "nccl_ops_failed", "error", {"rank": "7"}),
    ("nccl_teardown", "2.4.1 handleException",
     "[E ProcessGroupNCCL.cpp:483] To avoid data inconsistency, we are taking the entire process down.",
     "nccl_process_teardown", "info", {}),
    ("terminate_dist", "2.4.1 OBS", "terminate called after throwing an instance of 'c10::DistBackendError'",
     "terminate_called", "error", {"exc_type": "c10::DistBackendError"}),
    ("terminate_cuda", "2.6 background threads", "terminate called after throwing an instance of 'c10::CUDAError'",
     "terminate_called", "error", {"exc_type": "c10::CUDAError"}),
    # --- 2.4.2 heartbeat ---
    ("heartbeat", "2.4.2 OBS LlamaFactory#6953",
     "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1",
     "nccl_heartbeat_timeout", "error", {"pending_work": "1"}),
    ("watchdog_stuck", "2.4.2 OBS",
     "[rank0]:[F ProcessGroupNCCL.cpp:1169] [PG 0 Rank 0] [PG 0 Rank 0] ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api, or other deadlock-prone behaviors.If you suspect the watchdog is not actually stuck and a longer timeout would help, you can either increase the timeout (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC) to a larger value or disable the heartbeat monitor (TORCH_NCCL_ENABLE_MONITORING=0).If either of aforementioned helps, feel free to file an issue to PyTorch about the short timeout or false positive abort; otherwise, please attempt to debug the hang. workMetaList_.size() = 1",
     "nccl_watchdog_stuck", "error", {"stuck_s": "600"}),
    # --- 2.4.3 NCCL errors ---
    ("nccl_error_2_19", "2.4.3 OBS",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
     "nccl_error", "error",
     {"file": "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp", "line": "1691", "reason": "unhandled system error",
      "nccl_version": "2.19.3"}),
    ("nccl_error_async", "2.4.3 watchdog form",
     "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
     "nccl_error", "error", {"reason": "unhandled system error", "nccl_version": "2.20.5"}),
    ("nccl_error_old", "2.4.3 older [REC shape]",
     "RuntimeError: NCCL error in: ../torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8",
     "nccl_error", "error", {"line": "825", "reason": "unhandled system error", "nccl_version": "2.7.8"}),
    ("nccl_error_remote", "2.4.3 ncclGetErrorString table",
     "torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or there was a network error, NCCL version 2.14.3",
     "nccl_error", "error", {"reason": "remote process exited or there was a network error"}),
    ("nccl_detail", "2.4.3 getNcclErrorDetailStr SRC",
     "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
     "nccl_error_detail", "info", {"nccl_code": "ncclSystemError"}),
    ("nccl_detail_remote", "2.4.3 getNcclErrorDetailStr SRC",
     "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
     "nccl_error_detail", "info", {"nccl_code": "ncclRemoteError"}),
    ("nccl_socket", "2.4.3 Last error payload OBS",
     "socketStartConnect: Connect to 10.233.70.50<48425> failed : Software caused connection abort",
     "nccl_socket_connect_failed", "error", {"peer": "10.233.70.50<48425>", "reason": "Software caused connection abort"}),
    ("nccl_shm", "2.4.3 Last error payload OBS",
     "Error while attaching to shared memory segment /dev/shm/nccl-abc (size 0), error: No such file or directory (2)",
     "nccl_shm_attach_failed", "error", {"action": "attaching to", "segment": "/dev/shm/nccl-abc", "size": "0"}),
    # --- 2.4.4 NCCL_DEBUG lines ---
    ("nccl_warn_rccl", "2.4.4 OBS (RCCL)",
     "UVOSLinux:31965:31975 [0] /usr/src/debug/rccl/build/hipify/src/proxy.cc:1573 NCCL WARN [Proxy Service 0] Failed to execute operation Setup from rank 0, retcode 3",
     "nccl_warn", "warning",
     {"host": "UVOSLinux", "pid": "31965", "tid": "31975", "cuda_dev": "0", "line": "1573",
      "detail": "[Proxy Service 0] Failed to execute operation Setup from rank 0, retcode 3"}),
    ("nccl_warn_2_26_ts", "2.4.4 NCCL 2.26-2.28 timestamped WARN",
     "[2025-05-01 12:00:00] host:123:456 [0] file.cc:123 NCCL WARN msg",
     "nccl_warn", "warning", {"host": "host", "file": "file.cc", "detail": "msg"}),
    ("nccl_warn_2_29_func", "2.4.4 NCCL 2.29+ with function",
     "[2025-05-01 12:00:00] host:123:456 [1] transport.cc:99 (ncclTransportP2pSetup) NCCL WARN Connect failed",
     "nccl_warn", "warning", {"cuda_dev": "1", "func": "ncclTransportP2pSetup", "detail": "Connect failed"}),
    ("nccl_version_banner", "2.4.4 version banner", "NCCL version 2.21.5+cuda12.4",
     "nccl_version", "info", {"nccl_version": "2.21.5+cuda12.4"}),
    ("nccl_version_info", "2.4.4 version banner under NCCL_DEBUG=INFO", "node1:1234:1234 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
     "nccl_version", "info", {"nccl_version": "2.18.1+cuda12.1"}),
    ("nccl_network", "2.4.4 useful INFO", "node1:1234:1234 [0] NCCL INFO Using network IB",
     "nccl_network", "info", {"network": "IB"}),
    # --- 2.4.5 store ---
    ("store_timeout", "2.4.5 OBS OpenRLHF#1040",
     "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/3 clients joined.",
     "store_timeout", "error", {"timeout_s": "1801", "joined": "1", "expected": "3"}),
    ("store_timeout_workers", "2.4.5 PR #111805 example",
     "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for workers. 1/2 workers joined.",
     "store_timeout", "error", {"joined": "1", "expected": "2"}),
    ("store_socket", "2.4.5", "torch.distributed.DistStoreError: Socket Timeout", "store_socket_timeout", "error",
     {"exc_type": "torch.distributed.DistStoreError"}),
    ("store_socket_old", "2.4.5 <=1.x TCPStore", "RuntimeError: Socket Timeout", "store_socket_timeout", "error",
     {"exc_type": "RuntimeError"}),
    ("store_bind", "2.4.5",
     "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
     "store_bind_failed", "warning", {"address": "[::]:29500", "errno": "98", "reason": "Address already in use"}),
    # --- 2.5 torchrun ---
    ("torchrun_failed_std", "2.5 key messages (<=2.0 std logging)",
     "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 1622990) of binary: /home/x/bin/python",
     "torchrun_child_failed", "error", {"exitcode": "1", "local_rank": "0", "pid": "1622990", "binary": "/home/x/bin/python"}),
    ("torchrun_failed_glog", "2.5 key messages (~2.4+ glog)",
     "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python",
     "torchrun_child_failed", "error", {"exitcode": "-9", "local_rank": "5", "pid": "2630"}),
    ("torchrun_sigterm_std", "2.5 launcher prefix <=2.0",
     "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 812914 closing signal SIGTERM",
     "torchrun_closing_worker", "info", {"pid": "812914", "signal": "SIGTERM"}),
    ("torchrun_sigterm_2_1", "2.5 launcher prefix ~2.1-2.3",
     "[2024-04-10 16:02:56,193] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 270 closing signal SIGTERM",
     "torchrun_closing_worker", "info", {"pid": "270", "signal": "SIGTERM"}),
    ("torchrun_closing_new", "2.5 newer wording",
     "W0227 17:39:41.936000 293814 site-packages/torch/distributed/elastic/multiprocessing/api.py:766] Closing process 293866 via signal SIGTERM",
     "torchrun_closing_worker", "info", {"pid": "293866", "signal": "SIGTERM"}),
    ("torchrun_death_std", "2.5", "WARNING:torch.distributed.elastic.agent.server.api:Received 2 death signal, shutting down workers",
     "torchrun_death_signal", "warning", {"signal": "2"}),
    ("torchrun_death_glog", "2.5",
     "W0409 07:28:49.530000 1359 torch/distributed/elastic/agent/server/api.py:719] Received 15 death signal, shutting down workers",
     "torchrun_death_signal", "warning", {"signal": "15"}),
    ("torchrun_signal_pid", "2.5 ChildFailedError traceback field", "  traceback : Signal 9 (SIGKILL) received by PID 14750",
     "torchrun_worker_signal", "error", {"signal": "9", "signame": "SIGKILL", "pid": "14750"}),
    # --- 2.6 CUDA runtime ---
    ("dsa_1_x", "2.6 ~1.8-1.13", "RuntimeError: CUDA error: device-side assert triggered", "device_side_assert", "error", {}),
    ("dsa_thc", "2.6 <=0.4/1.0 [REC]",
     "RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/aten/src/THC/generic/THCTensorMath.cu:26",
     "device_side_assert", "error", {"cuda_code": "59"}),
    ("kernel_assert_loss", "2.6 kernel assert lines OBS",
     "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.",
     "cuda_kernel_assert", "error",
     {"file": "../aten/src/ATen/native/cuda/Loss.cu", "line": "250", "kernel": "nll_loss_forward_reduce_cuda_kernel_2d",
      "block": "0,0,0", "thread": "0,0,0", "cond": "t >= 0 && t < n_classes"}),
    ("kernel_assert_windows", "2.6 kernel assert lines (Windows path)",
     "C:\\actions-runner\\_work\\pytorch\\pytorch\\builder\\windows\\pytorch\\aten\\src\\ATen\\native\\cuda\\NLLLoss2d.cu:103: block: [0,0,0], thread: [384,0,0] Assertion `t >= 0 && t < n_classes` failed.",
     "cuda_kernel_assert", "error", {"line": "103", "thread": "384,0,0"}),
    ("kernel_assert_thcunn", "2.6 kernel assert lines (pre-1.9 THCUNN)",
     "/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:108: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.",
     "cuda_kernel_assert", "error", {"file": "/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu"}),
    ("kernel_assert_index", "2.6 kernel assert lines (embedding index)",
     "../aten/src/ATen/native/cuda/Indexing.cu:1292: indexSelectLargeIndex: block: [654,0,0], thread: [120,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
     "cuda_kernel_assert", "error", {"kernel": "indexSelectLargeIndex", "cond": "srcIndex < srcSelectDimSize"}),
    ("illegal_access_2_8", "2.6 ~2.8+ OBS THUDM/slime#1297",
     "torch.AcceleratorError: CUDA error: an illegal memory access was encountered", "illegal_memory_access", "error", {}),
    ("illegal_access_thc", "2.6 THC form",
     "RuntimeError: cuda runtime error (77) : an illegal memory access was encountered at /pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265",
     "illegal_memory_access", "error", {"cuda_code": "77"}),
    ("misaligned", "2.6 cudaGetErrorString", "RuntimeError: CUDA error: misaligned address", "misaligned_address", "error", {}),
    ("illegal_instruction", "2.6 cudaGetErrorString", "RuntimeError: CUDA error: an illegal instruction was encountered",
     "illegal_instruction", "error", {}),
    ("launch_failure", "2.6 cudaGetErrorString", "RuntimeError: CUDA error: unspecified launch failure",
     "cuda_launch_failure", "error", {}),
    ("resource_handle", "2.6 cudaGetErrorString", "RuntimeError: CUDA error: invalid resource handle",
     "invalid_resource_handle", "error", {}),
    ("device_context", "2.6 cudaGetErrorString [REC]", "RuntimeError: CUDA error: invalid device context",
     "invalid_device_context", "error", {"error": "invalid device context"}),
    ("busy", "2.6 cudaGetErrorString", "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
     "cuda_busy_unavailable", "error", {"error": "all CUDA-capable devices are busy or unavailable"}),
    ("busy_obs", "2.6 OBS", "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
     "cuda_busy_unavailable", "error", {}),
    ("ordinal", "2.6 cudaGetErrorString", "RuntimeError: CUDA error: invalid device ordinal",
     "cuda_busy_unavailable", "error", {"error": "invalid device ordinal"}),
    ("ecc", "2.6 cudaGetErrorString / 2.13", "RuntimeError: CUDA error: uncorrectable ECC error encountered", "ecc_error", "error", {}),
    ("no_kernel_image", "2.6 driver/install mismatch OBS",
     "RuntimeError: CUDA error: no kernel image is available for execution on the device", "no_kernel_image", "error", {}),
    ("driver_insufficient", "2.6 OBS", "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
     "cuda_driver_insufficient", "error", {}),
    ("driver_too_old_warning", "2.6 OBS (UserWarning)",
     "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 12080). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver. (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:119.)",
     "cuda_driver_too_old", "error", {"driver_cuda": "12080"}),
    ("driver_too_old", "2.6 OBS", "RuntimeError: The NVIDIA driver on your system is too old (found version 12040).",
     "cuda_driver_too_old", "error", {"driver_cuda": "12040"}),
    ("no_driver", "2.6 REC", "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver",
     "no_nvidia_driver", "error", {}),
    ("cuda_error_unknown", "2.6 cudaGetErrorString (generic fallback)", "RuntimeError: CUDA error: unknown error",
     "cuda_error", "error", {"error": "unknown error"}),
    ("cuda_error_capturing", "2.6 cudaGetErrorString (generic fallback)",
     "RuntimeError: CUDA error: operation not permitted when stream is capturing", "cuda_error", "error",
     {"error": "operation not permitted when stream is capturing"}),
    ("advice_async_new", "2.6 async suffix 2.0+",
     "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
     "cuda_launch_blocking_advice", "advice", {}),
    ("advice_async_old", "2.6 async suffix 1.x (no space after comma)",
     "CUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below might be incorrect.",
     "cuda_launch_blocking_advice", "advice", {}),
    ("advice_launch_blocking", "2.6 async suffix", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
     "cuda_launch_blocking_advice", "advice", {}),
    ("advice_dsa", "2.6 DSA line", "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
     "cuda_dsa_advice", "advice", {}),
    ("advice_search", "2.6 help line ~2.8+",
     "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.",
     "cuda_error_lookup_advice", "advice", {"cuda_error_name": "cudaErrorIllegalAddress"}),
    ("advice_log_file", "2.6 newest main", "For more detailed error information, run with CUDA_LOG_FILE=stderr",
     "cuda_log_file_advice", "advice", {}),
    # --- 2.7 cuDNN / cuBLAS ---
    ("cudnn_not_supported", "2.7 SRC",
     "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input.",
     "cudnn_error", "error", {"status": "CUDNN_STATUS_NOT_SUPPORTED"}),
    ("cudnn_internal", "2.7 OBS", "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR", "cudnn_error", "error",
     {"status": "CUDNN_STATUS_INTERNAL_ERROR"}),
    ("cudnn_old_spelling", "2.7 very old spelling", "RuntimeError: CuDNN error: CUDNN_STATUS_EXECUTION_FAILED", "cudnn_error", "error",
     {"status": "CUDNN_STATUS_EXECUTION_FAILED"}),
    ("cudnn_algo", "2.7 REC", "RuntimeError: Unable to find a valid cuDNN algorithm to run convolution",
     "cudnn_no_algorithm", "error", {}),
    ("cublas_exec", "2.7 REC",
     "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, CUBLAS_GEMM_DFALT_TENSOR_OP)`",
     "cublas_error", "error", {"status": "CUBLAS_STATUS_EXECUTION_FAILED", "call": "cublasGemmEx"}),
    ("cublas_init", "2.7 OBS", "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
     "cublas_error", "error", {"status": "CUBLAS_STATUS_NOT_INITIALIZED"}),
    # --- 2.8 autograd ---
    ("inplace_anomaly_on", "2.8 OBS (anomaly mode on)",
     "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.cuda.FloatTensor [256, 1]], which is output 0 of TBackward, is at version 40001; expected version 40000 instead. Hint: the backtrace further above shows the operation that failed to compute its gradient. The variable in question was changed in there or anywhere later. Good luck!",
     "inplace_autograd_error", "error",
     {"tensor_type": "torch.cuda.FloatTensor", "shape": "256, 1", "output": "0", "grad_fn": "TBackward",
      "version": "40001", "expected_version": "40000"}),
    ("inplace_anomaly_off", "2.8 OBS (anomaly mode off)",
     "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [4096, 128]], which is output 0 of AsStridedBackward0, is at version 2; expected version 1 instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True).",
     "inplace_autograd_error", "error", {"grad_fn": "AsStridedBackward0", "version": "2", "expected_version": "1"}),
    ("inplace_leaf", "2.8 leaf form",
     "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.cuda.FloatTensor [10, 1, 1024, 1024]] is at version 7; expected version 5 instead.",
     "inplace_autograd_error", "error", {"shape": "10, 1, 1024, 1024", "version": "7", "expected_version": "5"}),
    ("anomaly_nan", "2.8 SRC engine.cpp", "RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.",
     "anomaly_nan", "error", {"grad_fn": "LogSoftmaxBackward0", "output": "0"}),
    ("anomaly_warning", "2.8 REC",
     "UserWarning: Error detected in LogSoftmaxBackward0. Traceback of forward call that caused the error:",
     "anomaly_forward_trace", "warning", {"grad_fn": "LogSoftmaxBackward0"}),
    ("backward_twice_new", "2.8 OBS",
     "RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved tensors after calling backward.",
     "backward_twice", "error", {}),
    ("backward_twice_old", "2.8 pre-1.9",
     "RuntimeError: Trying to backward through the graph a second time, but the buffers have already been freed. Specify retain_graph=True when calling backward the first time.",
     "backward_twice", "error", {}),
    ("no_grad_fn", "2.8", "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
     "no_grad_fn", "error", {"index": "0"}),
    # --- 2.9 device mismatch, all forms ---
    ("device_form1", "2.9 form 1 (<=1.10)",
     "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
     "device_mismatch", "error", {"device_a": "cuda:0", "device_b": "cpu", "form": "found_two"}),
    ("device_form2", "2.9 form 2 (~1.11-2.4)",
     "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:0! (when checking argument for argument index in method wrapper__index_select)",
     "device_mismatch", "error", {"device_a": "cpu", "device_b": "cuda:0", "argument": "index", "method": "wrapper__index_select"}),
    ("device_form3", "2.9 form 3 (~2.5+)",
     "RuntimeError: Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)",
     "device_mismatch", "error",
     {"argument": "index", "device_a": "cpu", "device_b": "cuda:0", "method": "wrapper_CUDA__index_select", "form": "got_is_on"}),
    ("device_form4", "2.9 form 4 (~2.5+)",
     "RuntimeError: Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)",
     "device_mismatch", "error", {"argument": "mat1", "method": "wrapper_CUDA_addmm"}),
    # --- 2.10 DDP / collectives ---
    ("ddp_unused", "2.10 OBS",
     "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss.",
     "ddp_unused_parameters", "error", {}),
    ("ddp_indices", "2.10 newer builds", "Parameter indices which did not receive grad for rank 0: 2 217 394",
     "ddp_unused_parameter_list", "info", {"rank": "0", "params": "2 217 394"}),
    ("ddp_names", "2.10 DETAIL [REC]", "Parameters which did not receive grad for rank 3: module.head.weight, module.head.bias",
     "ddp_unused_parameter_list", "info", {"rank": "3", "params": "module.head.weight, module.head.bias"}),
    ("collective_mismatch", "2.10 SRC ProcessGroupWrapper.cpp",
     "RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=18, OpType=ALLGATHER, TensorShape=[4], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, …)), but Rank 2 is running collective: CollectiveFingerPrint(OpType=ALLGATHER).",
     "collective_mismatch", "error",
     {"rank": "0", "other_rank": "2", "seq": "18", "op": "ALLGATHER", "other_op": "ALLGATHER",
      "other_collective": "CollectiveFingerPrint(OpType=ALLGATHER)"}),
    # --- 2.11 FSDP ---
    ("fsdp_grad_2_0", "2.11 ~2.0", "ValueError: `FlatParameter` requires uniform `requires_grad`",
     "fsdp_requires_grad_mismatch", "error", {}),
    ("fsdp_grad_2_1", "2.11 ~2.1+", "ValueError: Must flatten tensors with uniform `requires_grad` when `use_orig_params=False`",
     "fsdp_requires_grad_mismatch", "error", {}),
    ("fsdp_dtype_old", "2.11", "ValueError: `FlatParameter` requires uniform dtype but got torch.float16 and torch.float32",
     "fsdp_dtype_mismatch", "error", {"dtype_a": "torch.float16", "dtype_b": "torch.float32"}),
    ("fsdp_dtype_new", "2.11", "ValueError: Must flatten tensors with uniform dtype but got torch.bfloat16 and torch.float32",
     "fsdp_dtype_mismatch", "error", {"dtype_a": "torch.bfloat16", "dtype_b": "torch.float32"}),
    ("mat_dtype", "2.11 OBS trl#1723", "RuntimeError: mat1 and mat2 must have the same dtype, but got Float and Half",
     "dtype_mismatch", "error", {"operands": "mat1 and mat2", "dtype_a": "Float", "dtype_b": "Half"}),
    ("zero3_weight", "2.11 [REC]", "RuntimeError: 'weight' must be 2-D", "param_not_gathered", "error", {}),
    # --- 2.12 dynamo ---
    ("dynamo_cache_limit", "2.12 OBS ~2.4",
     "W1031 00:31:42.775483 139927651080000 torch/_dynamo/convert_frame.py:762] [0/8] torch._dynamo hit config.cache_size_limit (8)",
     "dynamo_recompile_limit", "warning", {"frame_id": "0", "compile_id": "8", "limit_name": "cache_size_limit", "limit": "8"}),
    ("dynamo_recompile_limit", "2.12 newer knob", "torch._dynamo hit config.recompile_limit (8)",
     "dynamo_recompile_limit", "warning", {"limit_name": "recompile_limit", "limit": "8"}),
    ("dynamo_old", "2.12 oldest form (2.0)", "torch._dynamo hit config.cache_size_limit (64)",
     "dynamo_recompile_limit", "warning", {"limit": "64"}),
    ("dynamo_reason", "2.12 OBS",
     "W1031 00:31:42.775483 139927651080000 torch/_dynamo/convert_frame.py:762] [0/8]    last reason: tensor 'L['input_ids']' stride mismatch at index 0. expected 19, actual 27",
     "dynamo_recompile_reason", "info",
     {"frame_id": "0", "compile_id": "8", "reason": "tensor 'L['input_ids']' stride mismatch at index 0. expected 19, actual 27"}),
    ("dynamo_recompiling", "2.12 TORCH_LOGS=recompiles OBS", "Recompiling function fn in /path/playground.py:3",
     "dynamo_recompile", "info", {"function": "fn", "location": "/path/playground.py:3"}),
    # --- 2.13 kernel log ---
    ("xid_79_fixture", "2.13 fixture", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus.",
     "xid", "error", {"pci": "0000:3b:00", "xid": "79", "pid": "1", "process": "python3", "detail": "GPU has fallen off the bus."}),
    ("xid_79_nvsentinel", "2.13 NVSentinel#155", "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
     "xid", "error", {"pci": "0000:44:00", "xid": "79", "detail": "GPU has fallen off the bus"}),
    ("xid_63", "2.13 OBS",
     "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.",
     "xid", "error", {"xid": "63", "pid": "1896", "detail": "Row Remapper: New row marked for remapping, reset gpu to activate."}),
    ("xid_31", "2.13 OBS",
     "NVRM: Xid (PCI:0000:08:00): 31, Ch 0000003b, intr 10000000. MMU Fault: ENGINE GRAPHICS HUBCLIENT_SCC faulted @ 0x0_04687000. Fault is of type FAULT_PDE ACCESS_TYPE_READ",
     "xid", "error", {"pci": "0000:08:00", "xid": "31"}),
    ("xid_32_name", "2.13 OBS",
     "NVRM: Xid (PCI:0000:01:00): 32, pid=2096908, name=kf-phys-oracle, channel 0x00000007 intr1 00000004 HCE_DBG0 00000300 HCE_DBG1 0000118e",
     "xid", "error", {"xid": "32", "pid": "2096908", "process": "kf-phys-oracle"}),
    ("xid_dmesg_T", "2.13 with `dmesg -T` stamp", "[Mon May 25 12:34:56 2026] NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.",
     "xid", "error", {"kernel_time": "Mon May 25 12:34:56 2026", "xid": "79"}),
    ("sxid", "2.13 NVSwitch fixture", "nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 11001, Fatal, ingress invalid command",
     "sxid", "error", {"pci": "0000:00:00.0", "sxid": "11001", "class": "Fatal", "detail": "ingress invalid command"}),
    ("fallen_off", "2.13 multi-line form OBS", "               NVRM: fallen off the bus and is not responding to commands.",
     "gpu_fallen_off_bus", "error", {}),
    # --- 2.14 / §1 NaN and overflow messages ---
    ("loss_is_nan", "2.14 DETR/DeiT engine.py", "Loss is nan, stopping training", "nan_loss_message", "error", {"value": "nan"}),
    ("loss_is_inf", "2.14 torchvision references", "Loss is inf, stopping training", "nan_loss_message", "error", {"value": "inf"}),
    ("lightning_not_finite", "1.4 / 2.14 Lightning EarlyStopping",
     "Monitored metric val_loss = tensor(nan) is not finite. Previous best value was 0.123. Signaling Trainer to stop.",
     "nonfinite_metric_stop", "error", {"metric": "val_loss", "value": "tensor(nan)"}),
    ("fairseq_min_scale", "1.10 / 2.14",
     "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the learning rate, using gradient clipping or increasing the batch size.",
     "loss_scale_min_reached", "error", {"scale": "0.0001"}),
    ("deepspeed_min_scale", "1.3 / 2.14", "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
     "loss_scale_min_reached", "error", {}),
    ("megatron_nan_08", "1.2 core_r0.8",
     "AssertionError: Rank 3: found NaN in local forward loss calculation. Device: 3, node: node-001",
     "megatron_nan_check", "error", {"rank": "3", "kind": "NaN", "where": "forward loss calculation", "device": "3", "node": "node-001"}),
    ("megatron_nan_grad", "1.2 first version",
     "Rank 5: found NaN in local grad norm in backwards pass. Device: 5, node: gpu12",
     "megatron_nan_check", "error", {"rank": "5", "where": "grad norm in backwards pass"}),
    ("megatron_rerun", "1.2 HEAD rerun state machine",
     "RuntimeError: Rank 2, node gpu-17, device 2, iteration 1200: Unexpected result nan (message='found NaN in local forward loss calculation')",
     "megatron_unexpected_result", "error", {"rank": "2", "node": "gpu-17", "step": "1200", "result": "nan"}),
    ("megatron_rerun2", "1.2 HEAD rerun state machine, second form",
     "Unexpected result inf on rank 4 at iteration #77 invocation #1 (message='found Inf in local forward loss calculation')",
     "megatron_unexpected_result", "error", {"rank": "4", "step": "77", "result": "inf", "invocation": "1"}),
    ("ds_overflow_hyst", "1.3 OBS DeepSpeed#931",
     "[2023-04-28 06:51:29,903] [INFO] [loss_scaler.py:188:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, but hysteresis is 2. Reducing hysteresis to 1",
     "fp16_overflow", "warning", {"rank": "0", "prev_scale": "65536", "hysteresis": "2", "framework": "deepspeed"}),
    ("ds_overflow", "1.3 OBS DeepSpeed#931",
     "[2023-04-28 06:51:30,648] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
     "fp16_overflow", "warning", {"prev_scale": "65536", "new_scale": "32768"}),
    ("deepscale_overflow", "1.3 <=v0.6.0 OBS transformers#9996",
     "[deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 134217728.0, reducing to 67108864.0",
     "fp16_overflow", "warning", {"prev_scale": "134217728.0", "new_scale": "67108864.0"}),
    ("ds_fused_overflow", "1.3 fused optimizer",
     "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 1024, reducing to 512",
     "fp16_overflow", "warning", {"prev_scale": "1024", "new_scale": "512"}),
    ("apex_overflow", "1.5 SRC", "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0",
     "fp16_overflow", "warning", {"loss_id": "0", "new_scale": "32768.0", "framework": "apex"}),
    ("fairseq_overflow", "1.10 current", "NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 64.0",
     "fp16_overflow", "warning", {"new_scale": "64.0", "framework": "fairseq"}),
    ("fairseq_overflow_old", "1.10 older OBS fairseq#1967", "NOTE: overflow detected, setting loss scale to: 64.0",
     "fp16_overflow", "warning", {"new_scale": "64.0"}),
    ("colossal_overflow", "1.12 SRC", "Overflow occurs, the loss scale is adjusted to 32768.0",
     "fp16_overflow", "warning", {"new_scale": "32768.0", "framework": "colossalai"}),
    ("lr_sched_warning", "1.6 OBS",
     "UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and later, you should call them in the opposite order: `optimizer.step()` before `lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first value of the learning rate schedule. See more details at https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
     "lr_scheduler_before_optimizer", "warning", {}),
    ("gradscaler_no_inf", "1.6 OBS", "AssertionError: No inf checks were recorded for this optimizer.",
     "gradscaler_no_inf_checks", "error", {}),
    ("gradscaler_unscale_twice", "1.6 SRC",
     "RuntimeError: unscale_() has already been called on this optimizer since the last update().",
     "gradscaler_misuse", "error", {"detail": "unscale_() has already been called on this optimizer since the last update()"}),
    ("gradscaler_fp16", "1.6 SRC", "ValueError: Attempting to unscale FP16 gradients.", "gradscaler_misuse", "error",
     {"detail": "Attempting to unscale FP16 gradients"}),
    ("gradscaler_no_cuda", "1.6 SRC", "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
     "gradscaler_disabled", "warning", {}),
    ("accelerate_no_bs", "1.7 SRC", "RuntimeError: No executable batch size found, reached zero.",
     "accelerate_no_batch_size", "error", {}),
    ("accelerate_kernel", "1.7 SRC",
     "Detected kernel version 4.15.0, which is below the recommended minimum of 5.5.0; this can cause the process to hang. It is recommended to upgrade the kernel to the minimum version or higher.",
     "kernel_version_warning", "warning", {"version": "4.15.0", "min_version": "5.5.0"}),
    ("ds_launcher_exit", "1.3 launcher SRC",
     "[2023-05-17 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py'] exits with return code = -9",
     "deepspeed_launcher_exit", "error", {"exitcode": "-9"}),
    ("megatron_sigterm", "1.2 lifecycle", "exiting program after receiving SIGTERM.", "preemption_exit", "warning", {}),
    # --- 4 memory printouts ---
    ("summary_ooms", "4.2 memory_summary counts line",
     "|            CUDA OOMs: 2            |        cudaMalloc retries: 0         |",
     "memory_summary_ooms", "warning", {"ooms": "2"}),
    ("summary_retries", "4.2 memory_summary counts line",
     "|            CUDA OOMs: 0            |        cudaMalloc retries: 17        |",
     "memory_summary_alloc_retries", "warning", {"retries": "17"}),
    ("gpu_processes", "4.3 list_gpu_processes SRC", "process      12345 uses     1234.567 MB GPU memory",
     "gpu_process_memory", "info", {"pid": "12345", "memory_mb": "1234.567"}),
    # --- advice hints of the OOM message when printed on their own line ---
    ("advice_expandable", "2.1 current hint",
     "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
     "expandable_segments_advice", "advice", {}),
    ("advice_max_split", "2.1 ~1.10-2.0 hint",
     "If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
     "max_split_size_advice", "advice", {}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_signature_on_formats_md_line(case):
    _id, _section, line, code, severity, expected = case
    ev = events_of(line)
    assert ev.height >= 1, f"no event for {_id}"
    row = ev.filter(pl.col("code") == code)
    assert row.height == 1, ev.select("code", "fields").rows()
    got = row.row(0, named=True)
    assert got["severity"] == severity
    fields = json.loads(got["fields"])
    for key, value in expected.items():
        assert fields.get(key) == value, (key, fields)
    assert got["line"] == 1 and got["end_line"] == 1


def test_every_signature_has_a_case():
    """Each [[signature]] row (not just each code) matches at least one literal line above."""
    lines = pl.Series([c[2] for c in CASES + REAL_CASES] + EXTRA_LINES + [n[0] for n in NEAR_MISSES if n[1]] + _case_file_lines())
    for sig in signatures.load():
        hit = lines.str.contains(sig.regex) & lines.str.contains_any(list(sig.needles), ascii_case_insensitive=True)
        assert hit.any(), f"{sig.code} ({sig.source}) has no test line"


def _case_file_lines() -> list[str]:
    """Input lines of the signature cases kept as data (tests/cases/signatures/<code>.toml)."""
    import tomllib
    from pathlib import Path

    folder = Path(__file__).parent / "cases" / "signatures"
    return [ln for p in sorted(folder.glob("*.toml")) for c in tomllib.loads(p.read_text(encoding="utf-8")).get("case", [])
            for ln in c["lines"]]


# Lines of forms whose code another case already covers, kept for the per-row coverage check.
EXTRA_LINES = [
    "Currently allocated     : 1.50 GiB",  # cuda_oom_detail (REC)
    "RuntimeError: NCCL Error 2: unhandled system error",  # torch nccl.cpp 1.x, OBS amdegroot/ssd.pytorch#577
    "RuntimeError: NCCL communicator was aborted on rank 2.  Original reason for failure was: [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1806151 milliseconds before timing out.",
    "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([32001, 4096]) from checkpoint, the shape in current model is torch.Size([32000, 4096]).",
    "Timeout (0:10:00)!",
    'Thread 2893 (idle): "MainThread"',
    "    - tensor 'L['x']' size mismatch at index 0. expected 19, actual 21",  # dynamo_recompile_reason list line, prefix stripped (OBS pytorch#110325)
    "RuntimeError: [enforce fail at inline_container.cc:747] . open file failed with strerror: Permission denied",
    # Heads of lines a paste wrapped (partial forms; parsers/followups.py joins the rest back on).
    "ctive operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for 1800011 millisecond",  # OBS open-r1#620
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",  # OBS TinyLLaVA_Factory#112
    "[ 4018.450000] Killed process 935 (python) total-vm:113656kB, anon-rss:102104kB, file-rss:0kB, shmem-rss:0kB",
    "zsh: segmentation fault (core dumped)  python train.py",
    "FatalError: `Segmentation fault` is detected by the operating system.",
    "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True. Excessive recompilations",
    "torch._dynamo.exc.Unsupported: Failed to trace builtin operator",
    "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
    "RuntimeError: NPU out of memory. Tried to allocate 5.03 GiB (NPU 3; 60.96 GiB total capacity; 49.47 GiB already allocated; 49.47 GiB current active; 1.32 GiB free; 57.55 GiB reserved in total by PyTorch)",
    "NPU out of memory. Tried to allocate more than 1EB memory",
    "level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
]


def test_oom_runtime_form_beats_the_generic_cuda_error():
    """`CUDA error: out of memory` is an OOM, not the catch-all cuda_error (fallback gives way)."""
    assert events_of("RuntimeError: CUDA error: out of memory").get_column("code").to_list() == ["cuda_oom"]


def test_oom_hint_on_the_same_line_is_not_a_separate_advice_event():
    row = only(CASES[0][2])
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
    ev = events_of(EXTRA_LINES[2])
    codes = dict(zip(ev.get_column("code").to_list(), ev.get_column("fields").to_list(), strict=True))
    assert json.loads(codes["nccl_comm_aborted"])["rank"] == "2"
    assert json.loads(codes["nccl_watchdog_timeout"])["seq"] == "5"
    assert ev.get_column("rank").to_list() == [2, 2]


def test_rank_from_the_message_fills_an_unprefixed_line():
    row = only("[E ProcessGroupNCCL.cpp:737] [Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802210 milliseconds before timing out.")
    assert row["rank"] == 6 and row["fields"]["rank"] == "6"


def test_prefix_rank_and_glog_time_are_kept():
    row = only("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.")
    assert row["rank"] == 1
    assert str(row["ts"]) == "2024-06-26 06:24:44.903881+00:00"


def test_nccl_warn_timestamp_of_nccl_2_26_becomes_the_event_time():
    row = only("[2025-05-01 12:00:00] host:123:456 [0] file.cc:123 NCCL WARN msg")
    assert row["code"] == "nccl_warn" and str(row["ts"]) == "2025-05-01 12:00:00+00:00"


def test_dmesg_ctime_stamp_becomes_the_event_time():
    row = only("[Mon May 25 12:34:56 2026] NVRM: Xid (PCI:0000:1a:00): 79, GPU has fallen off the bus.")
    assert str(row["ts"]) == "2026-05-25 12:34:56+00:00"


def test_megatron_iteration_fills_step():
    ev = events_of("RuntimeError: Rank 2, node gpu-17, device 2, iteration 1200: Unexpected result nan (message='found NaN in local forward loss calculation')")
    row = ev.filter(pl.col("code") == "megatron_unexpected_result").row(0, named=True)
    assert row["step"] == 1200 and row["rank"] == 2


NEAR_MISSES = [
    # prose mentioning out of memory
    ("If you run out of memory, try reducing the batch size.", set()),
    ("Note: CUDA out of memory errors are common with large batches", set()),
    ("warning: the host may run out of memory: Killed processes are logged by the kernel", set()),
    # Python source quoted in a traceback is code, not an event
    ('    raise RuntimeError("DataLoader worker (pid 1234) is killed by signal: Killed. ")', set()),
    # a bare `Killed` proves nothing about the OOM killer: weak code only
    ("Killed", {"process_killed"}),
    ("./train.sh: line 12: 123456 Killed                  python train.py --bs 64", {"process_killed"}),
    # words that look like the needles
    ("Killed 3 stale workers after the epoch", set()),
    ("Epoch 3 aborted by user; resuming", set()),
    ("loss is nan-free so far, continuing", set()),
    ("the NCCL version is 2.18.1", set()),
    ("Tried to allocate memory for the cache", set()),
    ("checking for Xid errors in dmesg", set()),
    ("we saw no DataLoader worker (pid?) failures", set()),
    # advice alone stays advice
    ("For debugging consider passing CUDA_LAUNCH_BLOCKING=1", {"cuda_launch_blocking_advice"}),
    # memory summary with zero counters signals nothing
    ("|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |", set()),
    # a Python warning falls back to python_warning only when nothing specific matches
    ("/usr/lib/python3/site-packages/foo.py:12: UserWarning: something odd", {"python_warning"}),
    # a Rendezvous word inside a traceback frame is not an error line
    ('  File "/x/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", line 1, in next_rendezvous', set()),
    # a data loader that skips an empty sample is not an OOM recovery
    ("Skipping batch 12: no valid boxes", set()),
    # a tokenizer mismatch warning, not a dynamo guard failure
    ("  - vocab size mismatch at index lookup: 32000 vs 32001", set()),
    # helper-events near misses: waiting is not timing out, chatter around the new codes
    ("Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 (world_size=4, worker_count=8, timeout=0:30:00)", set()),
    ("INFO: job 12345 was not CANCELLED AT all, it finished", set()),
    ("srun: error: Unable to allocate resources: Requested time limit is invalid (missing or exceeds some limit)", set()),
    ("    raise RuntimeError('received %d items of ancdata' %", set()),
    ("Expected object of scalar type Float but got scalar type Double for argument #2 'target'", set()),
    ("process 0 terminated with exit code 0 after training finished", set()),
    ("Loss in not finite. Skip this training step.", set()),
    ("loss became NaN? check the learning rate", set()),
    # a JIT build failure of a C++/CUDA extension is not a training process death
    ("subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.", set()),
    ("Killed 3 stale workers after the epoch 100%|#####| 3/3 [00:01<00:00]", set()),
    ("FileNotFoundError: File config.yaml does not exist", set()),
    ("if No CUDA GPUs are available we fall back to the CPU", set()),
    # ENOSPC of a /dev/shm segment is shared memory, not a full checkpoint disk
    ("RuntimeError: unable to write to file </torch_8289_606636967_0>: No space left on device (28)", {"shared_memory_error"}),
]


@pytest.mark.parametrize("line,codes", NEAR_MISSES, ids=[n[0][:40] for n in NEAR_MISSES])
def test_near_misses(line, codes):
    assert set(events_of(line).get_column("code").to_list()) == codes


def test_size_to_mib():
    s = pl.DataFrame({"s": ["20.00 MiB", "0 bytes", "4.00 GiB", "512 bytes", "1.50 KiB", "2 GB", "nonsense", None]})
    got = s.select(size_to_mib(pl.col("s"))).to_series().to_list()
    assert got[:6] == [20.0, 0.0, 4096.0, 512 / 1048576, 1.5 / 1024, 2048.0]
    assert got[6] is None and got[7] is None


def test_field_expr_reads_fields_json():
    ev = events_of(CASES[0][2])
    got = ev.select(size_to_mib(field_expr("requested")).alias("req")).item()
    assert got == pytest.approx(19.68 * 1024)


def test_table_rows_are_well_formed():
    sigs = signatures.load()
    assert sigs and all(s.severity in signatures.SEVERITIES for s in sigs)
    for s in sigs:
        assert re.compile(s.regex).groups == len(re.compile(s.regex).groupindex), s.code
        assert "(?=" not in s.regex and "(?!" not in s.regex and "(?<" not in s.regex.replace("(?P<", "")


def test_every_code_is_documented_in_the_table_header():
    head = signatures.TABLE.read_text(encoding="utf-8").split("[macros]")[0]
    listed = set(re.findall(r"\b[a-z][a-z0-9_]*\b", head))
    assert set(signatures.codes()) <= listed


# Real lines for signatures beyond formats.md §2: seen in public logs (code index / issues) or recorded here.
REAL_CASES = [
    ("cuda_driver_init_runtime_error", "OBS Kai-46/ARF-svox2#9",
     "RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.",
     "cuda_init_failed", "error", {"form": "runtime_error", "detail": "CUDA driver initialization failed, you might not have a CUDA gpu"}),
    ("hf_hub_oserror", "OBS state-spaces/mamba#539 (title) / ZiqiaoPeng/SyncTalk#162",
     "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files and it looks like facebook/hubert-large-ls960-ft is not the path to a directory containing a file named config.json.",
     "hf_hub_unreachable", "error", {"endpoint": "https://huggingface.co", "repo": "facebook/hubert-large-ls960-ft", "file": "config.json"}),
    ("hf_hub_local_entry", "OBS yuruotong1/autoMate#104",
     "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying to locate the file on the Hub and we cannot find the requested files in the local cache. Please check your connection and try again or make sure your Internet connection is on.",
     "hf_hub_unreachable", "error", {"form": "local_entry", "detail": "An error happened while trying to locate the file on the Hub and we cannot find the requested files in the local cache"}),
    ("state_dict_inline_missing", "OBS ankitajaiswal00/Try-First#26",
     'RuntimeError: Error(s) in loading state_dict for DataParallel: Missing key(s) in state_dict: "module.conv1.weight", "module.bn1.weight",',
     "state_dict_mismatch", "error", {"model": "DataParallel", "missing_key": "module.conv1.weight"}),
    ("dump_signal_peer", "OBS code index log (PyTorch >=2.4)",
     "[rank6]:[E703 21:51:54.112142364 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 6] Received a dump signal due to a collective timeout from  rank 7 and we will try our best to dump the debug info. Last enqueued NCCL work: 56116, last completed NCCL work: 56116.This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run.",
     "nccl_dump_signal", "warning", {"from_rank": "7", "last_enqueued": "56116", "last_completed": "56116"}),
    ("dump_signal_local", "OBS code index log",
     "[rank0]:[E709 17:05:38.482119928 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 0] Received a dump signal due to a collective timeout from this local rank and we will try our best to dump the debug info. Last enqueued NCCL work: 20589, last completed NCCL work: 20584.This is most likely caused by incorrect usages of collectives",
     "nccl_dump_signal", "warning", {"from_local": "this local rank", "last_enqueued": "20589", "last_completed": "20584"}),
    ("ib_completion_new", "OBS code index log (NCCL 2.2x, timestamped WARN)",
     "[2026-03-03 12:11:38] tpgds-aihub0007:185303:186751 [1] transport/net_ib.cc:2453 NCCL WARN NET/IB: Got completion from peer 10.99.91.63<51161> with status=4 opcode=32614 len=32614 vendor err 81 (Send) localGid ::ffff:10.99.92.59 remoteGids::ffff:10.99.91.63 hca mlx5_1",
     "nccl_ib_completion_error", "error", {"peer": "10.99.91.63<51161>", "status": "4"}),
    ("ib_completion_old", "OBS code index log (older NCCL)",
     "node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer 10.2.0.5<33092> with error 12, opcode 0, len",
     "nccl_ib_completion_error", "error", {"peer": "10.2.0.5<33092>", "error": "12"}),
    ("ib_completion_named", "OBS code index log",
     "NET/IB: Got completion from peer 10.153.235.13<40554> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV_RDMA_WITH_IMM(129) vendor_err=129 localGid ::ffff:1.1.2.2 remoteGids::ffff:1.1.1.4 hca mlx5_1",
     "nccl_ib_completion_error", "error", {"status": "IBV_WC_RETRY_EXC_ERR(12)"}),
    ("listen_failed", "OBS code index (README of a user repo)",
     "RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).",
     "store_listen_failed", "error", {"address": "[::]:29500", "errno": "98", "reason": "Address already in use"}),
    ("listen_failed_port", "OBS code index notes",
     "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29501",
     "store_listen_failed", "error", {"port": "29501"}),
    ("store_connect_attempt_old", "OBS vllm-project/vllm#3771 (c10 prefix of torch <= 2.3)",
     "[W socket.cpp:663] [c10d] The client socket has failed to connect to [::ffff:172.16.8.232]:39623 (errno: 110 - Connection timed out).",
     "store_connect_failed", "warning", {"host": "::ffff:172.16.8.232", "port": "39623", "errno": "110", "reason": "Connection timed out", "stage": "attempt"}),
    ("store_connect_attempt_windows", "OBS code index (a Windows torchrun log, c10 prefix of torch >= 2.4)",
     "[W328 16:00:46.000000000 socket.cpp:697] [c10d] The client socket has failed to connect to [kubernetes.docker.internal]:29500 (system error: 10049 - The requested address is not valid in its context.).",
     "store_connect_failed", "warning", {"host": "kubernetes.docker.internal", "port": "29500", "errno": "10049",
                                          "reason": "The requested address is not valid in its context"}),
    ("store_connect_gave_up", "SRC torch socket.cpp SocketConnectOp::run (message, then the attempts' errors)",
     "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of (master-0, 29500). The client socket has failed to connect to [master-0]:29500 (errno: 111 - Connection refused).",
     "store_connect_failed", "error", {"host": "master-0", "port": "29500", "errno": "111", "reason": "Connection refused", "stage": "gave_up"}),
    ("store_connect_timed_out", "recorded here: tests/recordings/events/store_connect_refused.log (torch 2.13)",
     "[E1122 08:07:24.750824924 socket.cpp:1028] [c10d] The client socket has timed out after 3000ms while trying to connect to (127.0.0.1, 29599).",
     "store_connect_failed", "error", {"host": "127.0.0.1", "port": "29599", "timeout_ms": "3000", "stage": "gave_up"}),
    ("store_connect_retrying", "recorded here: tests/recordings/events/store_connect_refused.log (torch 2.13)",
     "[W1122 08:07:24.751589068 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to host 127.0.0.1:29599 - retrying (try=0, timeout=3000ms, delay=1792ms): The client socket has timed out after 3000ms while trying to connect to (127.0.0.1, 29599).",
     "store_connect_failed", "warning", {"host": "127.0.0.1", "port": "29599", "attempt": "0", "stage": "attempt"}),
    ("store_connect_tcpstore_gave_up", "recorded here: tests/recordings/events/store_connect_refused.log (torch 2.13)",
     "[E1122 08:07:29.268080949 TCPStore.cpp:328] [c10d] TCP client failed to connect/validate to host 127.0.0.1:29599 - timed out (try=1, timeout=3000ms): The client socket has timed out after 3000ms while trying to connect to (127.0.0.1, 29599).",
     "store_connect_failed", "error", {"host": "127.0.0.1", "port": "29599", "attempt": "1", "timeout_ms": "3000", "stage": "gave_up"}),
    ("ray_oom_kill_task", "OBS ray-project/ray#32730 (Ray memory monitor)",
     "Memory on the node (IP: 172.31.237.1, ID: 2c0ca846c8a9b1630ce2a4aae5ce82dd974531325a67acab1801dbf1) where the task (task ID: 76b2551f16836f9d58427a0096d8ccf5ba077e2703000000, name=pi4_sample, pid=664672, memory used=0.05GB) was running was 219.41GB / 230.40GB (0.952289), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: ba84684289453ec054c6d0aa4293b77bdf7d3f3e0c77b2724ee41479) because it was the most recently scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out -ip 172.31.237.1`. To see the logs of the worker, use `ray logs worker-ba84684289453ec054c6d0aa4293b77bdf7d3f3e0c77b2724ee41479*out -ip 172.31.237.1. Top 10 memory users:",
     "host_oom_killed", "error", {"node_ip": "172.31.237.1", "process": "pi4_sample", "pid": "664672", "process_memory": "0.05GB",
                                  "used": "219.41GB", "total": "230.40GB", "threshold": "0.95", "killer": "ray"}),
    ("ray_oom_kill_no_task_detail", "OBS ray-project/ray#28776 (Ray 2.1 form)",
     "Memory on the node (IP: 172.31.69.247, ID: 5bf8d24f68a4b2f966b34cb94a41d1a312f406dc9081063ea7dd661b) where the task was running was 54.86GB / 57.60GB (0.952354), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: 0c7d1ce94eefa4e408894a6d04511faca3d30bad46c775ba7961b38b) because it was the most recently scheduled task; to see more information about memory usage on this node, use `ray logs raylet.out -ip 172.31.69.247`. To see the logs of the worker, use `ray logs worker-0c7d1ce94eefa4e408894a6d04511faca3d30bad46c775ba7961b38b*out -ip 172.31.69.247`.",
     "host_oom_killed", "error", {"node_ip": "172.31.69.247", "used": "54.86GB", "fraction": "0.952354", "threshold": "0.95"}),
    ("ray_oom_summary", "OBS WM-PO/WMPO#3 (raylet summary, as the collector wrapped it)",
     "(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at ",
     "host_oom_killed", "error", {"killed": "2", "crashed": "0", "killer": "ray"}),
    ("dist_network_recv", "OBS code index log (glog launcher prefix)",
     "E0304 19:44:41.006000 690616 torch/distributed/elastic/agent/server/api.py:965] torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
     "dist_network_error", "error", {"detail": "Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?"}),
    ("rendezvous_connection", "OBS code index (captured log)", "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError",
     "rendezvous_error", "error", {"exc_type": "RendezvousConnectionError"}),
    ("gloo_closed", "recorded here: tests/recordings/events/torchrun_raise",
     "[default0]:[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:14215. This is typically caused by a remote worker crashing. Check the logs of the remote worker before reporting an error. GLHF! 🏖️",
     "gloo_error", "error", {"file": "pair.cc", "line": "553"}),
    ("gloo_barrier", "recorded here: tests/recordings/events/torchrun_plain",
     "[rank0]:[E1122 05:36:33.442512895 ProcessGroupGloo.cpp:67] [Rank 0]: Ranks 1 failed to pass monitoredBarrier in 1800000 ms",
     "gloo_monitored_barrier_failed", "error", {"failed_ranks": "1", "timeout_ms": "1800000"}),
    ("worker_group_failed", "OBS code index (torchrun agent log)",
     "[default] Worker group FAILED. 3/3 attempts left; will restart worker group",
     "torchrun_worker_group_failed", "warning", {"role": "default", "state": "FAILED", "attempts_left": "3", "max_restarts": "3"}),
    ("arch_incompatible", "OBS code index (UserWarning body)",
     "NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
     "cuda_arch_incompatible", "warning", {"gpu_name": "NVIDIA GeForce RTX 5070 Ti", "sm": "120"}),
    ("input_weight_type", "OBS code index (notebook output)",
     "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same",
     "device_mismatch", "error", {"input_type": "torch.cuda.FloatTensor", "weight_type": "torch.FloatTensor", "form": "input_weight_type"}),
    ("mark_ready_twice", "OBS ms-swift FAQ (code index), missing space verbatim",
     "RuntimeError: Expected to mark a variable ready only once.This error is caused by one of the following reasons: 1) Use of a module parameter outsid forward function.",
     "ddp_marked_ready_twice", "error", {}),
    ("rm_init_adapter", "OBS Cyridd/cmpunlocker#4 (dmesg)",
     "[   21.091872] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)",
     "gpu_init_failed", "error", {"uptime_s": "21.091872", "pci": "0000:01:00.0", "rm_code": "0x22:0x56:894"}),
    ("embedding_index", "recorded here: tests/recordings/events/embedding_index.log",
     "IndexError: index out of range in self", "embedding_index_out_of_range", "error", {}),
    ("target_bounds", "OBS code index (nanochat note)", "IndexError: Target -1 is out of bounds.",
     "target_out_of_bounds", "error", {"target": "-1"}),
    ("shape_mismatch", "recorded here: tests/recordings/events/shape_mismatch.log",
     "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x5 and 8x4)", "shape_mismatch", "error",
     {"shape_a": "2x5", "shape_b": "8x4"}),
    ("sequence_length", "OBS code index (captured run output)",
     "Token indices sequence length is longer than the specified maximum sequence length for this model (1063 > 1024). Running this sequence through the model will result in indexing errors",
     "sequence_length_warning", "warning", {"length": "1063", "max_length": "1024"}),
    ("padding_side", "OBS code index (captured run output)",
     "A decoder-only architecture is being used, but right-padding was detected! For correct generation results, please set `padding_side='left'` when initializing the tokenizer.",
     "padding_side_warning", "warning", {}),
    ("ckpt_permission", "PermissionError on a checkpoint path",
     "PermissionError: [Errno 13] Permission denied: '/mnt/shared/output/checkpoint-500/optimizer.pt'",
     "checkpoint_permission_denied", "error", {"path": "/mnt/shared/output/checkpoint-500/optimizer.pt"}),
    ("permission", "PermissionError elsewhere", "PermissionError: [Errno 13] Permission denied: '/var/log/train/metrics.csv'",
     "permission_denied", "error", {"path": "/var/log/train/metrics.csv"}),
    ("no_space", "OBS code index (tensorboardX write)", "OSError: [Errno 28] No space left on device",
     "no_space_left", "error", {"errno": "28", "reason": "No space left on device"}),
    ("quota", "EDQUOT", "OSError: [Errno 122] Disk quota exceeded: '/home/u/ckpt/model.safetensors'",
     "no_space_left", "error", {"errno": "122", "reason": "Disk quota exceeded", "path": "/home/u/ckpt/model.safetensors"}),
    ("stream_writer", "OBS code index (disk full during torch.save)",
     "RuntimeError: [enforce fail at inline_container.cc:588] . PytorchStreamWriter failed writing file data/12: file write failed",
     "checkpoint_write_failed", "error", {"entry": "data/12"}),
    ("unexpected_pos", "OBS code index (disk full during torch.save)",
     "RuntimeError: [enforce fail at inline_container.cc:664] . unexpected pos 56833600 vs 56833492",
     "checkpoint_write_failed", "error", {"pos": "56833600", "expected": "56833492"}),
    ("stream_reader", "recorded here: tests/recordings/events/checkpoint_truncated.log",
     "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory. This is an internal miniz error.",
     "checkpoint_corrupt", "error", {"what": "zip archive"}),
    ("lfs_pointer", "OBS code index (git-lfs pointer loaded as checkpoint)", "_pickle.UnpicklingError: invalid load key, 'v'.",
     "checkpoint_corrupt", "error", {"load_key": "'v'"}),
    ("safetensors_header", "safetensors truncated file", "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
     "checkpoint_corrupt", "error", {"safetensors": "HeaderTooLarge"}),
    ("segfault_bare", "shell", "Segmentation fault (core dumped)", "shell_signal_exit", "error", {"signal": "Segmentation fault"}),
    ("segfault_job", "OBS code index (bash job report)",
     "/usr/bin/paddle: line 109:   763 Segmentation fault      (core dumped) ${DEBUGGER} $MYDIR/../opt/paddle/bin/paddle_trainer ${@:2}",
     "shell_signal_exit", "error", {"pid": "763", "signal": "Segmentation fault"}),
    ("bus_error_bare", "shell", "Bus error (core dumped)", "shell_signal_exit", "error", {"signal": "Bus error"}),
    ("fatal_python", "CPython faulthandler", "Fatal Python error: Segmentation fault", "fatal_python_error", "error",
     {"detail": "Segmentation fault"}),
    ("python_warning", "warnings.showwarning format",
     "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:429: UserWarning: torch.utils.checkpoint: please pass in use_reentrant=True or use_reentrant=False explicitly.",
     "python_warning", "warning", {"category": "UserWarning", "line": "429"}),
    ("recompiling_logs", "recorded here: tests/recordings/events/recompile_logs.log",
     "V1122 05:36:11.669000 15903 torch/_dynamo/guards.py:5396] [0/1] [__recompiles] Recompiling function f in /work/main/tests/recordings/events_cases.py:102",
     "dynamo_recompile", "info", {"frame_id": "0", "compile_id": "1", "function": "f"}),
    ("cuda_init", "formats.md §2.6 UserWarning shape; this cause [REC, well known]",
     "UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero. (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)",
     "cuda_init_failed", "warning", {"where": "../c10/cuda/CUDAFunctions.cpp:108"}),
    # --- forms found in real incident threads (tests/recordings/incidents) ---
    ("oom_recovered_fairseq", "OBS fairseq#103", "| WARNING: ran out of memory on GPU #2, skipping batch",
     "oom_recovered", "info", {"gpu": "2"}),
    ("oom_recovered_skipping_line", "OBS ray#5755 (fairseq under Ray)", "(pid=3959, ip=172.31.41.219)  Skipping batch",
     "oom_recovered", "info", {}),
    ("oom_recovered_metaseq", "OBS metaseq#314", "2022-08-21 00:29:47 | WARNING | metaseq.trainer | attempting to recover from OOM in forward/backward pass",
     "oom_recovered", "info", {"phase": "forward/backward"}),
    ("kernel_assert_backticks_eaten", "OBS LiyuanLucasLiu/LM-LSTM-CRF#27",
     "`/opt/conda/conda-bld/pytorch_1518244421288/work/torch/lib/THCUNN/ClassNLLCriterion.cu:101: void cunn_ClassNLLCriterion_updateOutput_kernel(Dtype *, Dtype *, Dtype *, long *, Dtype *, int, int, int, int, long) [with Dtype = float, Acctype = float]: block: [0,0,0], thread: [2,0,0] Assertion t >= 0 && t < n_classes failed.`",
     "cuda_kernel_assert", "error", {"cond": "t >= 0 && t < n_classes", "line": "101", "form": "unquoted"}),
    ("thnn_cpu_cur_target", "OBS pytorch#1204",
     "`RuntimeError: Assertion `cur_target >= 0 && cur_target < n_classes' failed.  at /opt/conda/conda-bld/pytorch_1525812548180/work/aten/src/THNN/generic/SpatialClassNLLCriterion.c:111`",
     "target_out_of_bounds", "error", {"cond": "cur_target >= 0 && cur_target < n_classes", "line": "111", "form": "thnn_cpu"}),
    ("triton_illegal_memory_access", "OBS vllm#17098",
     "ERROR 04-15 00:31:11 worker_base.py:574] RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
     "illegal_memory_access", "error", {}),
    ("cupy_invalid_handle", "OBS asappresearch/sru#8",
     "cupy.cuda.driver.CUDADriverError: CUDA_ERROR_INVALID_HANDLE: invalid resource handle",
     "invalid_resource_handle", "error", {}),
    ("tensorrt_invalid_handle", "OBS NVIDIA/TensorRT#3028",
     "[reformat.cu::operator()::1606] Error Code 1: Cuda Runtime (invalid resource handle)",
     "invalid_resource_handle", "error", {"trt_code": "1", "form": "tensorrt"}),
    ("fork_reinit", "OBS 4D-Humans#59",
     "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method)",
     "cuda_fork_reinit", "error", {}),
    ("inplace_head_only", "OBS NVlabs/FUNIT#23 (message split over code blocks)",
     "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: ",
     "inplace_autograd_error", "error", {"form": "head"}),
    ("collective_mismatch_cut", "OBS Lightning#19106 (paste cut inside the fingerprint)",
     "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=21, OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format",
     "collective_mismatch", "error", {"rank": "1", "form": "cut"}),
    ("collective_mismatch_nccl_24", "OBS NVIDIA/nccl#296",
     "`init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 39. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs`",
     "collective_mismatch", "error", {"around_rank": "39", "form": "nccl"}),
    ("torchdynamo_2022_cache_limit", "OBS pytorch/torchdynamo#330",
     "cuda eval  tacotron2                          WARNING:torchdynamo.convert_frame:torchdynamo hit recompilation cache limit (64) for function 'forward' (/home/jansel/torchbenchmark/torchbenchmark/models/tacotron2/model.py:381), due to the following guard failures: [['len(alignments) == 0'], ['len(alignments) == 0']]",
     "dynamo_recompile_limit", "warning", {"limit": "64", "function": "forward", "reason": "[['len(alignments) == 0'], ['len(alignments) == 0']]"}),
    ("recompiles_guard_failure_list", "OBS pytorch#110325",
     "[2023-11-06 14:54:08,549] torch._dynamo.guards.__recompiles: [DEBUG]     - tensor 'L['x']' size mismatch at index 0. expected 20, actual 21",
     "dynamo_recompile_reason", "info", {"reason": "tensor 'L['x']' size mismatch at index 0. expected 20, actual 21", "form": "guard_failure_list"}),
    ("nccl_cuda_failure_710", "OBS NVIDIA/nccl#1504 (NCCL CUDACHECK: Cuda failure %d '%s')",
     "678c7278cb2d:26024:27098 [1] include/alloc.h:125 NCCL WARN Cuda failure 710 'device-side assert triggered'",
     "device_side_assert", "error", {}),
    ("nccl_cuda_failure_oom", "NCCL CUDACHECK format with the error number (NCCL >= 2.12)",
     "node1:2345:2399 [3] include/alloc.h:103 NCCL WARN Cuda failure 2 'out of memory'",
     "cuda_oom", "error", {"form": "runtime"}),
    ("save_parent_dir_missing", "OBS hpcaitech/ColossalAI#4078",
     "RuntimeError: Parent directory /home/rm does not exist.",
     "checkpoint_write_failed", "error", {"path": "/home/rm", "form": "missing_dir"}),
    ("oom_sentence_without_gpu_index", "OBS modelscope/FunASR#2006 ('GPU  has': the device index printed empty)",
     "[rank2]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 336.00 MiB. GPU  has a total capacity of 79.15 GiB of which 141.25 MiB is free. Process 2109115 has 78.99 GiB memory in use. Of the allocated memory 77.21 GiB is allocated by PyTorch, and 283.51 MiB is reserved by PyTorch but unallocated.",
     "cuda_oom", "error", {"requested": "336.00 MiB", "capacity": "79.15 GiB", "free": "141.25 MiB", "reserved_unallocated": "283.51 MiB", "form": "sentence"}),
    ("nccl_unique_id_reset", "OBS pytorch#131781",
     "[rank15]: torch.distributed.DistBackendError: [15] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer",
     "nccl_unique_id_store_error", "error", {"rank": "15", "src_rank": "0", "key": "0", "reason": "Connection reset by peer"}),
    ("nccl_unique_id_socket_timeout_old_spelling", "OBS pytorch#82091",
     "RuntimeError: [2] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout",
     "nccl_unique_id_store_error", "error", {"rank": "2", "reason": "Socket Timeout"}),
    ("xid45_caused_by_previous", "OBS NVIDIA/open-gpu-kernel-modules#1150",
     "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149",
     "xid", "error", {"xid": "45", "previous_xid": "149", "process": "python3"}),
    ("storage_write_fd", "OBS pytorch#10577",
     "RuntimeError: write(): fd 29 failed with Input/output error",
     "checkpoint_write_failed", "error", {"fd": "29", "reason": "Input/output error"}),
    # --- added from public issue threads (helper-events) ---
    ("thrust_cuda_error_name", "OBS skhu101/GauHuman#21 (thrust: `<func>: failed to synchronize: <cudaError name>: <text>`)",
     "RuntimeError: merge_sort: failed to synchronize: cudaErrorIllegalAddress: an illegal memory access was encountered",
     "illegal_memory_access", "error", {"cuda_error_name": "cudaErrorIllegalAddress"}),
    ("shm_write_enospc", "OBS idiap/ESLAM#20",
     "RuntimeError: unable to write to file </torch_31911_952036340_6686>: No space left on device (28)",
     "shared_memory_error", "error", {"op": "write to file", "segment": "/torch_31911_952036340_6686", "reason": "No space left on device", "errno": "28"}),
    ("shm_write_th_era", "OBS huaweicloud/dls-example#26 (TH allocator, PyTorch 0.4)",
     "RuntimeError: unable to write to file </torch_76_3625483894> at /pytorch/aten/src/TH/THAllocator.c:383",
     "shared_memory_error", "error", {"op": "write to file", "file": "/pytorch/aten/src/TH/THAllocator.c", "line": "383"}),
    ("shm_mmap_enomem", "OBS pytorch#87861",
     "RuntimeError: unable to mmap 29764 bytes from file </torch_10182_3020184674_63991>: Cannot allocate memory (12)",
     "shared_memory_error", "error", {"op": "mmap", "bytes": "29764", "reason": "Cannot allocate memory", "errno": "12"}),
    ("shm_open_emfile", "OBS ML-GSAI/SMDM#3",
     "RuntimeError: unable to open shared memory object </torch_710863_755204907_419> in read-write mode: Too many open files (24)",
     "shared_memory_error", "error", {"op": "open shared memory object", "reason": "Too many open files", "errno": "24"}),
    ("ancdata", "OBS lzccccc/SMOKE#21, pytorch#973",
     "RuntimeError: received 0 items of ancdata",
     "dataloader_too_many_open_files", "error", {"items": "0", "form": "ancdata"}),
    ("emfile_oserror", "OBS facebookresearch/maskrcnn-benchmark#158",
     "OSError: [Errno 24] Too many open files",
     "too_many_open_files", "error", {}),
    ("store_based_barrier", "OBS tczhangzhi/pytorch-distributed#18",
     "RuntimeError: Timed out initializing process group in store based barrier on rank: 2, for key: store_based_barrier_key:1 (world_size=2, worker_count=4, timeout=0:30:00)",
     "store_timeout", "error", {"rank": "2", "key": "store_based_barrier_key:1", "expected": "2", "joined": "4", "timeout": "0:30:00", "form": "store_based_barrier"}),
    ("tcpstore_connect_timeout_1x", "OBS pytorch#67581 (inside a torchelastic error.json py_callstack)",
     "RuntimeError: connect() timed out. Original timeout was 60000 ms.",
     "store_connect_failed", "error", {"timeout_ms": "60000", "stage": "gave_up"}),
    ("spawn_signal", "OBS lyu-yx/ACUMEN#4",
     "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
     "spawn_process_exited", "error", {"local_rank": "0", "signame": "SIGKILL"}),
    ("spawn_signal_pre_1_5", "OBS jeffffffli/HybrIK#198",
     "Exception: process 3 terminated with signal SIGKILL",
     "spawn_process_exited", "error", {"local_rank": "3", "signame": "SIGKILL"}),
    ("spawn_exit_code_windows", "OBS SayaSS/vits-finetuning#32 (Windows NTSTATUS as the exit code)",
     "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 3221226505",
     "spawn_process_exited", "error", {"local_rank": "0", "exitcode": "3221226505"}),
    ("agent_signal_exception", "OBS NVIDIA/nvidia-resiliency-ext#18",
     "torch.distributed.elastic.multiprocessing.api.SignalException: Process 293812 got signal: 15",
     "torchrun_death_signal", "warning", {"pid": "293812", "signal": "15", "form": "exception"}),
    ("nccl_duplicate_gpu_warn", "OBS horovod/horovod#3929 (MPI-prefixed NCCL WARN)",
     "[1,2]<stdout>:smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000",
     "nccl_duplicate_gpu", "error", {"rank": "2", "other_rank": "0", "bus_id": "1000"}),
    ("nccl_error_n_run_with_suffix", "OBS vllm-project/vllm#5828 (Ray worker prefix)",
     "(RayWorkerWrapper pid=67451, ip=10.1.0.7) ERROR 06-25 15:28:30 worker_base.py:148] RuntimeError: NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)",
     "nccl_error", "error", {"nccl_code": "2", "reason": "unhandled system error"}),
    ("device_type_expected_object", "OBS yoshidan/pytorch-eyeblink-detection#3 (PyTorch 1.0-1.5)",
     "RuntimeError: Expected object of device type cuda but got device type cpu for argument #1 'self' in call to _thnn_conv2d_forward",
     "device_mismatch", "error", {"device_a": "cuda", "device_b": "cpu", "argument": "self", "method": "_thnn_conv2d_forward", "form": "expected_object"}),
    ("device_backend_expected_object", "OBS inyeoplee77/SAGPool#3 (PyTorch 1.0)",
     "RuntimeError: Expected object of backend CUDA but got backend CPU for argument #2 'mat2'",
     "device_mismatch", "error", {"device_a": "CUDA", "device_b": "CPU", "argument": "mat2"}),
    ("device_same_device_as", "OBS jfzhang95/pytorch-deeplab-xception#70, Cadene/pretrained-models.pytorch#196",
     "RuntimeError: Expected tensor for argument #1 'input' to have the same device as tensor for argument #2 'weight'; but device 1 does not equal 0 (while checking arguments for cudnn_convolution)",
     "device_mismatch", "error", {"argument": "input", "other_argument": "weight", "device_a": "1", "device_b": "0", "method": "cudnn_convolution", "form": "same_device_as"}),
    ("slurm_time_limit", "OBS Nextomics/NextDenovo#114",
     "slurmstepd: error: *** JOB 867816 ON c0700a-s1 CANCELLED AT 2021-05-11T12:06:17 DUE TO TIME LIMIT ***",
     "slurm_job_cancelled", "error", {"scope": "JOB", "job_id": "867816", "node": "c0700a-s1", "at": "2021-05-11T12:06:17", "reason": "TIME LIMIT"}),
    ("slurm_requeue_step", "OBS facebookincubator/submitit#1708",
     "slurmstepd: error: *** STEP 608.0 ON SERVER_NAME CANCELLED AT 2022-08-12T02:06:12 DUE TO JOB REQUEUE ***",
     "slurm_job_cancelled", "error", {"scope": "STEP", "job_id": "608.0", "reason": "JOB REQUEUE"}),
    ("srun_tasks_exit_code", "OBS facebookincubator/submitit#1708",
     "srun: error: SERVER_NAME: tasks 2-3: Exited with exit code 1",
     "slurm_task_failed", "error", {"node": "SERVER_NAME", "tasks": "2-3", "exitcode": "1"}),
    ("srun_tasks_terminated", "OBS desihub/desitarget#628",
     "srun: error: nid01934: tasks 2,4-5,7: Terminated",
     "slurm_task_failed", "error", {"node": "nid01934", "tasks": "2,4-5,7", "status": "Terminated"}),
    ("detectron2_nan", "OBS gist-ailab/uoais#16",
     "FloatingPointError: Loss became infinite or NaN at iteration=0!",
     "nan_loss_message", "error", {"step": "0", "framework": "detectron2"}),
    ("ultralytics_nonfinite_glued", "OBS ultralytics/yolov5#673 (glued to the tqdm bar)",
     "    16/999     7.38G   0.03433   0.01034   0.01147   0.05613       130       800:  85%|████████▌ | 23/27 [00:15<00:02,  1.66it/s]WARNING: non-finite loss, ending training  tensor([nan, nan, nan, nan], device='cuda:0')",
     "nan_loss_message", "error", {"value": "tensor([nan, nan, nan, nan], device='cuda:0')", "framework": "ultralytics"}),
    ("fairseq_grad_nan", "OBS facebookresearch/fairseq#4118",
     "FloatingPointError: gradients are Nan/Inf",
     "nan_loss_message", "error", {"framework": "fairseq", "what": "gradients"}),
    ("fairseq_grad_inconsistent", "OBS facebookresearch/fairseq#1372",
     "FloatingPointError: Fatal error: gradients are inconsistent between workers. Try --ddp-backend=no_c10d. Or are you mixing up different generation of GPUs in training?",
     "grad_norm_mismatch", "error", {"hint_backend": "no_c10d", "framework": "fairseq"}),
    ("tensorboard_nan_scalar", "OBS facebookresearch/fairseq#1529",
     "2020-10-01 10:25:50 | WARNING | root | NaN or Inf found in input tensor.",
     "nonfinite_logged_value", "warning", {}),
    ("cuda_warning_destroy_event", "OBS vllm-project/vllm#36776 (c10 warning from CUDAGuardImpl::destroyEvent)",
     "[rank0]:[W311 18:21:36.049434121 CUDAGuardImpl.h:122] Warning: CUDA warning: an illegal memory access was encountered (function destroyEvent)",
     "illegal_memory_access", "error", {}),
    ("accelerate_called_process_error", "OBS kohya-ss/sd-scripts#1354 (accelerate simple_launcher)",
     "subprocess.CalledProcessError: Command '['/Users/kleinsun/open/kohya_ss/venv/bin/python', '/Users/kleinsun/Documents/open/kohya_ss/sd-scripts/sdxl_train.py', '--config_file', '/Users/kleinsun/Documents/open/kohya_ss/outputs/config_dreambooth-20240531-163416.toml']' returned non-zero exit status 1.",
     "spawn_process_exited", "error", {"exitcode": "1", "launcher": "subprocess"}),
    ("accelerate_called_process_error_windows", "OBS bmaltais/kohya_ss#2556 (Windows access violation as the exit status)",
     "subprocess.CalledProcessError: Command '['C:\\\\kohya_new\\\\kohya_ss\\\\venv\\\\Scripts\\\\python.exe', 'C:/kohya_new/kohya_ss/sd-scripts/sdxl_train_network.py', '--config_file', 'C:/test_kohya/config_lora-20240531-133245.toml']' returned non-zero exit status 3221225477.",
     "spawn_process_exited", "error", {"exitcode": "3221225477"}),
    ("called_process_died_with_signal_alone", "OBS bmaltais/kohya_ss#1065 (the end of a wrapped CalledProcessError)",
     "died with <Signals.SIGKILL: 9>",
     "spawn_process_exited", "error", {"signame": "SIGKILL", "signal": "9", "launcher": "subprocess"}),
    ("pycharm_sigkill", "OBS davidsandberg/facenet#236",
     "Process finished with exit code 137 (interrupted by signal 9: SIGKILL)",
     "process_killed", "warning", {"exitcode": "137", "signal": "9", "signame": "SIGKILL", "form": "ide"}),
    ("pycharm_sigsegv_short", "OBS sangrockEG/S2C#8",
     "139 (interrupted by signal 11:SIGSEGV)",
     "shell_signal_exit", "error", {"exitcode": "139", "signal_number": "11", "signal": "SIGSEGV"}),
    ("killed_after_tqdm", "OBS InternLandMark/LandMark#65 (no newline between the bar and the shell's report)",
     " 20%|████                | 216/1063 [00:27<02:17,  6.17it/s]Killed",
     "process_killed", "warning", {}),
    ("torch_save_cannot_be_opened", "OBS Sachini/ronin#51 (PyTorch 1.x; the disk was full)",
     "RuntimeError: File my_out/checkpoints/checkpoint_0.pt cannot be opened.",
     "checkpoint_write_failed", "error", {"path": "my_out/checkpoints/checkpoint_0.pt", "form": "open_failed"}),
    ("stream_writer_opening_archive", "OBS pytorch#29186",
     "RuntimeError: [enforce fail at inline_container.cc:319] . PytorchStreamWriter failed opening archive.",
     "checkpoint_write_failed", "error", {"form": "open_failed"}),
    ("deepspeed_allocator_cache_flushes", "OBS huggingface/peft#194 (a paste that lost the stamp's `[`)",
     "2023-03-20 20:38:19,874] [WARNING] [stage3.py:1939:step] 13 pytorch allocator cache flushes since last step. this happens when there is high memory pressure and is detrimental to performance. if this is happening frequently consider adjusting settings to reduce memory consumption. If you are unable to make the cache flushes go away consider adding torch.cuda.empty_cache() calls in your training loop to ensure that all ranks flush their caches at the same time",
     "allocator_cache_flush", "warning", {"flushes": "13", "framework": "deepspeed"}),
    ("lightning_unused_parameters", "OBS chemprop/chemprop#853",
     "RuntimeError: It looks like your LightningModule has parameters that were not used in producing the loss returned by training_step. If this is intentional, you must enable the detection of unused parameters in DDP, either by setting the string value `strategy='ddp_find_unused_parameters_true'` or by setting the flag in the strategy with `strategy=DDPStrategy(find_unused_parameters=True)`.",
     "ddp_unused_parameters", "error", {"framework": "lightning"}),
    ("nvidia_smi_gpu_lost", "OBS JosephKJ/OWOD#81",
     "Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU",
     "gpu_fallen_off_bus", "error", {"pci": "0000:02:00.0", "reason": "GPU is lost", "form": "nvidia_smi"}),
    ("nvidia_smi_unknown_error_no_space", "OBS haotian-liu/LLaVA#1466 (fine-tuning on 8 A100s, after ~3 hours)",
     "Unable to determine the device handle for GPU0000:4F:00.0: Unknown Error",
     "gpu_fallen_off_bus", "error", {"pci": "0000:4F:00.0", "reason": "Unknown Error"}),
    ("nvidia_smi_no_driver", "OBS ci-for-research/self-hosted-runners#40",
     "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.",
     "no_nvidia_driver", "error", {"form": "nvidia_smi"}),
    ("nvml_mismatch", "OBS lyulyul/shine-cluster#50",
     "Failed to initialize NVML: Driver/library version mismatch",
     "nvml_driver_mismatch", "error", {}),
    ("no_cuda_gpus", "OBS pytorch#134542",
     "RuntimeError: No CUDA GPUs are available",
     "cuda_no_device", "error", {}),
    ("nccl_comm_aborted_1_5", "OBS karfly/learnable-triangulation-pytorch#81 (PyTorch 1.5, no rank in the message)",
     "RuntimeError: NCCL communicator was aborted.",
     "nccl_comm_aborted", "error", {}),
    ("hip_invalid_device_function", "OBS verl-project/verl#3163 (AMD R9700, GRPO training)",
     "RuntimeError: HIP error: invalid device function",
     "no_kernel_image", "error", {"form": "hip"}),
    ("hip_no_binary_for_gpu", "OBS ROCm/tensorflow-upstream#1800",
     "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
     "no_kernel_image", "error", {"form": "hip"}),
    ("hip_async_advice", "OBS etched-ai/open-oasis#27",
     "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
     "cuda_launch_blocking_advice", "advice", {}),
    ("hip_dsa_advice", "OBS etched-ai/open-oasis#27",
     "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.",
     "cuda_dsa_advice", "advice", {}),
    ("hip_error_lookup_advice", "OBS pytorch#164346 (ROCm 7 nightly)",
     "Search for `hipErrorInvalidDeviceFunction' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__HIPRT__TYPES.html for more information.",
     "cuda_error_lookup_advice", "advice", {"cuda_error_name": "hipErrorInvalidDeviceFunction"}),
    ("cudnn_v8_get_no_engine", "OBS unit8co/darts#1919 (training a TCN with Lightning on a Titan XP)",
     "RuntimeError: GET was unable to find an engine to execute this computation",
     "cudnn_no_algorithm", "error", {"form": "v8_api"}),
    ("cudnn_frontend_no_plan", "OBS ostris/ai-toolkit#203 (torch 2.5.0)",
     "RuntimeError: cuDNN Frontend error: [cudnn_frontend] Error: No execution plans support the graph",
     "cudnn_error", "error", {"detail": "No execution plans support the graph", "form": "frontend"}),
    ("store_wait_timeout", "OBS vllm-project/vllm#12526 (4xA100)",
     "torch.distributed.DistStoreError: wait timeout after 600000ms",
     "store_timeout", "error", {"timeout_ms": "600000", "form": "store_wait"}),
    ("numpy_array_memory_error", "OBS MIC-DKFZ/nnUNet#2213",
     "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 1.61 GiB for an array with shape (753, 536, 536) and data type float64",
     "cpu_alloc_failed", "error", {"requested": "1.61 GiB", "shape": "(753, 536, 536)", "dtype": "float64", "allocator": "numpy"}),
    ("numpy_memory_error_old", "OBS juntang-zhuang/LadderNet#7",
     "MemoryError: Unable to allocate 3.26 GiB for an array with shape (190000, 1, 48, 48) and data type float64",
     "cpu_alloc_failed", "error", {"requested": "3.26 GiB", "shape": "(190000, 1, 48, 48)"}),
    ("monitored_barrier_peer_error", "OBS pytorch#76198 (Lightning DDP, _sync_buffers)",
     "RuntimeError: Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.",
     "gloo_monitored_barrier_failed", "error", {"rank": "1", "failed_ranks": "0", "form": "peer_error"}),
    ("store_client_timeout_seconds", "OBS lllyasviel/ControlNet#382 (PyTorch 2.0: the timeout in seconds)",
     "[E socket.cpp:793] [c10d] The client socket has timed out after 1800s while trying to connect to (127.0.0.1, 48391).",
     "store_connect_failed", "error", {"timeout_s": "1800", "host": "127.0.0.1", "port": "48391", "stage": "gave_up"}),
    ("xpu_ipex_bracket", "OBS intel/intel-extension-for-pytorch#629 (IPEX allocator, no `free`)",
     "RuntimeError: XPU out of memory. Tried to allocate 1.71 GiB (GPU 0; 15.56 GiB total capacity; 0 bytes already allocated; 0 bytes reserved in total by PyTorch)",
     "cuda_oom", "error", {"device": "XPU", "requested": "1.71 GiB", "gpu": "0", "capacity": "15.56 GiB", "form": "bracket"}),
    ("nccl_blocking_wait_timeout", "OBS huggingface/diffusers#12422",
     "[rank1]:[E1002 18:16:40.662691402 ProcessGroupNCCL.cpp:756] [Rank 1] Work WorkNCCL(SeqNum=2521, OpType=ALLREDUCE, NumelIn=160672064, NumelOut=160672064, Timeout(ms)=600000) timed out in blocking wait.",
     "nccl_watchdog_timeout", "error", {"seq": "2521", "op": "ALLREDUCE", "numel_in": "160672064", "timeout_ms": "600000", "form": "blocking_wait"}),
    ("hsa_memory_fault", "OBS ROCm/legacy-rocm-build#5051",
     "Memory access fault by GPU node-1 (Agent handle: 0x55f8b54eec30) on address 0x7f2a53193000. Reason: Page not present or supervisor privilege.",
     "illegal_memory_access", "error", {"node": "1", "address": "0x7f2a53193000", "reason": "Page not present or supervisor privilege", "form": "hsa"}),
    ("amdgpu_page_fault", "OBS ROCm/legacy-rocm-build#5051 (journal)",
     "Jan 09 18:55:45 alexpc kernel: amdgpu 0000:0b:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32792)",
     "amdgpu_page_fault", "error", {"pci": "0000:0b:00.0", "hub": "gfxhub", "ring": "24", "vmid": "8", "pasid": "32792"}),
    ("amdgpu_page_fault_retry_process", "OBS freebsd/drm-kmod#78",
     "drmn0: [gfxhub0] retry page fault (src_id:0 ring:0 vmid:5 pasid:32772, for process  pid 101038 thread  pid 101038)",
     "amdgpu_page_fault", "error", {"hub": "gfxhub0", "retry": "retry ", "vmid": "5", "pid": "101038"}),
    ("amdgpu_ring_timeout_dmesg", "OBS pop-os/cosmic-epoch#3764",
     "[  312.522692] amdgpu 0000:28:00.0: ring gfx_0.0.0 timeout, signaled seq=57638, emitted seq=57641",
     "amdgpu_ring_timeout", "error", {"uptime_s": "312.522692", "pci": "0000:28:00.0", "ring": "gfx_0.0.0", "signaled": "57638", "emitted": "57641"}),
    ("amdgpu_ring_timeout_drm_error", "OBS yshui/picom#1390",
     "Nov 14 10:46:51 leviathan kernel: [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=5235351, emitted seq=5235353",
     "amdgpu_ring_timeout", "error", {"ring": "gfx_0.0.0", "signaled": "5235351", "emitted": "5235353"}),
    ("store_client_timeout_host_port", "OBS pytorch#107021 (no tuple around host:port)",
     "[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to 192.0.0.1:1234",
     "store_connect_failed", "error", {"timeout_s": "60", "host": "192.0.0.1", "port": "1234", "stage": "gave_up"}),
    ("rendezvous_error_json", "OBS facebookresearch/av_hubert#19 (error_handler dump)",
     '    "message": "RendezvousTimeoutError: ",',
     "rendezvous_error", "error", {"exc_type": "RendezvousTimeoutError", "form": "error_json"}),
    ("store_connection_lost", "OBS tdrussell/diffusion-pipe#333",
     "[rank6]:[W729 10:15:17.529361055 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=76, addr=[localhost]:60950, remote=[localhost]:29500): Connection reset by peer",
     "store_connection_lost", "warning", {"op": "recvValue", "fd": "76", "remote": "[localhost]:29500", "detail": "Connection reset by peer"}),
    ("dist_runtime_error_reset", "OBS pytorch#74146",
     "RuntimeError: Connection reset by peer",
     "dist_network_error", "error", {"detail": "Connection reset by peer", "form": "runtime_error"}),
    ("deepspeed_killing_subprocess", "OBS deepspeedai/DeepSpeed#1581",
     "[2021-11-21 08:32:07,148] [INFO] [launch.py:131:sigkill_handler] Killing subprocess 250621",
     "torchrun_closing_worker", "info", {"pid": "250621", "launcher": "deepspeed"}),
    ("cudnn_status_tensorflow", "OBS Li-Chongyi/Ucolor#9",
     "E tensorflow/stream_executor/cuda/cuda_dnn.cc:81] CUDNN_STATUS_EXECUTION_FAILED",
     "cudnn_error", "error", {"status": "CUDNN_STATUS_EXECUTION_FAILED", "form": "bare"}),
    ("cublas_glog_check", "OBS chengyangfu/caffe#6",
     "F0421 09:02:45.161278  7233 math_functions.cu:52] Check failed: status == CUBLAS_STATUS_SUCCESS (13 vs. 0)  CUBLAS_STATUS_EXECUTION_FAILED",
     "cublas_error", "error", {"status": "CUBLAS_STATUS_EXECUTION_FAILED"}),
    ("cublas_single_quoted_call", "OBS YueLiao/CDN#29",
     "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling 'cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)'",
     "cublas_error", "error", {"status": "CUBLAS_STATUS_EXECUTION_FAILED", "call": "cublasSgemm"}),
    ("invalid_address_space_h100", "OBS recorded on an H100 (sample_logs/device-assert-illegal-h100): a Triton kernel's wild store",
     "torch.AcceleratorError: CUDA error: operation not supported on global/shared address space",
     "illegal_memory_access", "error", {"form": "address_space"}),
    ("invalid_address_space_triton", "a Triton launch reporting the same fault (CUresult text through triton's driver)",
     "RuntimeError: Triton Error [CUDA]: operation not supported on global/shared address space",
     "illegal_memory_access", "error", {"form": "address_space"}),
]


@pytest.mark.parametrize("case", REAL_CASES, ids=[c[0] for c in REAL_CASES])
def test_signature_on_real_line(case):
    test_signature_on_formats_md_line(case)


def test_vllm_worker_prefix_names_the_rank():
    """OBS gpustack/gpustack#2680: `(VllmWorker rank=3 pid=4665) ERROR ... NCCL error: ...`."""
    row = only("(VllmWorker rank=3 pid=4665) ERROR 08-05 14:13:44 [multiproc_executor.py:487] RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)")
    assert (row["code"], row["rank"], row["fields"]["reason"]) == ("nccl_error", 3, "unhandled system error")


def test_first_stage_needles_cover_every_needle_and_skip_healthy_lines():
    stage = signatures.needles()
    # One Aho-Corasick pass: the budget grows only with forms no family word covers (TensorFlow's `OOM when
    # allocating tensor`, the localised `已杀死`, faulthandler's `(most recent call first):` and frame lines).
    assert len(stage) < 110
    for sig in signatures.load():
        for needle in sig.needles:
            assert any(f in needle.lower() for f in stage), needle
    healthy = pl.Series([
        "{'loss': 2.3456, 'grad_norm': 1.2345678, 'learning_rate': 4.999e-05, 'epoch': 0.01}",
        " [2025-03-01 10:00:00.123456] iteration      100/  500000 | consumed samples:        51200 | elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 400.1 | learning rate: 1.500000E-04 | global batch size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |",
        "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1234.56 | max allocated: 2345.67 | reserved: 3000.00 | max reserved: 3100.00",
        "[2023-04-28 06:59:46,878] [INFO] [logging.py:96:log_dist] [Rank 0] step=510, skipped=8, lr=[0.001], mom=[(0.9, 0.999)]",
        "[2023-04-28 06:59:46,878] [INFO] [timer.py:260:stop] epoch=0/micro_step=100/global_step=100, RunningAvgSamplesPerSec=12.3, CurrSamplesPerSec=12.1, MemAllocated=4.1GB, MaxMemAllocated=7.9GB",
        "[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%",
        "iter 100: loss 3.2345, time 123.45ms, mfu 38.12%",
        "Epoch 1:   4%|▎         | 40/1095 [00:03<01:37, 10.84it/s, v_num=10]",
    ])
    assert not healthy.str.contains_any(stage, ascii_case_insensitive=True).any()


def test_line_counter_or_indentation_before_the_rank_prefix_keeps_the_rank():
    """Pasted logs put a line counter (LlamaFactory#7396, #8261) or indentation (NVIDIA/nccl#1409) before `[rankN]:`."""
    ev = events_of(
        "[80750] [rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of 79.10 GiB of which 1.06 GiB is free.",
        "    [rank7]:[E816 01:45:40.183009389 ProcessGroupNCCL.cpp:607] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=80078, OpType=BROADCAST, NumelIn=5056, NumelOut=5056, Timeout(ms)=600000) ran for 600002 milliseconds before timing out.",
    )
    assert ev.select("code", "rank").rows() == [("cuda_oom", 2), ("nccl_watchdog_timeout", 7)]
    assert str(ev.get_column("ts")[1]) == "2024-08-16 01:45:40.183009+00:00"

"""Write GPU profiler traces for the playbooks whose evidence only a GPU produces (no GPU here).

These are SYNTHESIZED, not recorded: the event timings are made up to show one problem each,
but every event copies the exact shape of real PyTorch 2.x Kineto exports in
../shared/corpus/torch_profiler (hta_a100_ddp2_rank0_nccl_fields_basetime.json.gz): top-level
keys, `M` thread/process names, `ProfilerStep#N` user annotations, `cpu_op` ops,
`cuda_runtime` cudaLaunchKernel calls (cbid 211) with their `ac2g` flow pairs, `kernel` events
with the CUPTI args and, for NCCL kernels, the collective fields. The playbooks' real-trace
tests run on the corpus traces themselves; these folders are the bundled examples.

Usage: python make_gpu_traces.py SAMPLE_LOGS_DIR
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

PID, MAIN, AUTOGRAD = 2910249, 2910249, 2919752
BASE_NS = 1711964646000000000
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
GEMM = "ampere_sgemm_128x64_tn"
NCCL = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"


class Trace:
    """Accumulates events with the field layout Kineto writes."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        self.events: list[dict] = []
        self.ext = 1
        self.corr = 50000
        self.gpu_free = {7: 0.0, 40: 0.0}  # when each stream can start its next kernel

    def op(self, name: str, ts: float, dur: float, tid: int = MAIN, cat: str = "cpu_op") -> int:
        self.ext += 1
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": round(ts, 3), "dur": round(dur, 3),
                            "args": {"External id": self.ext, "Record function id": self.ext, "Ev Idx": len(self.events)}})
        return self.ext

    def launch(self, ts: float, launch_us: float, kernel: str, kernel_us: float, stream: int = 7, tid: int = MAIN,
               nccl: dict | None = None, after: float = 0.0) -> float:
        """A cudaLaunchKernel call at `ts` and its kernel on `stream`; returns the kernel's end."""
        self.corr += 1
        ext = self.ext
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": tid, "ts": round(ts, 3),
                            "dur": round(launch_us, 3), "args": {"External id": ext, "cbid": 211, "correlation": self.corr}})
        self.events.append({"ph": "s", "id": self.corr, "pid": PID, "tid": tid, "ts": round(ts, 3), "cat": "ac2g", "name": "ac2g"})
        start = max(ts + launch_us + 2.0, self.gpu_free[stream], after)
        args = {"External id": ext, "queued": 0, "device": 0, "context": 1, "stream": stream, "correlation": self.corr,
                "registers per thread": 32, "shared memory": 0, "blocks per SM": 2.370370, "warps per SM": 9.481481,
                "grid": [256, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 15}
        if nccl:
            args.update(nccl)
        self.events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": stream, "ts": round(start, 3),
                            "dur": round(kernel_us, 3), "args": args})
        self.events.append({"ph": "f", "id": self.corr, "pid": 0, "tid": stream, "ts": round(start, 3), "cat": "ac2g", "name": "ac2g",
                            "bp": "e"})
        self.gpu_free[stream] = start + kernel_us
        return start + kernel_us

    def write(self, path: Path, t0: float, t1: float) -> None:
        meta = [{"name": "process_name", "ph": "M", "ts": t0, "pid": PID, "tid": 0, "args": {"name": "python3.10"}},
                {"name": "process_labels", "ph": "M", "ts": t0, "pid": PID, "tid": 0, "args": {"labels": "CPU"}},
                {"name": "process_name", "ph": "M", "ts": t0, "pid": 0, "tid": 0, "args": {"name": "python3.10"}},
                {"name": "process_labels", "ph": "M", "ts": t0, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
                {"name": "thread_name", "ph": "M", "ts": t0, "pid": 0, "tid": 7, "args": {"name": "stream 7 "}},
                {"name": "thread_name", "ph": "M", "ts": t0, "pid": 0, "tid": 40, "args": {"name": "stream 40 "}},
                {"name": "thread_name", "ph": "M", "ts": t0, "pid": PID, "tid": MAIN, "args": {"name": "thread 2910249 (pt_main_thread)"}},
                {"name": "thread_name", "ph": "M", "ts": t0, "pid": PID, "tid": AUTOGRAD, "args": {"name": "thread 2919752 (pt_autograd_0)"}}]
        tail = [{"ph": "X", "cat": "Trace", "ts": t0, "dur": round(t1 - t0, 3), "pid": "Spans", "tid": "PyTorch Profiler",
                 "name": "PyTorch Profiler (0)", "args": {"Op count": 0}},
                {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": t0},
                {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": round(t1 + 10, 3)}]
        doc = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85094695936, "computeMajor": 8,
                                  "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
                                  "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 108,
                                  "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 166912, "sharedMemPerMultiprocessor": 167936}],
            "distributedInfo": {"backend": "nccl", "rank": self.rank, "world_size": self.world},
            "traceEvents": meta + self.events + tail,
            "traceName": str(path.name),
            "displayTimeUnit": "ms",
            "baseTimeNanoseconds": BASE_NS,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(json.dumps(doc, indent=1).encode(), mtime=0))


def launch_bound(path: Path, kernel_us: float, launch_us: float, ops: int) -> None:
    """Steps of many small elementwise ops: each launch costs `launch_us`, each kernel `kernel_us`."""
    tr = Trace(0, 1)
    t = t0 = 4458676416788.066
    for step in range(10, 18):
        s0 = t
        tr.op(f"ProfilerStep#{step}", s0, 0, cat="user_annotation")
        idx = len(tr.events) - 1
        t += 20
        for _ in range(ops):
            tr.op("aten::add_", t, launch_us + 6)
            end = tr.launch(t + 3, launch_us, ADD, kernel_us)
            t = max(t + launch_us + 6, end - 40 if kernel_us > 20 else t + launch_us + 6) + 1
        t = max(t, tr.gpu_free[7]) + 15
        tr.events[idx]["dur"] = round(t - s0, 3)
    tr.write(path, t0 - 100, t)


def ddp(path: Path, overlap: bool) -> None:
    """DDP-style steps: forward and backward GEMMs on stream 7, bucket all-reduces on stream 40,
    issued after backward (no overlap) or during it (overlap)."""
    tr = Trace(0, 2)
    nccl = {"Collective name": "allreduce", "In msg nelems": 6637568, "Out msg nelems": 6637568, "Group size": 2, "dtype": "Float",
            "In split size": "[]", "Out split size": "[]", "Process Group Name": "0", "Process Group Description": "default_pg",
            "Process Group Ranks": "[0, 1]"}
    t = t0 = 4458676416788.066
    for step in range(4, 12):
        s0 = t
        tr.op(f"ProfilerStep#{step}", s0, 0, cat="user_annotation")
        idx = len(tr.events) - 1
        t += 30
        for _ in range(30):  # forward
            tr.op("aten::mm", t, 14)
            tr.launch(t + 3, 6, GEMM, 200)
            t += 16
        t = tr.gpu_free[7]
        for b in range(30):  # backward on the autograd thread
            tr.op("autograd::engine::evaluate_function: MmBackward0", t, 14, tid=AUTOGRAD)
            tr.launch(t + 3, 6, GEMM, 200, tid=AUTOGRAD)
            t += 16
            if overlap and b == 20:  # buckets ready late in backward: their all-reduces overlap its last kernels
                for _ in range(3):
                    tr.op("nccl:all_reduce", t, 30, tid=AUTOGRAD, cat="user_annotation")
                    tr.launch(t + 5, 8, NCCL, 2000, stream=40, tid=AUTOGRAD, nccl=nccl, after=tr.gpu_free[7])
                    t += 32
        if not overlap:  # all buckets reduced only after backward has finished on the GPU
            t = max(t, tr.gpu_free[7])
            for _ in range(3):
                tr.op("nccl:all_reduce", t, 30, tid=MAIN, cat="user_annotation")
                tr.launch(t + 5, 8, NCCL, 2000, stream=40, nccl=nccl, after=tr.gpu_free[7])
                t += 32
        t = max(t, tr.gpu_free[7], tr.gpu_free[40]) + 50
        tr.op("Optimizer.step#SGD.step", t, 80)
        t += 100
        tr.events[idx]["dur"] = round(t - s0, 3)
    tr.write(path, t0 - 100, t)


def main() -> None:
    out = Path(sys.argv[1])
    launch_bound(out / "kernel-launch-bound" / "small-ops-trace" / "rank0.pt.trace.json.gz", kernel_us=2.1, launch_us=7.5, ops=300)
    launch_bound(out / "kernel-launch-bound" / "nearmiss" / "rank0.pt.trace.json.gz", kernel_us=12.0, launch_us=7.5, ops=300)
    ddp(out / "comm-compute-no-overlap" / "ddp-trace" / "rank0.pt.trace.json.gz", overlap=False)
    ddp(out / "comm-compute-no-overlap" / "nearmiss" / "rank0.pt.trace.json.gz", overlap=True)


if __name__ == "__main__":
    main()

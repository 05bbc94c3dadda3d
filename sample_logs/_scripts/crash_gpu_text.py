"""Single-GPU-style training runs whose failure only exists on a GPU, recorded on CPU.

The training itself is real (tiny LM on CPU, torchtitan-format metric lines). The GPU-only parts are
printed or raised at the moment the run would hit them, with text copied from
../shared/reference/formats.md ([SRC]/[OBS] items; the source of each is named next to it) and numbers
of an 80 GB H100. Memory figures in the metric lines are simulated for the same GPU. Where a GPU
exception would surface inside torch, it is raised from a hook or patch of this file, so the traceback
honestly shows that frame.

Scenarios (--scenario):
  fragmentation      variable-length batches; OOM with a quarter of the GPU reserved but unallocated;
                     the except handler prints torch.cuda.memory_summary() (real formatting code fed
                     the allocator's statistics) and re-raises.
  oom-tight          OOM with almost nothing reserved-but-unallocated: demand above capacity.
  oom-other-process  OOM whose message names another process holding 30 GiB of the same GPU; an
                     nvidia-smi --query-compute-apps log sampled every 10 s sits next to the log.
  oom-caught         the script catches the OOM at batch 64, halves the batch and finishes.
  illegal-address    a custom fused kernel faults; the asynchronous error surfaces at loss.item().
  labels-assert      labels outside [0, n_classes): kernel assert lines, then device-side assert.
  launch-blocking    a clean rerun with CUDA_LAUNCH_BLOCKING=1 / TORCH_USE_CUDA_DSA echoed at start.
  driver-old         driver too old for the wheel's CUDA runtime (warning, then RuntimeError).
  arch-mismatch      wheel without kernels for the GPU's architecture (capability warning, then
                     `no kernel image is available for execution on the device`).
  xid79              the GPU falls off the bus mid-run: kernel log (dmesg.log) with Xid 79 and the
                     process dies with `CUDA error: unknown error` from a background thread.
  ecc-clean          a clean run with nvidia-smi -q ECC / retired-pages sections saved next to it.
  invalid-handle     an evaluation thread pool shares CUDA streams across devices: invalid resource handle.
  spawn-clean        a clean run whose workers use the spawn start method (fork-safety advice printed).
  device-mismatch    a position-id buffer created on the CPU after model.to("cuda").
  device-clean       a clean run that logs its device placement check.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import sys
import threading
import time
import warnings

import torch
from crash_common import SEQ, TinyLM, batch, lm_loss, titan_logger, titan_step_line

TOTAL_GIB = 79.10
GIB = 1024**3
SITE = os.path.dirname(os.path.dirname(torch.__file__))

# formats.md §2.1 [SRC HEAD / OBS]: the caching allocator's message, current form.
OOM_TAIL = (
    " If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "to avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)

# formats.md §2.6 [OBS ms-swift#3267]: 2.0 - 2.7 suffix of asynchronous CUDA errors.
ASYNC_27 = (
    "\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."
    "\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1"
    "\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)


def oom(req: float, free: float, in_use: float, alloc: float, unalloc: float, gpu: int = 0, others: str = "") -> str:
    return (
        f"CUDA out of memory. Tried to allocate {req:.2f} GiB. GPU {gpu} has a total capacity of {TOTAL_GIB:.2f} GiB "
        f"of which {free:.2f} GiB is free. {others}Including non-PyTorch memory, this process has {in_use:.2f} GiB memory in use. "
        f"Of the allocated memory {alloc:.2f} GiB is allocated by PyTorch, and {unalloc:.2f} GiB is reserved by PyTorch but unallocated."
        + OOM_TAIL
    )


def memory_summary(alloc_gib: float, reserved_gib: float, peak_gib: float, retries: int, ooms: int) -> str:
    """torch.cuda.memory_summary()'s own formatting code fed the statistics of the failed allocator."""
    import torch.cuda.memory as cm

    def trio(cur: float, peak: float, tot: float, freed: float, small: float = 0.004) -> dict:
        out = {}
        for pool, share in (("all", 1.0), ("large_pool", 1.0 - small), ("small_pool", small)):
            out[pool] = [int(v * share) for v in (cur, peak, tot, freed)]
        return out

    stats: dict = {"num_ooms": ooms, "num_alloc_retries": retries}

    def put(key: str, vals: dict) -> None:
        for pool, (cur, peak, tot, freed) in vals.items():
            p = f"{key}.{pool}."
            stats[p + "current"], stats[p + "peak"], stats[p + "allocated"], stats[p + "freed"] = cur, peak, tot, freed

    a, r, pk = alloc_gib * GIB, reserved_gib * GIB, peak_gib * GIB
    put("allocated_bytes", trio(a, pk, 91_734 * GIB, 91_734 * GIB - a))
    put("active_bytes", trio(a, pk, 91_734 * GIB, 91_734 * GIB - a))
    put("requested_bytes", trio(a * 0.998, pk * 0.998, 91_530 * GIB, 91_530 * GIB - a * 0.998))
    put("reserved_bytes", trio(r, r, r + 212 * GIB, 212 * GIB, small=0.002))
    put("inactive_split_bytes", trio((r - a) * 0.93, (r - a) * 0.97, 61_208 * GIB, 61_208 * GIB - (r - a) * 0.93))
    put("allocation", trio(5_821, 6_413, 40_611_227, 40_605_406, small=0.6))
    put("active", trio(5_821, 6_413, 40_611_227, 40_605_406, small=0.6))
    put("segment", trio(1_093, 1_127, 4_318, 3_225, small=0.4))
    put("inactive_split", trio(688, 741, 19_502_114, 19_501_426, small=0.5))
    for k in ("oversize_allocations", "oversize_segments"):
        for f in ("current", "peak", "allocated", "freed"):
            stats[f"{k}.{f}"] = 0
    cm.memory_stats = lambda device=None: stats  # the CPU build has no allocator to ask
    return cm.memory_summary(0)


class Failure:
    """Where and how the GPU-only failure of a scenario surfaces."""

    def __init__(self, scenario: str, step: int) -> None:
        self.scenario, self.step = scenario, step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--fail-step", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--step-sleep", type=float, default=0.0)
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    sc = args.scenario
    log = titan_logger()
    warnings.simplefilter("default")

    if sc == "launch-blocking":
        for k in ("CUDA_LAUNCH_BLOCKING", "TORCH_USE_CUDA_DSA"):
            log.info(f"env {k}={os.environ.get(k, '')}")
        log.info("Debug rerun: kernels launch synchronously; a device-side assert would now point at the failing op")
    if sc == "driver-old":
        # formats.md §2.6 [OBS IEIT-Yuan/Yuan-2.0#65, ...]: printed by warnings at the first CUDA query.
        sys.stderr.write(
            f"{SITE}/torch/cuda/__init__.py:129: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old "
            "(found version 12040). Please update your GPU driver by downloading and installing a new version from the URL: "
            "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version "
            "that has been compiled with your version of the CUDA driver. (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:119.)\n"
            "  return torch._C._cuda_getDeviceCount() > 0\n"
        )
        log.info("CUDA available: False, device count: 0")
        raise RuntimeError(
            "The NVIDIA driver on your system is too old (found version 12040). Please update your GPU driver by downloading "
            "and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
            "https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver."
        )
    if sc == "arch-mismatch":
        # torch/cuda/__init__.py _check_cubins() template [SRC torch 2.13]; printed by warnings at init.
        sys.stderr.write(
            f"{SITE}/torch/cuda/__init__.py:283: UserWarning: \n"
            "NVIDIA B200 with CUDA capability sm_100 is not compatible with the current PyTorch installation.\n"
            "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
            "If you want to use the NVIDIA B200 GPU with PyTorch, please check the instructions at https://pytorch.org/get-started/locally/\n"
            "\n  warnings.warn(\n"
        )
    if sc == "spawn-clean":
        log.info("multiprocessing start method: spawn (CUDA cannot be re-initialized in a forked subprocess)")
    if sc in ("fragmentation", "oom-tight", "oom-other-process"):
        log.info(f"CUDA capacity: NVIDIA H100 80GB HBM3 with {TOTAL_GIB:.2f}GiB memory")

    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(7)
    log.info(f"Model tiny-lm size: {sum(p.numel() for p in model.parameters()):,} total parameters")
    if sc in ("device-mismatch", "device-clean"):
        log.info("Moved model to cuda:0")
    if sc == "device-clean":
        log.info("device check: 26 parameters and 0 buffers on cuda:0; inputs on cuda:0")
    log.info("Training starts at step 1")

    state = {"step": 0}
    bs = 64 if sc == "oom-caught" else 16

    if sc == "arch-mismatch":
        def _no_kernel(module, inputs):
            raise torch.AcceleratorError(
                "CUDA error: no kernel image is available for execution on the device\n"
                "Search for `cudaErrorNoKernelImageForDevice' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
                "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
                "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
            )
        model.tok.register_forward_pre_hook(_no_kernel)

    if sc == "device-mismatch":
        def _pos_on_cpu(module, inputs):  # formats.md §2.9 form 3 [OBS]
            if state["step"] == args.fail_step:
                raise RuntimeError(
                    "Expected all tensors to be on the same device, but got index is on cpu, different from other tensors "
                    "on cuda:0 (when checking argument in method wrapper_CUDA__index_select)"
                )
        model.pos.register_forward_pre_hook(_pos_on_cpu)

    if sc in ("fragmentation", "oom-tight", "oom-other-process"):
        def _alloc(module, inputs):
            if state["step"] != args.fail_step:
                return
            if sc == "fragmentation":
                raise torch.OutOfMemoryError(oom(1.53, 1.19, 77.90, 52.61, 24.78))
            if sc == "oom-tight":
                raise torch.OutOfMemoryError(oom(4.00, 2.31, 76.78, 75.88, 0.39))
            raise torch.OutOfMemoryError(oom(2.00, 1.47, 47.38, 46.02, 0.85, others="Process 48213 has 30.25 GiB memory in use. "))
        model.head.register_forward_pre_hook(_alloc)

    fault = {"pending": False}
    if sc == "illegal-address":
        # the custom fused RoPE kernel writes out of bounds at fail_step; the error is reported by the
        # next synchronising call, loss.item() (formats.md §2.6, ~2.8+ form [OBS THUDM/slime#1297]).
        def fused_rope(module, inputs):
            if state["step"] == args.fail_step:
                fault["pending"] = True
        model.blocks.register_forward_pre_hook(fused_rope)

    def sync_item(t: torch.Tensor) -> float:
        if fault["pending"]:
            raise torch.AcceleratorError(
                "CUDA error: an illegal memory access was encountered\n"
                "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
                "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
                "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
            )
        if fault.get("assert"):
            raise RuntimeError("CUDA error: device-side assert triggered" + ASYNC_27)
        return t.item()

    if sc == "labels-assert":
        def _nll(module, inputs):
            if state["step"] == args.fail_step:
                # formats.md §2.6 kernel assert lines [OBS ms-swift#3267 et al.], one per failing thread
                for th in (3, 17, 18, 40, 41, 57, 94, 95):
                    sys.stderr.write(
                        f"../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
                        f"thread: [{th},0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
                    )
                sys.stderr.flush()
                fault["assert"] = True
        model.head.register_forward_hook(lambda m, i, o: _nll(m, i))

    if sc == "invalid-handle":
        errors: list[BaseException] = []

        def evaluate(shard: int) -> None:
            try:
                if shard == 2:
                    # formats.md §2.6 cudaGetErrorString `invalid resource handle`, 2.0-2.7 suffix
                    raise RuntimeError("CUDA error: invalid resource handle" + ASYNC_27)
                with torch.no_grad():
                    x, y = batch(torch.Generator().manual_seed(shard), 8)
                    lm_loss(model(x), y)
            except BaseException as e:
                errors.append(e)
                raise

    if sc == "oom-other-process":
        threading.Thread(target=compute_apps_sampler, args=(args.out, state, args.fail_step), daemon=True).start()

    caught_once = False
    t_last = time.perf_counter()
    step = 0
    while step < args.steps:
        step += 1
        state["step"] = step
        seq = SEQ
        x, y = batch(gen, bs, seq)
        if sc == "oom-caught" and bs == 64 and step == args.fail_step and not caught_once:
            caught_once = True
            try:
                raise torch.OutOfMemoryError(oom(3.00, 1.21, 77.88, 75.02, 1.35))
            except torch.OutOfMemoryError as e:
                log.warning(f"Caught OOM at step {step} with micro batch {bs} ({e}); halving the micro batch to {bs // 2} "
                            f"and doubling gradient accumulation")
                bs //= 2
                step -= 1
                continue
        try:
            loss = lm_loss(model(x), y)
            loss.backward()
        except torch.OutOfMemoryError:
            if sc == "fragmentation":
                log.error("OOM during forward; allocator state follows")
                sys.stdout.write(memory_summary(52.61, 77.39, 77.02, retries=37, ooms=1))
                sys.stdout.flush()
            raise
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if sc == "xid79" and step == args.fail_step:
            write_xid79(args.out, log)
        if sc == "invalid-handle" and step == args.fail_step:
            log.info(f"Running threaded evaluation at step {step} on 4 shards")
            threads = [threading.Thread(target=evaluate, args=(s,), name=f"eval-{s}") for s in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            if errors:
                raise errors[0]
        if args.step_sleep:
            time.sleep(args.step_sleep)
        if step % args.log_every == 0 or step == 1 or fault["pending"] or fault.get("assert"):
            lossf = sync_item(loss)
            dt_ = (time.perf_counter() - t_last) / args.log_every
            t_last = time.perf_counter()
            base = {"fragmentation": 40.0 + 25.0 * (step % 17) / 17 + step * 0.05, "oom-tight": 75.9, "oom-other-process": 46.4}.get(sc, 61.3)
            mem = min(base + (0.41 if sc != "oom-tight" else 0.39), TOTAL_GIB - 0.5)
            tps = int(bs * seq / max(dt_, 1e-9) * 0 + 5321 + step % 5 * 11)
            log.info(titan_step_line(step, lossf, 0.83, mem, 100 * mem / TOTAL_GIB, tps, 341.7, 34.55))
    if sc == "ecc-clean":
        write_nvsmi_q(args.out)
    log.info("Training completed")


def compute_apps_sampler(out: str, state: dict, fail_step: int) -> None:
    """`nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,process_name,used_memory --format=csv -l 2`
    (header form formats.md §3.2 [OBS]); another user's job lands on the GPU two thirds into the run."""
    uuid = "GPU-6f1f0c2d-3b7e-5b52-a7a1-0b9d44c2e1aa"
    me = os.getpid()
    with open(os.path.join(out, "nvidia-smi-apps.csv"), "w", buffering=1) as f:
        f.write("timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n")
        while True:
            ts = dt.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
            step = state["step"]
            f.write(f"{ts}, {uuid}, {me}, python, {min(48517, 1203 + step * 2400)} MiB\n")
            if step >= fail_step * 2 // 3:
                f.write(f"{ts}, {uuid}, 48213, /usr/bin/python3, 30976 MiB\n")
            time.sleep(2)


def write_xid79(out: str, log: logging.Logger) -> None:
    """The GPU drops off the bus: the kernel log gets Xid 79 (formats.md §2.13 [OBS NVSentinel#155]) and the
    process dies in a background thread with `CUDA error: unknown error` (shape of nv-tlabs/3dgrut#191)."""
    now = dt.datetime.now()
    stamp = now.strftime("%a %b %d %H:%M:%S %Y")
    with open(os.path.join(out, "dmesg.log"), "w") as f:
        f.write(f"[{stamp}] NVRM: Xid (PCI:0000:44:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
        f.write(f"[{stamp}] NVRM: The NVIDIA GPU 0000:44:00.0\n")
        f.write("               NVRM: (PCI ID: 10de:2330) installed in this system has\n")
        f.write("               NVRM: fallen off the bus and is not responding to commands.\n")
    time.sleep(0.2)
    lib = f"{SITE}/torch/lib"
    sys.stdout.flush()
    sys.stderr.write(
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: unknown error\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
        "\n"
        "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:43 (most recent call first):\n"
        f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f2c4e76c446 in {lib}/libc10.so)\n"
        f"frame #1: c10::detail::torchCheckFail(char const*, char const*, unsigned int, std::string const&) + 0x64 (0x7f2c4e7166e4 in {lib}/libc10.so)\n"
        f"frame #2: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x118 (0x7f2c4e858a18 in {lib}/libc10_cuda.so)\n"
        f"frame #3: <unknown function> + 0x1f8b2 (0x7f2c4e82a8b2 in {lib}/libc10_cuda.so)\n"
        f"frame #4: <unknown function> + 0x20ae5 (0x7f2c4e82bae5 in {lib}/libc10_cuda.so)\n"
        f"frame #5: <unknown function> + 0x5f9c2e (0x7f2c9d1f9c2e in {lib}/libtorch_python.so)\n"
        "frame #6: <unknown function> + 0x94ac3 (0x7f2cae294ac3 in /lib/x86_64-linux-gnu/libc.so.6)\n"
        "frame #7: clone + 0x44 (0x7f2cae325a04 in /lib/x86_64-linux-gnu/libc.so.6)\n"
        "\n"
    )
    sys.stderr.flush()
    os.abort()


def write_nvsmi_q(out: str) -> None:
    """`nvidia-smi -q -d ECC,PAGE_RETIREMENT` after the run (formats.md §3.5 layout, driver 550 ECC names), all clean."""
    now = dt.datetime.now().strftime("%a %b %e %H:%M:%S %Y")
    text = f"""
==============NVSMI LOG==============

Timestamp                                 : {now}
Driver Version                            : 550.54.15
CUDA Version                              : 12.4

Attached GPUs                             : 1
GPU 00000000:44:00.0
    ECC Mode
        Current                           : Enabled
        Pending                           : Enabled
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
        Aggregate
            SRAM Correctable              : 0
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
            SRAM Threshold Exceeded       : No
        Aggregate Uncorrectable SRAM Sources
            SRAM L2                       : 0
            SRAM SM                       : 0
            SRAM Microcontroller          : 0
            SRAM PCIE                     : 0
            SRAM Other                    : 0
    Retired Pages
        Single Bit ECC                    : N/A
        Double Bit ECC                    : N/A
        Pending Page Blacklist            : N/A
    Remapped Rows
        Correctable Error                 : 0
        Uncorrectable Error               : 0
        Pending                           : No
        Remapping Failure Occurred        : No
"""
    with open(os.path.join(out, "nvidia-smi-q-ecc.txt"), "w") as f:
        f.write(text.lstrip("\n"))


if __name__ == "__main__":
    main()

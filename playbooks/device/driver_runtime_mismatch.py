"""driver-runtime-mismatch: the installed driver, CUDA runtime, NCCL or GPU architecture do not fit the wheel."""

from __future__ import annotations

from forensics.playbooks.base import Playbook, declare
from forensics.playbooks.evidence import combine, detection, events, first_message

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

DRIVER_CODES = ("cuda_driver_insufficient", "cuda_driver_too_old", "no_nvidia_driver", "cuda_init_failed",
                "nvml_driver_mismatch")
ARCH_CODES = ("no_kernel_image", "cuda_arch_incompatible")
# cuRAND could not launch its generator kernel (Caffe's first dropout or filler): a toolkit too old for the GPU (CUDA
# 7.x on a Pascal card). After a kernel fault every launch fails alike: then it is that fault's aftermath.
LAUNCH_CODES = ("curand_launch_failure",)
KERNEL_FAULT_CODES = ("cuda_kernel_assert", "device_side_assert", "illegal_memory_access")
# torch initialised CUDA and found no device: none visible to the process (CUDA_VISIBLE_DEVICES naming an
# index the machine or the job's allocation does not have, a job or container given no GPU).
NO_DEVICE_CODES = ("cuda_no_device",)
# Horovod's NCCL call answered `invalid data type`: NCCL 1.x's result for a data type past its enum, so the library
# loaded is an NCCL 1.x one under an NCCL 2 build (horovod docs/troubleshooting.rst).
NCCL_CODES = ("nccl_version_mismatch",)
# A compiled extension that cannot resolve a torch C++ symbol (built against another torch), or a Triton kernel bundled
# with a model or library that the installed Triton cannot compile (written for another Triton API).
BUILD_CODES = ("extension_abi_mismatch", "triton_compile_error")
# TensorFlow / XLA built against one cuDNN and loading another (`Loaded runtime CuDNN library: X but source was
# compiled with Y`): the convolution that follows fails (a fatal `Check failed: …GetConvolveAlgorithms`, an abort),
# a consequence of the mismatch, so this error comes first.
CUDNN_CODES = ("cudnn_version_mismatch",)
# A library with its own CUDA binaries (bitsandbytes) saw the GPU through torch but could not load the CUDA runtime
# it needs (libcudart.so off the library path, no binary for this CUDA version).
LIBRARY_CODES = ("cuda_library_not_found",)
# The UserWarning torch prints when CUDA cannot initialise (the run then goes on without a GPU).
INIT_WARNING = r"UserWarning: CUDA initialization:|^CUDA initialization:"
NO_DRIVER = r"Found no NVIDIA driver on your system"

PLAYBOOK = declare(
    Playbook(
        id="driver-runtime-mismatch",
        title="Driver / CUDA runtime / GPU architecture mismatch",
        category="device",
        severity=Severity.CRITICAL,
        tables=("events",),
        explains=("nccl-timeout", "device-assert"),
        codes=("cuda_arch_incompatible", "cuda_driver_insufficient", "cuda_driver_too_old", "cuda_init_failed",
               "cuda_kernel_assert", "cuda_library_not_found", "cuda_no_device", "cudnn_version_mismatch",
               "curand_launch_failure", "device_side_assert", "extension_abi_mismatch", "illegal_memory_access",
               "nccl_version_mismatch", "no_kernel_image", "no_nvidia_driver", "nvml_driver_mismatch", "paddle_external_fault",
               "shell_signal_exit", "triton_compile_error"),
        causes=(
            Cause("driver_too_old", "The NVIDIA driver is older than the CUDA runtime the wheel was built for",
                  verify="nvidia-smi (driver / max CUDA version) vs python -c 'import torch; print(torch.version.cuda)'",
                  fix="Install a wheel built for an older CUDA (e.g. the cu118 index) or upgrade the driver", prior=0.5),
            Cause("wrong_arch", "The wheel has no kernels for this GPU architecture (sm_XX)",
                  verify="python -c 'import torch; print(torch.cuda.get_arch_list(), torch.cuda.get_device_capability())'",
                  fix="Install a build that includes this architecture, or build extensions with TORCH_CUDA_ARCH_LIST set", prior=0.35),
            Cause("no_visible_gpu", "No GPU is visible to the process: CUDA_VISIBLE_DEVICES names a device index that does not "
                                    "exist here (often hard-coded in the script), or the job/container was given no GPU",
                  verify="echo $CUDA_VISIBLE_DEVICES; nvidia-smi -L; grep -rn CUDA_VISIBLE_DEVICES in the scripts; the job's --gres/--gpus",
                  fix="Remove or correct the hard-coded CUDA_VISIBLE_DEVICES; request GPUs from the scheduler (--gres=gpu:N) "
                      "or the container runtime (--gpus all)", prior=0.3),
            Cause("cudnn_mismatch", "The cuDNN library loaded at run time is not the one the framework was compiled against "
                                    "(another cuDNN earlier on the library path, or one a package manager pulled in)",
                  verify="python -c 'import tensorflow as tf; print(tf.sysconfig.get_build_info())'; ldconfig -p | grep libcudnn; "
                         "conda list cudnn",
                  fix="Install the cuDNN the wheel was built for (TensorFlow's tested-build table), or the framework build "
                      "matching the installed cuDNN; remove the stray libcudnn from LD_LIBRARY_PATH", prior=0.3),
            Cause("cuda_library_not_found", "A library with its own CUDA binaries (bitsandbytes) cannot load the CUDA runtime "
                                            "it was built for: libcudart.so is not on the library path, or no binary of the "
                                            "library matches the installed CUDA version",
                  verify="python -m bitsandbytes; find / -name 'libcudart.so*' 2>/dev/null; echo $LD_LIBRARY_PATH",
                  fix="Add the folder of libcudart.so (the CUDA toolkit's lib64, or site-packages/nvidia/cuda_runtime/lib) to "
                      "LD_LIBRARY_PATH, or install the library's build for the installed CUDA", prior=0.2),
            Cause("framework_build_mismatch", "The framework's GPU build does not match the CUDA/cuDNN of the environment, or "
                                              "another native library it loaded crashed (a segmentation fault outside the "
                                              "framework's own code)",
                  verify="python -c 'import paddle; paddle.utils.run_check()'; compare paddle.version.cuda() and "
                         "paddle.version.cudnn() with nvidia-smi and the installed cuDNN",
                  fix="Install the paddlepaddle-gpu wheel built for the installed CUDA (its cuXXX package index), or the "
                      "CUDA/cuDNN the wheel was built for", prior=0.15),
            Cause("extension_build_mismatch", "A compiled extension (flash-attn, torch_scatter, a project's _C.so) was built "
                                              "against another torch version, or a Triton kernel shipped with the model or "
                                              "library was written for another Triton version",
                  verify="pip show torch flash-attn triton; python -c 'import torch; print(torch.__version__, torch.version.cuda)' "
                         "against the versions the extension's wheel or the kernel's repository names",
                  fix="Rebuild the extension against the installed torch (pip install --no-build-isolation --no-cache-dir, "
                      "FLASH_ATTENTION_FORCE_BUILD=TRUE) or install its wheel for this torch; pin the Triton release the "
                      "kernel was written for, or uninstall Triton so the model falls back to PyTorch attention", prior=0.3),
            Cause("nccl_mismatch", "Different NCCL/CUDA versions across nodes or against the system library",
                  verify="NCCL_DEBUG=VERSION on every node; python -m torch.utils.collect_env",
                  fix="Use one container image on all nodes; don't LD_PRELOAD a different libnccl", prior=0.15),
        ),
        verify="nvidia-smi; python -m torch.utils.collect_env",
        fix="Install the wheel that matches the driver and GPU architecture, identically on every node",
        thresholds={},
        doc="""\
## Symptom
`CUDA driver version is insufficient for CUDA runtime version`, `no kernel image is available for
execution on the device`, `… with CUDA capability sm_XX is not compatible with the current PyTorch
installation`, flash-attn's `FlashAttention only supports Ampere GPUs or newer` (a V100 or T4), TensorFlow's `Loaded runtime
CuDNN library: X but source was compiled with Y` (Paddle's `[cudnn init] libcudnn v5 with header v7 unmatched!`,
PyTorch's `cuDNN version incompatibility: PyTorch was compiled against (…) but …`), Caffe's `CURAND_STATUS_LAUNCH_FAILURE`
at its first random fill (a CUDA toolkit too old for the GPU), bitsandbytes' `CUDA Setup failed despite GPU being available` (it cannot
load libcudart), NCCL version mismatches (Horovod's `ncclAllReduce failed: invalid data type`: an NCCL 1.x library under an
NCCL 2 build), an extension whose import fails on `undefined symbol: _ZN3c10…` (a torch C++ symbol: built against another
torch), a Triton `CompilationError: at L:C:` in a kernel bundled with a model or library (written for another Triton), `No CUDA GPUs are available` (torch found no device it may use:
usually `CUDA_VISIBLE_DEVICES` names an index this machine or job does not have; Jittor's `Check failed: count>0  No
device found.`, the runtime's `no CUDA-capable device is detected`), PaddlePaddle's fatal-signal block for a
`Segmentation fault` whose traceback section reads `No stack trace in paddle, may be caused by external reasons` (no
frame was Paddle's: a native library of the environment crashed, most often a paddlepaddle-gpu build for another CUDA).

## Why it matters
Nothing in the training code is wrong; the environment is. The run fails at its first CUDA call, or
worse, one node of many differs.

## Evidence
`events` with driver, architecture, cuDNN-version, NCCL-version and extension-build codes, and torch finding no visible device (which
ranks `no_visible_gpu` first: the driver answered, the process was shown no GPU).

## Known false positives
None known for the error forms. A cuRAND launch failure after a kernel fault (device-side assert, illegal memory
access) is that fault's aftermath and is not read here. Paddle's `No stack trace in paddle` segmentation fault proves only that the fault lay
outside Paddle: `medium`, confidence 0.4 (another native library, cv2 or a data loader's, may be the one that crashed). The sm_XX compatibility text and the `UserWarning: CUDA initialization: …`
forms are warnings (torch goes on without the GPU): `medium` when no error follows, and `info` when the
warning only says no NVIDIA driver was found (a CPU-only machine running a CUDA build). A Triton `CompilationError`
in a kernel being written (the user's own, not one shipped with a model or library) is that kernel's bug, which the
error alone does not tell apart; a crash of torch's own libraries on an undefined torch symbol is two torch installs
mixed (the same fix: one install).
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Driver, architecture and NCCL-version errors."""
    import polars as pl

    drv, arch, nccl = events(ctx, DRIVER_CODES), events(ctx, ARCH_CODES), events(ctx, NCCL_CODES)
    if not ctx.events_of(*KERNEL_FAULT_CODES).height:
        arch = combine(arch, events(ctx, LAUNCH_CODES))
    none_visible, cudnn, library = events(ctx, NO_DEVICE_CODES), events(ctx, CUDNN_CODES), events(ctx, LIBRARY_CODES)
    build = events(ctx, BUILD_CODES)
    parts = [p for p in (drv, arch, nccl, none_visible, cudnn, library, build) if p.height]
    if not parts:
        return None
    ev = combine(*parts)
    causes: dict[str, float] = {}
    if drv.height:
        causes["driver_too_old"] = 0.9
    if arch.height:
        causes["wrong_arch"] = 0.9
    if nccl.height:
        causes["nccl_mismatch"] = 0.9
    if build.height:
        causes["extension_build_mismatch"] = 1.0
    if none_visible.height:
        causes["no_visible_gpu"] = 1.0
    if cudnn.height:
        causes["cudnn_mismatch"] = 1.0
    if library.height:
        causes["cuda_library_not_found"] = 1.0
    # torch prints driver problems at CUDA initialisation as a UserWarning and goes on without the GPU.
    raised = ev.filter((pl.col("severity") == "error") & ~pl.col("message").str.contains(INIT_WARNING))
    only_warning = raised.height == 0
    severity = Severity.MEDIUM if only_warning else None
    if only_warning and ev.get_column("message").str.contains(NO_DRIVER).all():
        # No driver at all: a CPU-only machine running a CUDA build; nothing failed.
        severity = Severity.INFO
    return detection(ev, f"environment mismatch: {first_message(ev)}", causes,
                     confidence=0.6 if only_warning else 0.95, severity=severity)

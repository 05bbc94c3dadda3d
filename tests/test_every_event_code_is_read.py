"""Every event code of the signature table is read by some playbook, or is listed here with the reason
it is not: a new code needs a decision, not silence."""

from __future__ import annotations

import tomllib

from forensics.playbooks.base import registry

from tests.conftest import ROOT

# code -> why no playbook reads it (advice lines prove nothing; the rest have no playbook of PLAYBOOKS.md
# that their text would prove, or are consequences whose cause is printed elsewhere).
UNREAD = {
    "cuda_dsa_advice": "advice",
    "cuda_error_lookup_advice": "advice",
    "cuda_launch_blocking_advice": "advice",
    "cuda_log_file_advice": "advice",
    "expandable_segments_advice": "advice",
    "max_split_size_advice": "advice",
    "cuda_oom_detail": "detail lines of an OOM block; cuda-oom reads the OOM message's own fields",
    "gpu_process_memory": "old per-process memory lines; cuda-oom's foreign-process cause reads the OOM text and gpu_procs",
    "memory_summary_ooms": "a memory summary's OOM count: the OOM itself is printed (cuda_oom) or was caught and cannot be dated",
    "anomaly_forward_trace": "the forward traceback anomaly mode prints before the error it belongs to; that error is read",
    "cudnn_error": "CUDNN_STATUS_* covers OOM, bad input and install problems alike: the status alone names no playbook",
    "cudnn_no_algorithm": "frequently an OOM, but also a cuDNN install mismatch: not proof of cuda-oom",
    "dtype_mismatch": "no dtype playbook in PLAYBOOKS.md",
    "fsdp_dtype_mismatch": "no dtype playbook in PLAYBOOKS.md",
    "param_not_gathered": "ZeRO-3/FSDP usage error: no playbook in PLAYBOOKS.md",
    "gradscaler_disabled": "CPU-only run with a CUDA GradScaler: harmless",
    "gradscaler_misuse": "API misuse crash: no playbook in PLAYBOOKS.md",
    "gradscaler_no_inf_checks": "no parameter had a gradient: a crash, not lora-silent-zero's silent zeroing",
    "lr_scheduler_before_optimizer": "usually GradScaler skipping the first steps: normal",
    "kernel_version_warning": "a host kernel advisory",
    "no_grad_fn": "backward of a graph without grad: a crash with no playbook (frozen inputs)",
    "shape_mismatch": "model code error: no playbook",
    "python_warning": "generic warnings",
    "nccl_network": "NCCL INFO: which transport was chosen",
    "nccl_version": "NCCL INFO: version banner",
    "nccl_process_teardown": "consequence line after an NCCL failure that is read",
    "torchrun_worker_group_failed": "elastic restart notice: a consequence of the failure that is read",
    "rendezvous_error": "rendezvous closed/timeout: a consequence of a restart or of a store failure that is read",
    "store_bind_failed": "master port in use: configuration, no playbook",
    "store_listen_failed": "master port in use: configuration, no playbook",
    "store_connection_lost": "TCPStore peer reset: the consequence of another process's failure, which is read",
    "hf_hub_unreachable": "no route to the Hugging Face Hub and nothing cached: a setup failure before training, no playbook in PLAYBOOKS.md",
    "torch_compile_failed": "torch.compile backend crash (BackendCompilerFailed / InductorError): no playbook in PLAYBOOKS.md",
    "cuda_invalid_device": "a device index past the visible GPUs (more ranks per node than GPUs): a launch misconfiguration, no playbook in PLAYBOOKS.md; unclassified-failure reads it among the failure signals",
    "dataloader_too_many_open_files": "the per-process open-file limit (EMFILE), neither host RAM nor /dev/shm: no playbook in PLAYBOOKS.md; unclassified-failure reads it among the failure signals",
    "too_many_open_files": "the per-process open-file limit (EMFILE), neither host RAM nor /dev/shm: no playbook in PLAYBOOKS.md; unclassified-failure reads it among the failure signals",
    "mpi_runtime_error": "Open MPI's runtime aborted the launch (ORTE_ERROR_LOG, FORCE-TERMINATE): a launcher/library install failure with no playbook in PLAYBOOKS.md; unclassified-failure reads it among the failure signals",
    "job_failed_report": "a job runner says its task raised (Hydra, the W&B agent): the task's own error is read; alone, unclassified-failure reads it among the failure signals",
}


def test_every_code_is_read_or_deliberately_unread():
    table = tomllib.loads((ROOT / "parsers" / "signatures.toml").read_text(encoding="utf-8"))
    codes = {s["code"] for s in table["signature"]}
    # A playbook's declared codes are the ones its detectors read (tests/test_playbook_declaration.py).
    read = {c for pb in registry().values() for c in pb.codes}
    unread = codes - read
    assert unread == set(UNREAD), (sorted(unread - set(UNREAD)), sorted(set(UNREAD) - unread))

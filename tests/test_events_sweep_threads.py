"""A sweep of real error logs from public issue threads by category (ROCm/HIP, amdgpu kernel lines,
DeepSpeed launcher, DataLoader workers, checkpoint writes, cuBLAS/cuDNN, distributed store/rendezvous):
codes, lines, ranks and fields of their events (tests/recordings/issues, sources in SOURCES.md)."""

from __future__ import annotations

import json

import polars as pl

from tests.test_signatures import events_of
from tests.test_signatures_issues import ingest_issue, rows


def codes(ev: pl.DataFrame) -> list[tuple[int, str]]:
    return ev.sort("line", "code").select("line", "code").rows()


# --- ROCm / HIP ------------------------------------------------------------------------------


def test_pytorch_147626_hip_invalid_device_function_unquoted_dsa_line(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_147626_hip_invalid_device_function.log")
    assert codes(ev) == [(1, "no_kernel_image"), (2, "cuda_launch_blocking_advice"), (4, "cuda_dsa_advice")]
    assert rows(ev, "no_kernel_image", "form") == [(1, None, "hip")]


def test_rocm_5245_hip_illegal_address(tmp_path):
    ev = ingest_issue(tmp_path, "rocm_5245_hip_illegal_address.log")
    assert codes(ev) == [(1, "python_traceback"), (4, "illegal_memory_access"), (5, "cuda_error_lookup_advice"),
                         (6, "cuda_launch_blocking_advice"), (8, "cuda_dsa_advice")]
    assert rows(ev, "cuda_error_lookup_advice", "cuda_error_name") == [(5, None, "hipErrorIllegalAddress")]


def test_rocm_6003_lookup_line_links_amd_docs(tmp_path):
    ev = ingest_issue(tmp_path, "rocm_6003_accelerator_error_terminate.log")
    assert rows(ev, "terminate_called", "exc_type") == [(1, None, "c10::AcceleratorError")]
    assert rows(ev, "cuda_error_lookup_advice", "cuda_error_name") == [(3, None, "hipErrorIllegalAddress")]
    assert ev.filter(pl.col("code") == "illegal_memory_access").get_column("line").to_list() == [2]


def test_rocm_hsa_memory_access_fault_is_an_illegal_memory_access(tmp_path):
    ev = ingest_issue(tmp_path, "rocm_5051_hsa_fault_and_gfxhub.log")
    assert rows(ev, "illegal_memory_access", "form", "node", "address", "reason") == [
        (1, None, "hsa", "1", "0x7f2a53193000", "Page not present or supervisor privilege")]
    assert rows(ev, "amdgpu_page_fault", "pci", "hub", "ring", "vmid", "pasid") == [(3, None, "0000:0b:00.0", "gfxhub", "24", "8", "32792")]
    # The coredump and `gmc_v11_0_process_interrupt: N callbacks suppressed` lines are not events.
    assert set(ev.get_column("line").to_list()) == {1, 3}
    ev = ingest_issue(tmp_path / "b", "rocm_1535_hsa_fault_quoted.log")
    assert rows(ev, "illegal_memory_access", "node", "agent") == [(1, None, "2", "0x55fea5592860")]


def test_amdgpu_ring_timeouts_dmesg_and_journal(tmp_path):
    ev = ingest_issue(tmp_path, "cosmic_3764_amdgpu_ring_timeout_reset.log")
    assert rows(ev, "amdgpu_ring_timeout", "uptime_s", "pci", "ring", "signaled", "emitted") == [
        (5, None, "312.522692", "0000:28:00.0", "gfx_0.0.0", "57638", "57641")]
    ev = ingest_issue(tmp_path / "b", "rocm_5999_amdgpu_comp_ring_page_fault.log")
    assert rows(ev, "amdgpu_ring_timeout", "pci", "ring") == [(1, None, "0000:04:00.0", "comp_1.0.1")]
    assert rows(ev, "amdgpu_page_fault", "ring", "vmid") == [(7, None, "32", "0")]
    ev = ingest_issue(tmp_path / "c", "picom_1390_amdgpu_job_timedout.log")
    assert rows(ev, "amdgpu_ring_timeout", "ring", "signaled") == [(1, None, "gfx_0.0.0", "5235351")]
    # `[drm] REG_WAIT timeout 1us * 100000 tries` is display-engine chatter, not a ring timeout.
    assert 4 not in ev.get_column("line").to_list()


def test_amdgpu_near_misses():
    assert events_of(
        "amdgpu 0000:04:00.0: amdgpu: Ring comp_1.0.1 reset succeeded",
        "amdgpu 0000:33:00.0: amdgpu: ring gfx_0.0.0 uses VM inv eng 0 on hub 0",
        "amdgpu 0000:04:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00040A40",
    ).height == 0


# --- DeepSpeed launcher ----------------------------------------------------------------------


def test_deepspeed_3232_sigkill_handler(tmp_path):
    ev = ingest_issue(tmp_path, "deepspeed_3232_sigkill_handler.log")
    assert rows(ev, "torchrun_closing_worker", "pid", "launcher") == [(1, None, "13266", "deepspeed")]
    assert rows(ev, "deepspeed_launcher_exit", "exitcode") == [(2, None, "-9")]


def test_deepspeed_1581_killing_subprocesses(tmp_path):
    ev = ingest_issue(tmp_path, "deepspeed_1581_killing_subprocess.log")
    assert rows(ev, "torchrun_closing_worker", "pid") == [(1, None, "250621"), (2, None, "250622"), (3, None, "250623")]


def test_killing_subprocess_near_miss():
    assert events_of("Killing subprocesses and exiting", "INFO: Killing subprocess tree of the data server").height == 0


# --- DataLoader workers ----------------------------------------------------------------------


def test_fondue_13_rich_box_source_line_is_not_an_event(tmp_path):
    """The `raise RuntimeError('DataLoader worker (pid(s) {}) exited unexpectedly'...` quoted in a rich box."""
    ev = ingest_issue(tmp_path, "fondue_13_rich_dataloader_source.log")
    assert ev.filter(pl.col("code").str.starts_with("dataloader")).height == 0


def test_gaussiantalker_42_worker_killed(tmp_path):
    ev = ingest_issue(tmp_path, "gaussiantalker_42_worker_killed_chain.log")
    assert rows(ev, "dataloader_worker_killed", "pids", "signal") == [(17, None, "12851", "Killed")]
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"], json.loads(tb["fields"])["frames"]) == (2, 17, "7")


# --- checkpoint writes -----------------------------------------------------------------------


def test_stream_writer_failures_in_three_layouts(tmp_path):
    ev = ingest_issue(tmp_path, "f5tts_458_stream_writer_rank_prefixed.log")
    assert rows(ev, "checkpoint_write_failed", "entry") == [(7, 0, "data.pkl")]
    ev = ingest_issue(tmp_path / "b", "simplerl_19_ray_stream_writer.log")
    assert rows(ev, "checkpoint_write_failed", "entry") == [(2, None, "data/0")]
    ev = ingest_issue(tmp_path / "c", "pytorch_121833_indented_stream_writer.log")
    assert rows(ev, "checkpoint_write_failed", "entry") == [(8, None, "data/1")]
    tb = json.loads(ev.filter(pl.col("code") == "python_traceback").row(0, named=True)["fields"])
    assert tb["chain"] == "context" and "PytorchStreamWriter failed writing file data/1" in tb["first_exception"]


# --- cuBLAS / cuDNN --------------------------------------------------------------------------


def test_cublas_call_in_backticks_or_quotes(tmp_path):
    ev = ingest_issue(tmp_path, "bros_14_cublas_gemmex.log")
    assert rows(ev, "cublas_error", "status", "call") == [(1, None, "CUBLAS_STATUS_EXECUTION_FAILED", "cublasGemmEx")]
    ev = ingest_issue(tmp_path / "b", "cdn_29_cublas_sgemm_quotes.log")
    assert rows(ev, "cublas_error", "status", "call") == [(1, None, "CUBLAS_STATUS_EXECUTION_FAILED", "cublasSgemm")]


def test_glog_check_names_success_first(tmp_path):
    """`Check failed: status == CUBLAS_STATUS_SUCCESS (13 vs. 0)  CUBLAS_STATUS_EXECUTION_FAILED`: the error is the second."""
    ev = ingest_issue(tmp_path, "caffe_6_glog_cublas_check.log")
    assert rows(ev, "cublas_error", "status") == [(2, None, "CUBLAS_STATUS_EXECUTION_FAILED")]
    assert rows(ev, "shell_signal_exit", "signal") == [(5, None, "Aborted")]


def test_tensorflow_cudnn_and_cublas_statuses(tmp_path):
    ev = ingest_issue(tmp_path, "ucolor_9_tf_cudnn_cublas.log")
    assert rows(ev, "cudnn_error", "status", "form") == [(1, None, "CUDNN_STATUS_EXECUTION_FAILED", "bare")]
    assert rows(ev, "cublas_error", "status") == [(4, None, "CUBLAS_STATUS_EXECUTION_FAILED")]


def test_status_success_alone_is_not_an_error():
    assert events_of("cublas status: CUBLAS_STATUS_SUCCESS", "cudnnStatus = CUDNN_STATUS_SUCCESS").height == 0


def test_pytorch_cudnn_error_form_is_not_doubled():
    ev = events_of("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR")
    assert ev.select("code", "fields").rows() == [("cudnn_error", '{"status":"CUDNN_STATUS_INTERNAL_ERROR"}')]


# --- distributed store / rendezvous ----------------------------------------------------------


def test_pytorch_107021_socket_timeout_host_port_and_rdzv_error(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_107021_rdzv_connection_error.log")
    assert rows(ev, "store_connect_failed", "timeout_s", "host", "port", "stage") == [(2, None, "60", "192.0.0.1", "1234", "gave_up")]
    assert rows(ev, "rendezvous_error", "exc_type") == [(3, None, "RendezvousConnectionError")]


def test_pytorch_79388_tuple_form_unchanged(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_79388_socket_timeout_tuple.log")
    assert rows(ev, "store_connect_failed", "host", "port") == [(3, None, "IP1", "2222")]
    assert rows(ev, "rendezvous_error", "exc_type", "form") == [(6, None, "RendezvousConnectionError", "error_json")]


def test_elastic_error_handler_json_dump(tmp_path):
    ev = ingest_issue(tmp_path, "avhubert_19_rdzv_timeout_error_json.log")
    assert rows(ev, "rendezvous_error", "exc_type", "detail", "form") == [(3, None, "RendezvousTimeoutError", None, "error_json")]
    ev = ingest_issue(tmp_path / "b", "pytorch_64926_error_handler_json.log")
    assert rows(ev, "rendezvous_error", "exc_type", "detail") == [
        (5, None, "RendezvousConnectionError", "The connection to the C10d store has failed. See inner exception for details.")]


def test_rendezvous_json_near_miss():
    """Another exception in the dump, or a rendezvous word in a JSON value that is not the message."""
    assert events_of('    "message": "ValueError: bad value",', '  "rdzv_backend": "RendezvousBackend",').height == 0


def test_torchtune_2676_gloo_recv_timeout(tmp_path):
    ev = ingest_issue(tmp_path, "torchtune_2676_gloo_recv_timeout.log")
    assert rows(ev, "gloo_error", "file", "detail") == [(3, 2, "unbound_buffer.cc", "Timed out waiting 1800000ms for recv operation to complete")]


def test_diffusion_pipe_333_store_connection_lost(tmp_path):
    ev = ingest_issue(tmp_path, "diffusion_pipe_333_tcpstore_reset.log")
    assert rows(ev, "store_connection_lost", "op", "remote", "detail") == [(1, 6, "recvValue", "[localhost]:29500", "Connection reset by peer")]
    assert ev.filter(pl.col("code") == "store_connection_lost").get_column("severity").to_list() == ["warning"]


def test_pytorch_74146_bare_runtime_error_reset(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_74146_runtime_error_reset.log")
    assert rows(ev, "dist_network_error", "detail", "form") == [(6, None, "Connection reset by peer", "runtime_error")]


def test_connection_reset_near_misses():
    """Only the whole exception line: a message that mentions a reset is not the store's."""
    assert events_of("RuntimeError: Connection reset by peer while downloading the dataset, retrying",
                     "requests.exceptions.ConnectionError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))",
                     ).filter(pl.col("code") == "dist_network_error").height == 0


# --- device-side asserts (2.x) ---------------------------------------------------------------


def test_isnet_31_dsa_block_then_kernel_assert(tmp_path):
    ev = ingest_issue(tmp_path, "isnet_31_dsa_then_loss_assert.log")
    assert codes(ev) == [(1, "device_side_assert"), (2, "cuda_launch_blocking_advice"), (3, "cuda_launch_blocking_advice"),
                         (4, "cuda_dsa_advice"), (6, "cuda_kernel_assert")]
    assert rows(ev, "cuda_kernel_assert", "line", "block", "cond") == [(6, None, "95", "3663,0,0", "target_val >= zero && target_val <= one")]


def test_qlora_3_index_select_asserts(tmp_path):
    ev = ingest_issue(tmp_path, "qlora_3_index_select_assert.log")
    assert rows(ev, "cuda_kernel_assert", "thread", "cond") == [(1, None, "0,0,0", "srcIndex < srcSelectDimSize"),
                                                                 (2, None, "1,0,0", "srcIndex < srcSelectDimSize")]


def test_plbert_28_unquoted_dsa_line(tmp_path):
    ev = ingest_issue(tmp_path, "plbert_28_dsa_unquoted.log")
    assert codes(ev) == [(1, "device_side_assert"), (2, "cuda_dsa_advice")]


def test_dreambooth_251_unexpected_pos_then_enospc(tmp_path):
    ev = ingest_issue(tmp_path, "dreambooth_251_unexpected_pos_enospc.log")
    assert rows(ev, "checkpoint_write_failed", "pos", "expected") == [(2, None, "3492359232", "3492359120")]
    assert rows(ev, "no_space_left", "errno") == [(8, None, "28")]


def test_no_space_left_from_tensorflow_and_safetensors(tmp_path):
    ev = ingest_issue(tmp_path, "keras_tuner_390_tf_disk_quota.log")
    assert rows(ev, "no_space_left", "reason") == [(1, None, "No space left on device")]
    ev = ingest_issue(tmp_path / "b", "llamafactory_5155_safetensors_storage_full.log")
    assert rows(ev, "no_space_left", "reason") == [(1, None, "No space left on device")]


# --- GPU hardware: ECC, Xid, a GPU lost to nvidia-smi ------------------------------------------


def test_jade_194_uncorrectable_ecc(tmp_path):
    ev = ingest_issue(tmp_path, "jade_194_uncorrectable_ecc.log")
    assert codes(ev) == [(1, "ecc_error"), (2, "cuda_launch_blocking_advice"), (3, "cuda_launch_blocking_advice"), (4, "cuda_dsa_advice")]


def test_gpud_46_xids_with_ctime_stamps(tmp_path):
    ev = ingest_issue(tmp_path, "gpud_46_xid_ctime.log")
    assert rows(ev, "xid", "xid", "pci", "process") == [(2, None, "13", "0000:cb:00", "<unknown>"), (3, None, "13", "0000:cb:00", "<unknown>"),
                                                        (4, None, "109", "0000:cb:00", "pt_main_thread")]
    ts = ev.filter(pl.col("code") == "xid").get_column("ts").to_list()
    assert [(t.hour, t.minute, t.second) for t in ts] == [(11, 43, 9), (11, 43, 9), (11, 43, 14)]
    # nvidia-peermem's `ERROR detected invalid context` is not an Xid.
    assert 1 not in ev.get_column("line").to_list()


def test_returnn_1486_gpu_lost_to_nvidia_smi(tmp_path):
    ev = ingest_issue(tmp_path, "returnn_1486_smi_unknown_error_aer.log")
    assert rows(ev, "gpu_fallen_off_bus", "pci", "reason", "form") == [(2, None, "0000:03:00.0", "Unknown Error", "nvidia_smi")]
    assert ev.height == 1  # corrected PCIe AER errors are not events

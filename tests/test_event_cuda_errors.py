"""CUDA / HIP device errors in real pastes (device-side asserts, illegal accesses, cuBLAS/cuDNN statuses, ECC and Xid lines, device mismatches): codes, lines, ranks and fields."""

from __future__ import annotations

import polars as pl
import pytest

from tests.helpers import event_codes, event_rows, events_of, ingest_issue


def test_ms_swift_3267_rank_prefixed_cuda_assert(tmp_path):
    ev = ingest_issue(tmp_path, "ms_swift_3267_rank_prefixed_assert.log")
    assert ev.select("line", "rank", "code", "severity").rows() == [
        (1, 0, "python_traceback", "error"),  # the paste starts inside the traceback: its tail is still one
        (9, 0, "device_side_assert", "error"),
        (10, 0, "cuda_launch_blocking_advice", "advice"),
        (11, 0, "cuda_launch_blocking_advice", "advice"),
        (12, 0, "cuda_dsa_advice", "advice"),
        (14, None, "cuda_kernel_assert", "error"),
    ]
    assert event_rows(ev, "cuda_kernel_assert", "kernel", "cond") == [
        (14, None, "nll_loss_forward_reduce_cuda_kernel_2d", "t >= 0 && t < n_classes")]


@pytest.mark.parametrize("name,expected", [
    ("ms_swift_1882_windows_assert.log", [(1, None, "250", "0,0,0"), (2, None, "250", "1,0,0")]),
    ("ultralytics_4728_dynamic_cast_assert.log", [(1, None, "78", "110,0,0"), (2, None, "78", "111,0,0")]),
    ("deeplab_19_thcunn_assert.log", [(1, None, "40", "769,0,0")]),
])
def test_kernel_assert_paths_of_every_platform(tmp_path, name, expected):
    assert event_rows(ingest_issue(tmp_path, name), "cuda_kernel_assert", "line", "thread") == expected


def test_cutorch_708_thc_device_assert(tmp_path):
    ev = ingest_issue(tmp_path, "cutorch_708_thc_check.log")
    assert event_rows(ev, "device_side_assert", "line") == [(1, None, "18")]


def test_nvsentinel_155_and_rm_init_adapter(tmp_path):
    ev = ingest_issue(tmp_path, "nvsentinel_155_fallen_off_bus.log")
    assert ev.select("line", "code").rows() == [(3, "gpu_fallen_off_bus")]
    ev = ingest_issue(tmp_path / "b", "cmpunlocker_4_rm_init_adapter.log")
    assert event_rows(ev, "gpu_init_failed", "pci", "rm_code", "uptime_s") == [(1, None, "0000:01:00.0", "0x22:0x56:894", "21.091872")]


def test_tensorflow_9489_cublas_handle_lines(tmp_path):
    ev = ingest_issue(tmp_path, "tensorflow_9489_cublas_handle.log")
    assert event_rows(ev, "cublas_error", "status") == [(i, None, "CUBLAS_STATUS_NOT_INITIALIZED") for i in (1, 2, 3)]


def test_pytorch_147626_hip_invalid_device_function_unquoted_dsa_line(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_147626_hip_invalid_device_function.log")
    assert event_codes(ev) == [(1, "no_kernel_image"), (2, "cuda_launch_blocking_advice"), (4, "cuda_dsa_advice")]
    assert event_rows(ev, "no_kernel_image", "form") == [(1, None, "hip")]


def test_rocm_5245_hip_illegal_address(tmp_path):
    ev = ingest_issue(tmp_path, "rocm_5245_hip_illegal_address.log")
    assert event_codes(ev) == [(1, "python_traceback"), (4, "illegal_memory_access"), (5, "cuda_error_lookup_advice"),
                         (6, "cuda_launch_blocking_advice"), (8, "cuda_dsa_advice")]
    assert event_rows(ev, "cuda_error_lookup_advice", "cuda_error_name") == [(5, None, "hipErrorIllegalAddress")]


def test_rocm_6003_lookup_line_links_amd_docs(tmp_path):
    ev = ingest_issue(tmp_path, "rocm_6003_accelerator_error_terminate.log")
    assert event_rows(ev, "terminate_called", "exc_type") == [(1, None, "c10::AcceleratorError")]
    assert event_rows(ev, "cuda_error_lookup_advice", "cuda_error_name") == [(3, None, "hipErrorIllegalAddress")]
    assert ev.filter(pl.col("code") == "illegal_memory_access").get_column("line").to_list() == [2]


def test_rocm_hsa_memory_access_fault_is_an_illegal_memory_access(tmp_path):
    ev = ingest_issue(tmp_path, "rocm_5051_hsa_fault_and_gfxhub.log")
    assert event_rows(ev, "illegal_memory_access", "form", "node", "address", "reason") == [
        (1, None, "hsa", "1", "0x7f2a53193000", "Page not present or supervisor privilege")]
    assert event_rows(ev, "amdgpu_page_fault", "pci", "hub", "ring", "vmid", "pasid") == [(3, None, "0000:0b:00.0", "gfxhub", "24", "8", "32792")]
    # The coredump and `gmc_v11_0_process_interrupt: N callbacks suppressed` lines are not events.
    assert set(ev.get_column("line").to_list()) == {1, 3}
    ev = ingest_issue(tmp_path / "b", "rocm_1535_hsa_fault_quoted.log")
    assert event_rows(ev, "illegal_memory_access", "node", "agent") == [(1, None, "2", "0x55fea5592860")]


def test_amdgpu_ring_timeouts_dmesg_and_journal(tmp_path):
    ev = ingest_issue(tmp_path, "cosmic_3764_amdgpu_ring_timeout_reset.log")
    assert event_rows(ev, "amdgpu_ring_timeout", "uptime_s", "pci", "ring", "signaled", "emitted") == [
        (5, None, "312.522692", "0000:28:00.0", "gfx_0.0.0", "57638", "57641")]
    ev = ingest_issue(tmp_path / "b", "rocm_5999_amdgpu_comp_ring_page_fault.log")
    assert event_rows(ev, "amdgpu_ring_timeout", "pci", "ring") == [(1, None, "0000:04:00.0", "comp_1.0.1")]
    assert event_rows(ev, "amdgpu_page_fault", "ring", "vmid") == [(7, None, "32", "0")]
    ev = ingest_issue(tmp_path / "c", "picom_1390_amdgpu_job_timedout.log")
    assert event_rows(ev, "amdgpu_ring_timeout", "ring", "signaled") == [(1, None, "gfx_0.0.0", "5235351")]
    # `[drm] REG_WAIT timeout 1us * 100000 tries` is display-engine chatter, not a ring timeout.
    assert 4 not in ev.get_column("line").to_list()


def test_amdgpu_near_misses():
    assert events_of(
        "amdgpu 0000:04:00.0: amdgpu: Ring comp_1.0.1 reset succeeded",
        "amdgpu 0000:33:00.0: amdgpu: ring gfx_0.0.0 uses VM inv eng 0 on hub 0",
        "amdgpu 0000:04:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00040A40",
    ).height == 0


def test_cublas_call_in_backticks_or_quotes(tmp_path):
    ev = ingest_issue(tmp_path, "bros_14_cublas_gemmex.log")
    assert event_rows(ev, "cublas_error", "status", "call") == [(1, None, "CUBLAS_STATUS_EXECUTION_FAILED", "cublasGemmEx")]
    ev = ingest_issue(tmp_path / "b", "cdn_29_cublas_sgemm_quotes.log")
    assert event_rows(ev, "cublas_error", "status", "call") == [(1, None, "CUBLAS_STATUS_EXECUTION_FAILED", "cublasSgemm")]


def test_glog_check_names_success_first(tmp_path):
    """`Check failed: status == CUBLAS_STATUS_SUCCESS (13 vs. 0)  CUBLAS_STATUS_EXECUTION_FAILED`: the error is the second."""
    ev = ingest_issue(tmp_path, "caffe_6_glog_cublas_check.log")
    assert event_rows(ev, "cublas_error", "status") == [(2, None, "CUBLAS_STATUS_EXECUTION_FAILED")]
    assert event_rows(ev, "shell_signal_exit", "signal") == [(5, None, "Aborted")]


def test_tensorflow_cudnn_and_cublas_statuses(tmp_path):
    ev = ingest_issue(tmp_path, "ucolor_9_tf_cudnn_cublas.log")
    assert event_rows(ev, "cudnn_error", "status", "form") == [(1, None, "CUDNN_STATUS_EXECUTION_FAILED", "bare")]
    assert event_rows(ev, "cublas_error", "status") == [(4, None, "CUBLAS_STATUS_EXECUTION_FAILED")]


def test_status_success_alone_is_not_an_error():
    assert events_of("cublas status: CUBLAS_STATUS_SUCCESS", "cudnnStatus = CUDNN_STATUS_SUCCESS").height == 0


def test_pytorch_cudnn_error_form_is_not_doubled():
    ev = events_of("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR")
    assert ev.select("code", "fields").rows() == [("cudnn_error", '{"status":"CUDNN_STATUS_INTERNAL_ERROR"}')]


def test_isnet_31_dsa_block_then_kernel_assert(tmp_path):
    ev = ingest_issue(tmp_path, "isnet_31_dsa_then_loss_assert.log")
    assert event_codes(ev) == [(1, "device_side_assert"), (2, "cuda_launch_blocking_advice"), (3, "cuda_launch_blocking_advice"),
                         (4, "cuda_dsa_advice"), (6, "cuda_kernel_assert")]
    assert event_rows(ev, "cuda_kernel_assert", "line", "block", "cond") == [(6, None, "95", "3663,0,0", "target_val >= zero && target_val <= one")]


def test_qlora_3_index_select_asserts(tmp_path):
    ev = ingest_issue(tmp_path, "qlora_3_index_select_assert.log")
    assert event_rows(ev, "cuda_kernel_assert", "thread", "cond") == [(1, None, "0,0,0", "srcIndex < srcSelectDimSize"),
                                                                 (2, None, "1,0,0", "srcIndex < srcSelectDimSize")]


def test_plbert_28_unquoted_dsa_line(tmp_path):
    ev = ingest_issue(tmp_path, "plbert_28_dsa_unquoted.log")
    assert event_codes(ev) == [(1, "device_side_assert"), (2, "cuda_dsa_advice")]


def test_jade_194_uncorrectable_ecc(tmp_path):
    ev = ingest_issue(tmp_path, "jade_194_uncorrectable_ecc.log")
    assert event_codes(ev) == [(1, "ecc_error"), (2, "cuda_launch_blocking_advice"), (3, "cuda_launch_blocking_advice"), (4, "cuda_dsa_advice")]


def test_gpud_46_xids_with_ctime_stamps(tmp_path):
    ev = ingest_issue(tmp_path, "gpud_46_xid_ctime.log")
    assert event_rows(ev, "xid", "xid", "pci", "process") == [(2, None, "13", "0000:cb:00", "<unknown>"), (3, None, "13", "0000:cb:00", "<unknown>"),
                                                        (4, None, "109", "0000:cb:00", "pt_main_thread")]
    ts = ev.filter(pl.col("code") == "xid").get_column("ts").to_list()
    assert [(t.hour, t.minute, t.second) for t in ts] == [(11, 43, 9), (11, 43, 9), (11, 43, 14)]
    # nvidia-peermem's `ERROR detected invalid context` is not an Xid.
    assert 1 not in ev.get_column("line").to_list()


def test_returnn_1486_gpu_lost_to_nvidia_smi(tmp_path):
    ev = ingest_issue(tmp_path, "returnn_1486_smi_unknown_error_aer.log")
    assert event_rows(ev, "gpu_fallen_off_bus", "pci", "reason", "form") == [(2, None, "0000:03:00.0", "Unknown Error", "nvidia_smi")]
    assert ev.height == 1  # corrected PCIe AER errors are not events


def test_alignment_handbook_209_device_mismatch_in_inline_code(tmp_path):
    ev = ingest_issue(tmp_path, "alignment_handbook_209_inline_backticks_device.log")
    assert event_rows(ev, "device_mismatch", "device_a", "device_b", "argument", "method") == [
        (1, None, "cpu", "cuda:0", "index", "wrapper_CUDA__index_select")]

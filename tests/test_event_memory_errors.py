"""Device and host out-of-memory forms in real pastes (cut CUDA messages, NPU, Intel XPU / Level Zero, a failed CPU allocation): codes, lines and fields."""

from __future__ import annotations

import polars as pl

from tests.helpers import (
    event_codes,
    event_rows,
    events_of,
    fields_of,
    ingest_issue,
    recorded_log_events,
)


def test_lightning_20231_oom_message_cut_at_gpu(tmp_path):
    ev = ingest_issue(tmp_path, "lightning_20231_oom_cut_then_tqdm.log")
    assert event_rows(ev, "cuda_oom", "requested", "form") == [(3, None, "13.85 GiB", "unparsed")]


def test_touchnet_100_npu_bracket_oom(tmp_path):
    ev = ingest_issue(tmp_path, "touchnet_100_npu_oom.log")
    assert event_codes(ev) == [(1, "cuda_oom")]
    assert event_rows(ev, "cuda_oom", "device", "gpu", "requested", "capacity", "allocated", "free", "reserved",
                "reserved_unallocated", "form") == [
        (1, None, "NPU", "3", "5.03 GiB", "60.96 GiB", "49.47 GiB", "1.32 GiB", "57.55 GiB", "8273.92 MiB", "bracket")]


def test_fla_npu_149_oversize_request(tmp_path):
    ev = ingest_issue(tmp_path, "fla_npu_149_npu_oom_1eb.log")
    assert event_rows(ev, "cuda_oom", "device", "requested_over", "form") == [(1, None, "NPU", "1EB", "oversize")]


def test_physai_440_level_zero_out_of_device_memory(tmp_path):
    ev = ingest_issue(tmp_path, "physai_440_level_zero_oom.log")
    assert event_codes(ev) == [(1, "terminate_called"), (3, "cuda_oom"), (4, "fatal_python_error")]
    assert event_rows(ev, "cuda_oom", "device", "ur_code", "form") == [(3, None, "XPU", "39", "unified_runtime")]


def test_geti_1075_native_api_out_of_device_memory(tmp_path):
    ev = ingest_issue(tmp_path, "geti_1075_native_api_oom.log")
    assert event_rows(ev, "cuda_oom", "device", "status") == [(3, None, "XPU", "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY")]
    # Other Unified Runtime failures are not memory exhaustion.
    assert events_of("RuntimeError: Native API failed. Native API returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)").filter(
        pl.col("code") == "cuda_oom").height == 0


def test_xpuops_1324_xpu_sentence_form_without_free_figure(tmp_path):
    ev = ingest_issue(tmp_path, "xpuops_1324_xpu_sentence_oom.log")
    assert event_rows(ev, "cuda_oom", "device", "requested", "capacity", "allocated", "reserved_unallocated", "form") == [
        (4, None, "XPU", "512.00 MiB", "16.50 GiB", "16.50 GiB", "0 bytes", "sentence")]


def test_mathneuro_3_ipython_source_of_find_executable_batch_size_is_not_an_event(tmp_path):
    ev = ingest_issue(tmp_path, "mathneuro_3_find_batch_size_source.log")
    assert ev.filter(pl.col("code") == "accelerate_no_batch_size").height == 0


def test_cpu_allocation_failure(tmp_path):
    ev = recorded_log_events(tmp_path, "cpu_alloc.log")
    row = ev.filter(pl.col("code") == "cpu_alloc_failed").row(0, named=True)
    assert row["line"] == 6
    assert fields_of(row) == {"requested_bytes": "281474976710656", "errno": "12", "reason": "Cannot allocate memory"}

"""Real logs from public issue threads (tests/recordings/issues, sources in SOURCES.md): TensorFlow's C++ record
prefix, checkpoint-load errors, HF hub / CUDA setup errors: codes, lines, stamps and fields of their events."""

from __future__ import annotations

import datetime as dt

from tests.test_prefixes_launchers import split
from tests.test_signatures_issues import ISSUES as ISSUE_DIR
from tests.test_signatures_issues import ingest_issue, rows

UTC = dt.timezone.utc

# --- TensorFlow C++ logging prefix ----------------------------------------------------------------------------


def test_tensorflow_30912_prefix_gives_stamp_and_message(tmp_path):
    ev = ingest_issue(tmp_path, "tensorflow_30912_cublas_then_oom.log")
    assert rows(ev, "cublas_error", "status") == [(2, None, "CUBLAS_STATUS_NOT_INITIALIZED"), (3, None, "CUBLAS_STATUS_NOT_INITIALIZED")]
    got = ev.filter(ev["code"] == "cublas_error").select("line", "ts", "message").rows()
    assert got == [
        (2, dt.datetime(2019, 7, 21, 23, 23, 6, 224853, tzinfo=UTC), "failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED"),
        (3, dt.datetime(2019, 7, 21, 23, 23, 6, 226553, tzinfo=UTC), "failed to create cublas handle: CUBLAS_STATUS_NOT_INITIALIZED"),
    ]


def test_tensorflow_9489_events_get_their_stamps(tmp_path):
    ev = ingest_issue(tmp_path, "tensorflow_9489_cublas_handle.log")
    assert ev.select("line", "ts").rows()[0] == (1, dt.datetime(2019, 2, 11, 16, 42, 8, 131786, tzinfo=UTC))


def test_tensorflow_14231_windows_path_prefix():
    lines = (ISSUE_DIR / "tensorflow_14231_windows_path_oom.log").read_text(encoding="utf-8").splitlines()
    assert split(*lines) == [
        (None, dt.datetime(2017, 11, 3, 11, 34, 30, 628747, tzinfo=UTC), "failed to allocate 1.97G (2120187392 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY"),
        (None, dt.datetime(2017, 11, 3, 11, 34, 30, 665536, tzinfo=UTC), "failed to allocate 1.78G (1908168704 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY"),
    ]


def test_tensorflow_prefix_near_misses_are_kept():
    # A stamp and a colon without the level letter and `file:line] `, a stamp without microseconds, and TF 0.12's
    # bare `I file:line] ` (no stamp: tensorflow/tensorflow#6048) are not this prefix.
    lines = (
        "2019-07-21 23:23:06.136829: loss 0.5",
        "2019-07-21 23:23:06: E tensorflow/core/x.cc:1] failed",
        "I tensorflow/stream_executor/dso_loader.cc:128] successfully opened CUDA library libcublas.so locally",
    )
    assert split(*lines) == [(None, None, line) for line in lines]


# --- checkpoint load errors -----------------------------------------------------------------------------------


def test_ai_imu_dr_75_state_dict_size_mismatch_one_event(tmp_path):
    ev = ingest_issue(tmp_path, "ai_imu_dr_75_state_dict_size_mismatch.log")
    assert ev.select("line", "end_line", "code").rows() == [(1, 2, "state_dict_mismatch")]
    assert rows(ev, "state_dict_mismatch", "model", "param", "ckpt_shape", "model_shape") == [
        (1, None, "TORCHIEKF", "mes_net.cov_net.4.weight", "[64, 32, 5]", "[32, 32, 5]")]


def test_tsp_transformer_4_tab_indented_scalar_shape(tmp_path):
    ev = ingest_issue(tmp_path, "tsp_transformer_4_state_dict_scalar_shape.log")
    assert rows(ev, "state_dict_mismatch", "model", "param", "ckpt_shape", "model_shape") == [
        (1, None, "TSP_net", "encoder.norm1_layers.1.weight", "[]", "[128]")]


def test_deep_thinking_5_missing_keys_after_a_label(tmp_path):
    ev = ingest_issue(tmp_path, "deep_thinking_5_state_dict_missing_unexpected.log")
    assert rows(ev, "state_dict_mismatch", "model", "missing_key", "param") == [(1, None, "DTNet", "projection.0.weight", None)]


def test_try_first_26_missing_keys_on_the_header_line(tmp_path):
    ev = ingest_issue(tmp_path, "try_first_26_state_dict_inline_missing.log")
    assert rows(ev, "state_dict_mismatch", "model", "missing_key", "unexpected_key") == [
        (1, None, "DataParallel", "module.conv1.weight", "state_dict")]


def test_state_dict_near_misses(tmp_path):
    # A size-mismatch line without the header (a paste cut above it) and a strict=False report (no error) give
    # no state_dict_mismatch event; an embedding row still gives embedding_size_mismatch.
    from tests.helpers import frame, ingest_text

    run = ingest_text(tmp_path, "\n".join((
        "\tsize mismatch for encoder.norm1_layers.1.weight: copying a param with shape torch.Size([]) from checkpoint, "
        "the shape in current model is torch.Size([128]).",
        "_IncompatibleKeys(missing_keys=['head.weight'], unexpected_keys=[])",
    )) + "\n")
    ev = frame(run, "events")
    assert "state_dict_mismatch" not in ev.get_column("code").to_list()


def test_zip_central_directory_from_windows_and_enforce_fail(tmp_path):
    # thisserand/tortoise_local#2 (Windows paths), NVIDIA/pix2pixHD#243 (`[enforce fail at inline_container.cc:145] . `)
    ev = ingest_issue(tmp_path, "tortoise_local_2_zip_central_directory.log")
    assert rows(ev, "checkpoint_corrupt", "what", "detail") == [(10, None, "zip archive", "failed finding central directory")]
    ev = ingest_issue(tmp_path / "b", "pix2pixhd_243_enforce_fail_zip.log")
    assert rows(ev, "checkpoint_corrupt", "what", "detail") == [(8, None, "zip archive", "failed finding central directory")]


# --- HF hub and CUDA setup errors -----------------------------------------------------------------------------


def test_baichuan_83_hub_oserror_and_local_entry(tmp_path):
    ev = ingest_issue(tmp_path, "baichuan_83_hf_hub_offline.log")
    assert rows(ev, "hf_hub_unreachable", "endpoint", "form", "detail") == [
        (1, None, "https://huggingface.co", None, None),
        (3, None, None, "local_entry", "Connection error, and we cannot find the requested files in the disk cache"),
    ]


def test_bitsandbytes_34_hub_names_repo_and_file(tmp_path):
    ev = ingest_issue(tmp_path, "bitsandbytes_34_hf_hub_repo_file.log")
    assert ev.get_column("code").to_list() == ["hf_hub_unreachable"]
    assert rows(ev, "hf_hub_unreachable", "repo", "file") == [(1, None, "decapoda-research/llama-7b-hf", "config.json")]


def test_hunyuanfoley_6_hub_load_the_files(tmp_path):
    ev = ingest_issue(tmp_path, "hunyuanfoley_6_hf_hub_load_the_files.log")
    assert rows(ev, "hf_hub_unreachable", "endpoint", "repo") == [(2, None, "https://huggingface.co", None)]


def test_hub_near_misses(tmp_path):
    # transformers' offline-mode advice line alone, and a successful hub download log line, are not the error.
    from tests.helpers import frame, ingest_text

    run = ingest_text(tmp_path, "\n".join((
        "Checkout your internet connection or see how to run the library in offline mode at "
        "'https://huggingface.co/docs/transformers/installation#offline-mode'.",
        "We couldn't find a local copy, downloading from 'https://huggingface.co'",
    )) + "\n")
    assert "hf_hub_unreachable" not in frame(run, "events").get_column("code").to_list()


def test_points2surf_17_cuda_driver_init_runtime_error(tmp_path):
    ev = ingest_issue(tmp_path, "points2surf_17_cuda_driver_init_failed.log")
    assert ev.select("line", "code", "severity").rows() == [(2, "cuda_init_failed", "error")]
    assert rows(ev, "cuda_init_failed", "form") == [(2, None, "runtime_error")]


def test_cuda_driver_init_warning_stays_a_warning(tmp_path):
    # pytorch/pytorch#131117 (title): the UserWarning form is the fallback row, a warning without the error form.
    from tests.helpers import frame, ingest_text

    run = ingest_text(tmp_path, "UserWarning: CUDA initialization: CUDA driver initialization failed, you might not have a CUDA gpu.\n")
    ev = frame(run, "events")
    assert ev.select("code", "severity").rows() == [("cuda_init_failed", "warning")]
    assert rows(ev, "cuda_init_failed", "form") == [(1, None, None)]

"""Setup failures before training (Hugging Face Hub unreachable, CUDA driver initialisation) in real pastes."""

from __future__ import annotations

from tests.helpers import event_rows, frame, ingest_issue, ingest_text


def test_baichuan_83_hub_oserror_and_local_entry(tmp_path):
    ev = ingest_issue(tmp_path, "baichuan_83_hf_hub_offline.log")
    assert event_rows(ev, "hf_hub_unreachable", "endpoint", "form", "detail") == [
        (1, None, "https://huggingface.co", None, None),
        (3, None, None, "local_entry", "Connection error, and we cannot find the requested files in the disk cache"),
    ]


def test_bitsandbytes_34_hub_names_repo_and_file(tmp_path):
    ev = ingest_issue(tmp_path, "bitsandbytes_34_hf_hub_repo_file.log")
    assert ev.get_column("code").to_list() == ["hf_hub_unreachable"]
    assert event_rows(ev, "hf_hub_unreachable", "repo", "file") == [(1, None, "decapoda-research/llama-7b-hf", "config.json")]


def test_hunyuanfoley_6_hub_load_the_files(tmp_path):
    ev = ingest_issue(tmp_path, "hunyuanfoley_6_hf_hub_load_the_files.log")
    assert event_rows(ev, "hf_hub_unreachable", "endpoint", "repo") == [(2, None, "https://huggingface.co", None)]


def test_hub_near_misses(tmp_path):
    # transformers' offline-mode advice line alone, and a successful hub download log line, are not the error.

    run = ingest_text(tmp_path, "\n".join((
        "Checkout your internet connection or see how to run the library in offline mode at "
        "'https://huggingface.co/docs/transformers/installation#offline-mode'.",
        "We couldn't find a local copy, downloading from 'https://huggingface.co'",
    )) + "\n")
    assert "hf_hub_unreachable" not in frame(run, "events").get_column("code").to_list()


def test_points2surf_17_cuda_driver_init_runtime_error(tmp_path):
    ev = ingest_issue(tmp_path, "points2surf_17_cuda_driver_init_failed.log")
    assert ev.select("line", "code", "severity").rows() == [(2, "cuda_init_failed", "error")]
    assert event_rows(ev, "cuda_init_failed", "form") == [(2, None, "runtime_error")]


def test_cuda_driver_init_warning_stays_a_warning(tmp_path):
    # pytorch/pytorch#131117 (title): the UserWarning form is the fallback row, a warning without the error form.

    run = ingest_text(tmp_path, "UserWarning: CUDA initialization: CUDA driver initialization failed, you might not have a CUDA gpu.\n")
    ev = frame(run, "events")
    assert ev.select("code", "severity").rows() == [("cuda_init_failed", "warning")]
    assert event_rows(ev, "cuda_init_failed", "form") == [(1, None, None)]

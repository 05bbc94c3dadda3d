"""Checkpoint load and write failures (state_dict mismatches, corrupt zips, full disks, shared memory that is not a disk): codes, lines and fields."""

from __future__ import annotations

import json

import polars as pl

from tests.helpers import (
    event_rows,
    fields_of,
    frame,
    ingest_issue,
    ingest_text,
    log_events,
    recorded_log_events,
)


def test_ai_imu_dr_75_state_dict_size_mismatch_one_event(tmp_path):
    ev = ingest_issue(tmp_path, "ai_imu_dr_75_state_dict_size_mismatch.log")
    assert ev.select("line", "end_line", "code").rows() == [(1, 2, "state_dict_mismatch")]
    assert event_rows(ev, "state_dict_mismatch", "model", "param", "ckpt_shape", "model_shape") == [
        (1, None, "TORCHIEKF", "mes_net.cov_net.4.weight", "[64, 32, 5]", "[32, 32, 5]")]


def test_tsp_transformer_4_tab_indented_scalar_shape(tmp_path):
    ev = ingest_issue(tmp_path, "tsp_transformer_4_state_dict_scalar_shape.log")
    assert event_rows(ev, "state_dict_mismatch", "model", "param", "ckpt_shape", "model_shape") == [
        (1, None, "TSP_net", "encoder.norm1_layers.1.weight", "[]", "[128]")]


def test_deep_thinking_5_missing_keys_after_a_label(tmp_path):
    ev = ingest_issue(tmp_path, "deep_thinking_5_state_dict_missing_unexpected.log")
    assert event_rows(ev, "state_dict_mismatch", "model", "missing_key", "param") == [(1, None, "DTNet", "projection.0.weight", None)]


def test_try_first_26_missing_keys_on_the_header_line(tmp_path):
    ev = ingest_issue(tmp_path, "try_first_26_state_dict_inline_missing.log")
    assert event_rows(ev, "state_dict_mismatch", "model", "missing_key", "unexpected_key") == [
        (1, None, "DataParallel", "module.conv1.weight", "state_dict")]


def test_state_dict_near_misses(tmp_path):
    # A strict=False report (no error) gives no state_dict_mismatch event. A size-mismatch line without the header (a
    # paste cut above it) does, as its own `detail_only` form: load_state_dict raises on a size mismatch whatever
    # `strict` is (BlinkDL/RWKV-LM#207 is that one line); an embedding row still gives embedding_size_mismatch.

    run = ingest_text(tmp_path, "\n".join((
        "\tsize mismatch for encoder.norm1_layers.1.weight: copying a param with shape torch.Size([]) from checkpoint, "
        "the shape in current model is torch.Size([128]).",
        "_IncompatibleKeys(missing_keys=['head.weight'], unexpected_keys=[])",
    )) + "\n")
    ev = frame(run, "events")
    assert event_rows(ev, "state_dict_mismatch", "form", "param") == [(1, None, "detail_only", "encoder.norm1_layers.1.weight")]


def test_zip_central_directory_from_windows_and_enforce_fail(tmp_path):
    # thisserand/tortoise_local#2 (Windows paths), NVIDIA/pix2pixHD#243 (`[enforce fail at inline_container.cc:145] . `)
    ev = ingest_issue(tmp_path, "tortoise_local_2_zip_central_directory.log")
    assert event_rows(ev, "checkpoint_corrupt", "what", "detail") == [(10, None, "zip archive", "failed finding central directory")]
    ev = ingest_issue(tmp_path / "b", "pix2pixhd_243_enforce_fail_zip.log")
    assert event_rows(ev, "checkpoint_corrupt", "what", "detail") == [(8, None, "zip archive", "failed finding central directory")]


def test_stream_writer_failures_in_three_layouts(tmp_path):
    ev = ingest_issue(tmp_path, "f5tts_458_stream_writer_rank_prefixed.log")
    assert event_rows(ev, "checkpoint_write_failed", "entry") == [(7, 0, "data.pkl")]
    ev = ingest_issue(tmp_path / "b", "simplerl_19_ray_stream_writer.log")
    assert event_rows(ev, "checkpoint_write_failed", "entry") == [(2, None, "data/0")]
    ev = ingest_issue(tmp_path / "c", "pytorch_121833_indented_stream_writer.log")
    assert event_rows(ev, "checkpoint_write_failed", "entry") == [(8, None, "data/1")]
    tb = json.loads(ev.filter(pl.col("code") == "python_traceback").row(0, named=True)["fields"])
    assert tb["chain"] == "context" and "PytorchStreamWriter failed writing file data/1" in tb["first_exception"]


def test_dreambooth_251_unexpected_pos_then_enospc(tmp_path):
    ev = ingest_issue(tmp_path, "dreambooth_251_unexpected_pos_enospc.log")
    assert event_rows(ev, "checkpoint_write_failed", "pos", "expected") == [(2, None, "3492359232", "3492359120")]
    assert event_rows(ev, "no_space_left", "errno") == [(8, None, "28")]


def test_no_space_left_from_tensorflow_and_safetensors(tmp_path):
    ev = ingest_issue(tmp_path, "keras_tuner_390_tf_disk_quota.log")
    assert event_rows(ev, "no_space_left", "reason") == [(1, None, "No space left on device")]
    ev = ingest_issue(tmp_path / "b", "llamafactory_5155_safetensors_storage_full.log")
    assert event_rows(ev, "no_space_left", "reason") == [(1, None, "No space left on device")]


def test_nnunet_2162_shm_enospc_is_shared_memory_not_a_full_disk(tmp_path):
    ev = ingest_issue(tmp_path, "nnunet_2162_shm_enospc.log")
    assert event_rows(ev, "shared_memory_error", "op", "segment", "errno") == [
        (3, None, "write to file", "/torch_8289_606636967_0", "28"), (15, None, "write to file", "/torch_8226_3581395585_0", "28")]
    assert ev.filter(pl.col("code") == "no_space_left").height == 0  # checkpoint-failure evidence only for disks
    tbs = ev.filter(pl.col("code") == "python_traceback").sort("line")
    # The paste starts inside a worker's traceback (its tail, lines 1-3), then a whole one.
    assert tbs.select("line", "end_line").rows() == [(1, 3), (4, 15)]
    assert json.loads(tbs.row(1, named=True)["fields"])["frames"] == "5"


def test_checkpoint_truncated_and_shape_mismatch(tmp_path):
    ev = recorded_log_events(tmp_path, "checkpoint_truncated.log")
    assert ev.filter(pl.col("code") == "checkpoint_corrupt").select("line").item() == 12
    ev = recorded_log_events(tmp_path / "s", "shape_mismatch.log")
    row = ev.filter(pl.col("code") == "shape_mismatch").row(0, named=True)
    assert (row["line"], fields_of(row)) == (15, {"shape_a": "2x5", "shape_b": "8x4"})


def test_embedding_size_mismatch_fields(tmp_path):
    text = ("RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n"
            "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([32001, 4096]) from "
            "checkpoint, the shape in current model is torch.Size([32000, 4096]).\n")
    ev = log_events(tmp_path, text).filter(code="embedding_size_mismatch")
    assert ev.height == 1 and ev["line"][0] == 2
    f = json.loads(ev["fields"][0])
    assert f["param"] == "model.embed_tokens.weight" and f["ckpt_rows"] == "32001" and f["model_rows"] == "32000"


def test_a_non_embedding_size_mismatch_is_not_a_vocabulary_mismatch(tmp_path):
    text = ("\tsize mismatch for fc.weight: copying a param with shape torch.Size([10, 512]) from checkpoint, "
            "the shape in current model is torch.Size([1000, 512]).\n")
    assert log_events(tmp_path, text).filter(code="embedding_size_mismatch").height == 0

"""NCCL watchdog timeouts, NCCL errors and teardown lines in real pastes: codes, lines, ranks and fields."""

from __future__ import annotations

import polars as pl

from tests.helpers import event_codes, event_rows, ingest_issue


def test_llamafactory_7396_numbered_lines(tmp_path):
    """Lines prefixed `[80746] [rank0]:[E321 ...]`: the rank comes from the message's `[Rank N]` / `[PG 1 Rank N]`."""
    ev = ingest_issue(tmp_path, "llamafactory_7396_nccl_timeout.log")
    assert event_rows(ev, "nccl_watchdog_timeout", "seq", "op", "numel_in", "elapsed_ms") == [
        (1, 0, "1580", "ALLREDUCE", "466119168", "600060"), (2, 4, "1580", "ALLREDUCE", "466119168", "600067")]
    assert event_rows(ev, "nccl_work_status", "pg", "seq", "last_enqueued", "last_completed") == [
        (3, 0, "1", "1580", "1582", "1579"), (4, 3, "1", "1580", "1582", "1579")]


def test_llamafactory_6269_reduce_scatter(tmp_path):
    ev = ingest_issue(tmp_path, "llamafactory_6269_reduce_scatter_timeout.log")
    assert event_rows(ev, "nccl_watchdog_timeout", "op", "numel_in", "numel_out") == [
        (1, 0, "_REDUCE_SCATTER_BASE", "544997376", "68124672"),
        (3, 4, "_REDUCE_SCATTER_BASE", "544997376", "68124672"),
        (5, 3, "_REDUCE_SCATTER_BASE", "544997376", "68124672")]
    ts = ev.filter(pl.col("code") == "nccl_watchdog_timeout").get_column("ts").to_list()
    assert [(t.month, t.day, t.hour, t.minute, t.second) for t in ts] == [(12, 6, 18, 44, 12)] * 2 + [(12, 6, 18, 44, 13)]


def test_nccl_1409_indented_and_pg_name(tmp_path):
    ev = ingest_issue(tmp_path, "nccl_1409_indented_pg_name.log")
    assert event_rows(ev, "nccl_watchdog_timeout", "op", "seq") == [(1, 7, "BROADCAST", "80078"), (3, 3, "ALLREDUCE", "80078")]
    assert event_rows(ev, "nccl_work_status", "pg", "pg_name", "last_completed") == [(2, 7, "0", "default_pg", "80077")]


def test_ofa_271_2022_watchdog_without_numel(tmp_path):
    ev = ingest_issue(tmp_path, "ofa_271_old_watchdog.log")
    assert event_rows(ev, "nccl_watchdog_timeout", "seq", "timeout_ms", "numel_in") == [
        (1, 1, "469508", "1800000", None), (2, 3, "469508", "1800000", None), (3, 2, "469508", "1800000", None),
        (4, 6, "469508", "1800000", None), (5, 7, "469508", "1800000", None)]


def test_pytorch_118369_timeout_glued_to_a_progress_bar(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_118369_tqdm_glued.log")
    assert event_rows(ev, "nccl_watchdog_timeout", "seq", "elapsed_ms") == [
        (2, 0, "96120", "25624887"), (3, 0, "96117", "25625613"), (4, 0, "96125", "25625593"),
        (5, 0, "96125", "25625593"), (6, 7, "64088", "25625251")]


def test_nccl_error_rank_prefixed_with_shm_last_error(tmp_path):
    ev = ingest_issue(tmp_path, "dle_1386_nccl_shm_rank_prefixed.log")
    assert event_rows(ev, "nccl_error", "line", "reason", "nccl_version") == [(7, 2, "2028", "unhandled system error", "2.20.5")]
    assert event_rows(ev, "nccl_error_detail", "nccl_code") == [(8, 2, "ncclSystemError")]
    assert event_rows(ev, "nccl_shm_attach_failed", "action", "segment", "size") == [(10, 2, "creating", "/dev/shm/nccl-c8G2vd", "5767520")]
    tb = ev.filter((pl.col("code") == "python_traceback") & (pl.col("rank") == 3)).row(0, named=True)
    assert (tb["line"], tb["rank"], tb["end_line"]) == (11, 3, 13)


def test_transformers_11658_nccl_warn_shm_and_2021_nccl_error(tmp_path):
    ev = ingest_issue(tmp_path, "transformers_11658_nccl_shm_warn.log")
    assert event_rows(ev, "nccl_shm_attach_failed", "action", "segment") == [(1, None, "creating", "nccl-shm-recv-c43b846667d22574-1-1-0")]
    assert event_rows(ev, "nccl_error", "line", "nccl_version") == [(5, None, "784", "2.7.8")]
    assert ev.filter(pl.col("code") == "nccl_warn").height == 0  # the specific shm event wins over the generic WARN


def test_instructglm_3_watchdog_without_record_prefix(tmp_path):
    ev = ingest_issue(tmp_path, "instructglm_3_bare_watchdog.log")
    assert event_rows(ev, "nccl_watchdog_timeout", "seq", "op", "timeout_ms", "elapsed_ms") == [
        (1, None, "49", "ALLREDUCE", "18000000", "18005607")]


def test_must_7_and_doclayout_22_legacy_teardown_lines(tmp_path):
    ev = ingest_issue(tmp_path, "must_7_legacy_ops_failed_padded.log")
    assert event_codes(ev) == [(1, "nccl_ops_failed"), (2, "nccl_ops_failed")]
    ev = ingest_issue(tmp_path / "b", "doclayout_22_ops_failed_split.log")
    assert event_codes(ev) == [(1, "nccl_ops_failed"), (2, "nccl_process_teardown"), (3, "nccl_ops_failed")]


def test_navillm_34_watchdog_wrapped_at_100_columns(tmp_path):
    ev = ingest_issue(tmp_path, "navillm_34_wrapped_watchdog.log")
    assert event_rows(ev, "nccl_ops_failed") == [(1, 0)]
    # The timeout's fields survive the wrap (`NumelO` / `ut=2`): the continuation line is joined.
    assert event_rows(ev, "nccl_watchdog_timeout", "seq", "op", "numel_out", "timeout_ms", "elapsed_ms") == [
        (6, None, "1", "ALLGATHER", "2", "600000", "600168")]
    assert ev.filter(pl.col("code") == "nccl_watchdog_timeout").get_column("end_line").to_list() == [7]


def test_alpaca_207_flattened_paste_keeps_every_part(tmp_path):
    ev = ingest_issue(tmp_path, "alpaca_207_flattened_nccl_remote.log")
    assert sorted(ev.get_column("code").to_list()) == sorted([
        "nccl_error", "nccl_error_detail", "nccl_ib_completion_error", "nccl_ops_failed", "nccl_process_teardown",
        "terminate_called"])
    assert event_rows(ev, "nccl_error", "nccl_version") == [(1, None, "2.14.3")]
    assert event_rows(ev, "nccl_ib_completion_error", "peer", "error") == [(1, None, "11.214.147.122<39138>", "12")]

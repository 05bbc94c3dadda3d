"""DDP and c10d failures in real pastes (collective mismatches, unused parameters, parameters marked ready twice, store and rendezvous errors, gloo timeouts): codes, lines, ranks and fields."""

from __future__ import annotations

import json

import polars as pl

from tests.helpers import (
    event_codes,
    event_rows,
    events_of,
    fields_of,
    ingest_issue,
    recorded_run_events,
)


def test_speechbrain_2401_collective_mismatch_then_torchrun(tmp_path):
    ev = ingest_issue(tmp_path, "speechbrain_2401_collective_mismatch.log")
    assert event_codes(ev) == [(2, "collective_mismatch"), (3, "torchrun_child_failed")]
    assert event_rows(ev, "collective_mismatch", "op", "other_rank", "other_op", "seq") == [(2, 1, "ALLREDUCE", "0", "BROADCAST", "485")]
    diff = json.loads(ev.filter(pl.col("code") == "collective_mismatch").item(0, "fields"))["differences"]
    assert diff.startswith("Op type: ALLREDUCEvs BROADCAST")


def test_pytorch_148976_mismatch_inside_torchrun_report(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_148976_barrier_mismatch_report.log")
    assert event_rows(ev, "collective_mismatch", "op", "seq", "other_rank", "other_seq") == [(23, 1, "BARRIER", "1", "2", "0")]


def test_deepspeed_4890_pg_wrapper_detail_lines_are_not_mismatches(tmp_path):
    """TORCH_DISTRIBUTED_DEBUG=DETAIL logs every collective (`Running collective: ...`): no event."""
    ev = ingest_issue(tmp_path, "deepspeed_4890_pg_wrapper_detail_info.log")
    assert ev.height == 0


def test_collective_mismatch_recorded(tmp_path):
    """TORCH_DISTRIBUTED_DEBUG=DETAIL with gloo: rank 0 all_reduce while rank 1 all_gather."""
    ev = recorded_run_events(tmp_path, "torchrun_mismatch")
    mm = ev.filter((pl.col("code") == "collective_mismatch") & (pl.col("file") == "console.log")).sort("line")
    rows = [(r["line"], r["rank"], fields_of(r)) for r in mm.iter_rows(named=True)]
    # The two ranks' own messages, then the launcher report's copies of their call stacks.
    assert [(line, rank) for line, rank, _ in rows] == [(17, 1), (32, 0), (79, 0), (101, 1)]
    f1 = rows[0][2]
    assert (f1["rank"], f1["other_rank"], f1["seq"], f1["op"], f1["other_seq"], f1["other_op"]) == ("1", "0", "6", "ALLGATHER", "6", "ALLREDUCE")
    assert f1["differences"] == "Op type: ALLGATHERvs ALLREDUCE"


def test_yolox_885_unused_parameters_numbered_wording(tmp_path):
    ev = ingest_issue(tmp_path, "yolox_885_unused_params_1_2.log")
    assert event_codes(ev) == [(1, "ddp_unused_parameters")]


def test_fairchem_396_two_ranks_interleaved_on_one_line(tmp_path):
    ev = ingest_issue(tmp_path, "fairchem_396_interleaved_ranks_unused.log")
    assert event_rows(ev, "ddp_unused_parameters") == [(8, None)]
    assert event_rows(ev, "python_traceback", "exc_type", "function") == [(3, None, "RuntimeError", "<module>")]


def test_ddcap_35_one_unused_parameter_index(tmp_path):
    ev = ingest_issue(tmp_path, "ddcap_35_unused_index_list.log")
    assert event_codes(ev) == [(1, "ddp_unused_parameters"), (4, "ddp_unused_parameter_list")]
    assert event_rows(ev, "ddp_unused_parameter_list", "rank", "params") == [(4, 0, "0", "1")]


def test_trl_921_ready_twice_names_the_lora_parameter(tmp_path):
    ev = ingest_issue(tmp_path, "trl_921_ready_twice_named.log")
    assert event_rows(ev, "ddp_marked_ready_twice", "param_index", "param_name") == [
        (3, None, "447", "base_model.model.model.layers.31.mlp.down_proj.lora_B.default.weight")]
    assert ev.filter(pl.col("code") == "ddp_marked_ready_twice").get_column("end_line").to_list() == [4]


def test_accelerate_3536_ready_twice_rank_prefixed_without_detail(tmp_path):
    ev = ingest_issue(tmp_path, "accelerate_3536_ready_twice_rank_prefixed.log")
    assert event_rows(ev, "ddp_marked_ready_twice", "param_index") == [(4, 1, None)]


def test_qlora_223_ready_twice_index_only(tmp_path):
    ev = ingest_issue(tmp_path, "qlora_223_ready_twice_index_only.log")
    assert event_rows(ev, "ddp_marked_ready_twice", "param_index", "param_name") == [(1, None, "559", None)]


def test_pytorch_107021_socket_timeout_host_port_and_rdzv_error(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_107021_rdzv_connection_error.log")
    assert event_rows(ev, "store_connect_failed", "timeout_s", "host", "port", "stage") == [(2, None, "60", "192.0.0.1", "1234", "gave_up")]
    assert event_rows(ev, "rendezvous_error", "exc_type") == [(3, None, "RendezvousConnectionError")]


def test_pytorch_79388_tuple_form_unchanged(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_79388_socket_timeout_tuple.log")
    assert event_rows(ev, "store_connect_failed", "host", "port") == [(3, None, "IP1", "2222")]
    assert event_rows(ev, "rendezvous_error", "exc_type", "form") == [(6, None, "RendezvousConnectionError", "error_json")]


def test_elastic_error_handler_json_dump(tmp_path):
    ev = ingest_issue(tmp_path, "avhubert_19_rdzv_timeout_error_json.log")
    assert event_rows(ev, "rendezvous_error", "exc_type", "detail", "form") == [(3, None, "RendezvousTimeoutError", None, "error_json")]
    ev = ingest_issue(tmp_path / "b", "pytorch_64926_error_handler_json.log")
    assert event_rows(ev, "rendezvous_error", "exc_type", "detail") == [
        (5, None, "RendezvousConnectionError", "The connection to the C10d store has failed. See inner exception for details.")]


def test_rendezvous_json_near_miss():
    """Another exception in the dump, or a rendezvous word in a JSON value that is not the message."""
    assert events_of('    "message": "ValueError: bad value",', '  "rdzv_backend": "RendezvousBackend",').height == 0


def test_torchtune_2676_gloo_recv_timeout(tmp_path):
    ev = ingest_issue(tmp_path, "torchtune_2676_gloo_recv_timeout.log")
    assert event_rows(ev, "gloo_error", "file", "detail") == [(3, 2, "unbound_buffer.cc", "Timed out waiting 1800000ms for recv operation to complete")]


def test_diffusion_pipe_333_store_connection_lost(tmp_path):
    ev = ingest_issue(tmp_path, "diffusion_pipe_333_tcpstore_reset.log")
    assert event_rows(ev, "store_connection_lost", "op", "remote", "detail") == [(1, 6, "recvValue", "[localhost]:29500", "Connection reset by peer")]
    assert ev.filter(pl.col("code") == "store_connection_lost").get_column("severity").to_list() == ["warning"]


def test_pytorch_74146_bare_runtime_error_reset(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_74146_runtime_error_reset.log")
    assert event_rows(ev, "dist_network_error", "detail", "form") == [(6, None, "Connection reset by peer", "runtime_error")]


def test_connection_reset_near_misses():
    """Only the whole exception line: a message that mentions a reset is not the store's."""
    assert events_of("RuntimeError: Connection reset by peer while downloading the dataset, retrying",
                     "requests.exceptions.ConnectionError: ('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))",
                     ).filter(pl.col("code") == "dist_network_error").height == 0

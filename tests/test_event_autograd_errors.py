"""Autograd and mixed-precision errors (in-place modification, anomaly mode, backward twice, embedding index, GradScaler misuse) recorded here or pasted in threads."""

from __future__ import annotations

import polars as pl

from tests.helpers import (
    event_codes,
    event_rows,
    fields_of,
    ingest_issue,
    recorded_log_events,
)


def test_inplace_error_is_a_traceback_plus_the_autograd_event(tmp_path):
    ev = recorded_log_events(tmp_path, "inplace.log")
    assert ev.select("line", "end_line", "code").rows() == [(1, 13, "python_traceback"), (13, 13, "inplace_autograd_error")]
    f = fields_of(ev.row(1, named=True))
    assert (f["tensor_type"], f["shape"], f["grad_fn"], f["version"], f["expected_version"]) == (
        "torch.FloatTensor", "4, 3", "Sigmoid", "1", "0")
    tb = fields_of(ev.row(0, named=True))
    assert (tb["function"], tb["line"], tb["exc_type"]) == ("_engine_run_backward", "979", "RuntimeError")


def test_inplace_error_with_anomaly_mode_has_the_forward_trace_warning(tmp_path):
    ev = recorded_log_events(tmp_path, "inplace_anomaly.log")
    assert ev.select("line", "code", "severity").rows() == [
        (1, "anomaly_forward_trace", "warning"),
        (10, "python_traceback", "error"),
        (24, "inplace_autograd_error", "error"),
    ]
    assert fields_of(ev.row(0, named=True))["grad_fn"] == "SigmoidBackward0"


def test_embedding_index_error(tmp_path):
    ev = recorded_log_events(tmp_path, "embedding_index.log")
    assert ev.select("line", "end_line", "code", "message").rows() == [
        (1, 18, "python_traceback", "IndexError: index out of range in self"),
        (18, 18, "embedding_index_out_of_range", "IndexError: index out of range in self"),
    ]
    assert fields_of(ev.row(0, named=True))["function"] == "embedding"


def test_backward_twice_and_nan_anomaly(tmp_path):
    ev = recorded_log_events(tmp_path, "backward_twice.log")
    assert ev.get_column("code").to_list() == ["python_traceback", "backward_twice"]
    ev = recorded_log_events(tmp_path / "b", "nan_anomaly.log")
    assert ev.filter(pl.col("code") == "anomaly_nan").select("line").item() == 20
    assert fields_of(ev.filter(pl.col("code") == "anomaly_nan").row(0, named=True)) == {"grad_fn": "SqrtBackward0", "output": "0"}


def test_cogvideo_775_unscale_fp16_inside_accelerate(tmp_path):
    ev = ingest_issue(tmp_path, "cogvideo_775_unscale_fp16.log")
    assert event_codes(ev) == [(1, "python_traceback"), (18, "gradscaler_misuse")]
    assert event_rows(ev, "gradscaler_misuse", "detail") == [(18, None, "Attempting to unscale FP16 gradients")]
    assert event_rows(ev, "python_traceback", "exc_type", "function") == [(1, None, "ValueError", "_unscale_grads_")]

"""torch.compile failures and recompilation warnings (dynamo recompile limits and reasons, graph breaks, backend crashes): codes, lines and fields."""

from __future__ import annotations

import json

import polars as pl

from tests.helpers import (
    event_codes,
    event_rows,
    events_of,
    fields_of,
    ingest_issue,
    recorded_log_events,
)


def test_thunder_2682_recompile_limit_block(tmp_path):
    ev = ingest_issue(tmp_path, "thunder_2682_recompile_limit.log")
    assert event_codes(ev) == [(1, "dynamo_recompile_limit"), (3, "dynamo_recompile_reason")]
    assert event_rows(ev, "dynamo_recompile_limit", "limit_name", "limit", "frame_id", "function", "location") == [
        (1, None, "recompile_limit", "8", "0", "foo", "/opt/pytorch/lightning-thunder/test_thunder_recompile.py:4")]
    # The `function:` line is part of the warning.
    assert ev.filter(pl.col("code") == "dynamo_recompile_limit").get_column("end_line").to_list() == [2]
    assert event_rows(ev, "dynamo_recompile_reason", "reason")[0][2].startswith("0/7: y == 7")


def test_pytorch_167504_recompile_limit_names_forward(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_167504_recompile_limit_type_id.log")
    assert event_codes(ev) == [(1, "dynamo_recompile_limit"), (3, "dynamo_recompile_reason")]
    assert event_rows(ev, "dynamo_recompile_limit", "function", "location") == [(1, None, "forward", "/data/users/shangdiy/pytorch/test.py:30")]
    assert "___check_type_id" in event_rows(ev, "dynamo_recompile_reason", "reason")[0][2]


def test_recompile_limit_without_function_line_keeps_one_line():
    ev = events_of("torch._dynamo hit config.cache_size_limit (8)", "some unrelated line: function: 'x' (y)")
    row = ev.filter(pl.col("code") == "dynamo_recompile_limit").row(0, named=True)
    # The next line does not start with `function: '...' (...)`: it is not taken.
    assert row["end_line"] == 1 and "function" not in json.loads(row["fields"])


def test_pytorch_163329_fail_on_recompile_limit_hit(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_163329_fail_on_recompile_one_graph.log")
    assert event_codes(ev) == [(9, "dynamo_recompile_limit")]
    assert event_rows(ev, "dynamo_recompile_limit", "limit_name", "mode", "form") == [(9, None, "recompile_limit", "one_graph", "exception")]
    assert ev.get_column("severity").to_list() == ["error"]


def test_infinity_31_backend_compiler_failed(tmp_path):
    ev = ingest_issue(tmp_path, "infinity_31_backend_compiler_failed.log")
    assert event_codes(ev) == [(5, "torch_compile_failed")]
    assert event_rows(ev, "torch_compile_failed", "exc", "backend") == [(5, None, "BackendCompilerFailed", "inductor")]


def test_compile_failure_forms_and_near_misses():
    ev = events_of(
        "torch._inductor.exc.InductorError: RuntimeError: Failed to find C compiler.",
        "torch._dynamo.exc.Unsupported: Failed to trace builtin operator",
        "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True. Excessive recompilations",
        "torch._dynamo.exc.BackendCompilerFailed: debug_wrapper raised RuntimeError: Triton Error [CUDA]: invalid argument",
    ).sort("line")
    assert ev.select("line", "code").rows() == [(1, "torch_compile_failed"), (2, "dynamo_graph_break"),
                                                (3, "dynamo_recompile_limit"), (4, "torch_compile_failed")]
    f = [json.loads(x) for x in ev.get_column("fields")]
    assert (f[0]["exc"], f[0]["inner"], f[0]["detail"]) == ("InductorError", "RuntimeError", "Failed to find C compiler.")
    assert f[1]["reason"] == "Failed to trace builtin operator"
    assert f[2]["mode"] == "fullgraph"
    assert (f[3]["exc"], f[3]["inner"]) == ("BackendCompilerFailed", "RuntimeError")
    # Source lines and the names alone are not failures.
    assert events_of(
        "    raise BackendCompilerFailed(self.compiler_fn, e) from e",
        "        with self.assertRaises(Unsupported):",
        "If recompilations are expected, consider increasing torch._dynamo.config.cache_size_limit",
    ).filter(pl.col("code").is_in(["torch_compile_failed", "dynamo_graph_break", "dynamo_recompile_limit"])).height == 0


def test_dynamo_recompile_limit_and_reasons(tmp_path):
    ev = recorded_log_events(tmp_path, "recompile_logs.log")
    rec = ev.filter(pl.col("code") == "dynamo_recompile")
    assert rec.select("line").to_series().to_list() == [1, 7]
    assert [fields_of(r)["compile_id"] for r in rec.iter_rows(named=True)] == ["1", "2"]
    lim = ev.filter(pl.col("code") == "dynamo_recompile_limit").row(0, named=True)
    assert (lim["line"], fields_of(lim)["limit_name"], fields_of(lim)["limit"]) == (17, "recompile_limit", "2")
    assert str(lim["ts"]).endswith("05:36:11.765000+00:00")

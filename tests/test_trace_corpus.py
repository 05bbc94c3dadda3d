"""Every real profiler/VizTracer trace of the shared corpus ingests completely, checked against an independent json read."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import polars as pl
import pytest

from forensics.ingest import parse_one
from forensics.sources import make_source

TRACE_DIRS = ("torch_profiler", "viztracer")
NOT_TRACES = {"hta_memory_timeline_raw.json.gz"}  # a memory timeline, tested in test_trace_formats.py


def corpus_traces() -> list[str]:
    root = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"
    out = []
    for d in TRACE_DIRS:
        if (root / d).is_dir():
            out += [f"{d}/{p.name}" for p in sorted((root / d).iterdir()) if p.name not in NOT_TRACES]
    return out or ["(corpus absent)"]


def independent(path: Path) -> tuple[int, dict]:
    """Number of complete events and total duration per category, by stdlib json."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    total: dict = {}
    n = 0
    for e in events:
        if e.get("ph") == "X":
            n += 1
            total[e.get("cat")] = total.get(e.get("cat"), 0.0) + float(e.get("dur", 0) or 0)
    return n, total


def parsed(path: Path, rel: str):
    row, result = parse_one(make_source(path, rel))
    return row, result


@pytest.mark.parametrize("rel", corpus_traces())
def test_corpus_trace_matches_json(corpus, rel):
    if rel == "(corpus absent)":
        pytest.skip("no traces")
    path = corpus / rel
    row, result = parsed(path, path.name)
    assert row["status"] == "parsed", row["error"]
    assert row["kind"] == ("viztracer_trace" if rel.startswith("viztracer/") else "kineto_trace")
    spans = pl.from_arrow(result.tables["spans"]).with_columns(pl.col("ph", "cat").cast(pl.String))
    complete = spans.filter(pl.col("ph") == "X")
    n, total = independent(path)
    assert complete.height == n
    ours = {r["cat"]: r["dur"] for r in complete.group_by("cat").agg(pl.col("dur_us").fill_null(0).sum().alias("dur")).to_dicts()}
    assert set(ours) == set(total)
    for cat, dur in total.items():
        assert math.isclose(ours[cat], dur, rel_tol=1e-9, abs_tol=1e-6), (cat, ours[cat], dur)
    # The event index is the provenance: unique and within the document.
    assert complete["line"].n_unique() == complete.height


def spans_of(corpus, rel: str) -> tuple[pl.DataFrame, object]:
    path = corpus / rel
    _, result = parsed(path, path.name)
    df = pl.from_arrow(result.tables["spans"])
    return df.with_columns(pl.col(pl.Categorical).cast(pl.String)), result


def test_profiler_steps_reach_device_rows_through_correlation(corpus):
    spans, result = spans_of(corpus, "torch_profiler/hta_a100_ddp2_rank0_nccl_fields_basetime.json.gz")
    steps = spans.filter(pl.col("name").str.starts_with("ProfilerStep#") & (pl.col("kind") == "user_annotation"))
    assert sorted(steps["step"].to_list()) == [4, 5, 6]
    # Every kernel gets the step of the runtime call that launched it.
    kernels = spans.filter(pl.col("kind") == "kernel")
    launches = spans.filter(pl.col("kind") == "cuda_runtime").select("correlation", pl.col("step").alias("launch_step"))
    joined = kernels.join(launches, on="correlation", how="inner")
    assert joined.height > 2000
    assert (joined["step"] == joined["launch_step"]).all()
    k = spans.filter(pl.col("line") == 15478).row(0, named=True)
    assert (k["kind"], k["stream"], k["device"], k["correlation"], k["external_id"], k["step"]) == ("kernel", 7, 0, 57541, 12353, 6)
    assert k["thread"] == "stream 7"
    # baseTimeNanoseconds + relative ts gives UTC time.
    assert str(k["ts"]).startswith("2024-05-23 00:15:22.983")
    assert result.rank == 0
    info = result.meta["trace:hta_a100_ddp2_rank0_nccl_fields_basetime.json.gz"]
    assert (info["world_size"], info["backend"], info["nccl_version"]) == (2, "nccl", "2.17.1")
    assert result.meta["gpu_name"] == "NVIDIA A100-PG509-200"


def test_2021_trace_names_string_tids_and_steps(corpus):
    spans, result = spans_of(corpus, "torch_profiler/kineto2021_v100_resnet50_workers0_memory.pt.trace.json.gz")
    k = spans.filter(pl.col("line") == 36495).row(0, named=True)
    assert (k["cat"], k["kind"], k["tid"], k["thread"], k["stream"], k["device"], k["correlation"], k["external_id"], k["step"]) == (
        "Kernel", "kernel", 7, "stream 7", 7, 0, 34441, 544, 5)
    ops = spans.filter(pl.col("cat") == "Operator")
    assert set(ops["kind"].unique()) == {"cpu_op"}
    assert set(ops["thread"].unique()) == {"thread 25738 (python)", "thread 25772 (python)"}
    assert sorted(spans.filter(pl.col("name").str.starts_with("ProfilerStep#"))["step"].to_list()) == [5, 6, 7, 8, 9, 10]
    runtime = spans.filter(pl.col("cat") == "Runtime")
    assert set(runtime["kind"].unique()) == {"cuda_runtime"}
    assert result.rank is None


def test_rank_and_world_size_from_distributed_info(corpus):
    for rel, rank, world in (("hta_sampled_rank1_of128.json.gz", 1, 128), ("hta_cpu_only_gloo_rank34_of300.pt.trace.json.gz", 34, 300),
                             ("hta_tracediff_control_a100_rank3_of8.json.gz", 3, 8)):
        spans, result = spans_of(corpus, f"torch_profiler/{rel}")
        assert result.rank == rank
        assert set(spans["rank"].unique()) == {rank}
        assert result.meta["world_size"] == world


def test_memory_instant_events_become_counters(corpus):
    path = corpus / "torch_profiler/hta_v100_ddp2_rank1_profile_memory.json.gz"
    _, result = parsed(path, path.name)
    c = pl.from_arrow(result.tables["counters"]).with_columns(pl.col(pl.Categorical).cast(pl.String))
    first = {r["name"]: r for r in c.filter(pl.col("line") == 42070).to_dicts()}
    assert first["memory_allocated_bytes"]["value"] == 5435638784
    assert first["memory_reserved_bytes"]["value"] == 12782141440
    assert first["memory_delta_bytes"]["value"] == 5242880
    assert first["memory_allocated_bytes"]["device"] == 1 and first["memory_allocated_bytes"]["step"] == 2
    assert c.filter(pl.col("name") == "memory_allocated_bytes").height == 28010
    # The [memory] instants are counters, not spans.
    spans = pl.from_arrow(result.tables["spans"]).with_columns(pl.col("name").cast(pl.String))
    assert spans.filter(pl.col("name") == "[memory]").height == 0


def test_2021_memory_events_without_totals(corpus):
    path = corpus / "torch_profiler/kineto2021_v100_resnet50_workers4_memory.pt.trace.json.gz"
    _, result = parsed(path, path.name)
    c = pl.from_arrow(result.tables["counters"]).with_columns(pl.col(pl.Categorical).cast(pl.String))
    assert set(c["name"].unique()) == {"memory_delta_bytes"}
    assert set(c["device"].unique()) == {-1, 0}
    assert c.height == 10980


def test_viztracer_function_names_split(corpus):
    spans, result = spans_of(corpus, "viztracer/viztracer_1.1.1_function_args_return.json")
    row = spans.filter(pl.col("line") == 2).row(0, named=True)
    assert row["func"] == "fib"
    assert row["src_file"] == "/home/gaogaotiantian/programs/viztracer/example/src/function_args_return.py"
    assert row["src_line"] == 6
    assert row["thread"] == "MainThread" and row["kind"] == "function"
    assert json.loads(row["args"]) == {"func_args": {"n": "1"}, "return_value": "1"}
    # 1.1.1 with baseTimeNanoseconds: UTC time known.
    assert row["ts"] is not None and row["ts"].year == 2026


def test_viztracer_threads_c_functions_and_instants(corpus):
    spans, _ = spans_of(corpus, "viztracer/viztracer_1.1.1_multithread.json")
    assert {"MainThread", "Dummy-5", "Dummy-6", "Dummy-7", "Dummy-8"} <= set(spans["thread"].unique())
    spans, _ = spans_of(corpus, "viztracer/viztracer_1.1.1_async_simple.json")
    c_func = spans.filter(pl.col("name") == "_asyncio._get_running_loop").row(0, named=True)
    assert c_func["func"] == "_asyncio._get_running_loop" and c_func["src_file"] is None
    spans, _ = spans_of(corpus, "viztracer/viztracer_1.1.1_logging_instant_events.json")
    inst = spans.filter(pl.col("ph") == "i")
    assert inst.height == 41 and set(inst["kind"].unique()) == {"instant"}
    assert inst["name"].str.contains(r"^logging - (INFO|WARNING):root:").all()
    assert inst.filter(pl.col("name").str.starts_with("logging - WARNING")).height == 21


def test_old_viztracer_counters_and_objects(corpus):
    path = corpus / "viztracer/viztracer_old_counter_object_events.json"
    _, result = parsed(path, path.name)
    c = pl.from_arrow(result.tables["counters"]).with_columns(pl.col(pl.Categorical).cast(pl.String)).sort("line")
    assert c["value"].to_list() == [7.0, 36.0, 14.0, 36.0]
    assert set(c["name"].unique()) == {"a"}
    spans = pl.from_arrow(result.tables["spans"]).with_columns(pl.col(pl.Categorical).cast(pl.String))
    assert spans.filter(pl.col("ph") == "O").height == 6

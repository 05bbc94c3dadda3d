"""Trace-evidenced playbooks on real GPU traces of the shared corpus and on the recorded CPU samples."""

from __future__ import annotations

import gzip
import json
import re
import shutil

import numpy as np
import polars as pl
import pytest
from forensics.playbooks.base import registry

from forensics.contracts.context import Context
from forensics.ingest import ingest
from tests.conftest import SAMPLES


def detect(pid: str, folder) -> list:
    """Run the span detectors of one playbook with its default thresholds."""
    pb = registry()[pid]
    th = {k: v.default for k, v in pb.thresholds.items()}
    ctx = Context(ingest(folder))
    out = []
    for fn, tables in pb.detectors:
        if "spans" in tables and tables == ("spans",):
            r = fn(ctx, th)
            out += r if isinstance(r, list) else ([r] if r else [])
    return out


def one_trace(corpus, tmp_path, name: str):
    d = tmp_path / name.split(".")[0]
    d.mkdir()
    shutil.copy(corpus / "torch_profiler" / name, d / name)
    return d


W0 = "kineto2021_v100_resnet50_workers0_memory.pt.trace.json.gz"
W4 = "kineto2021_v100_resnet50_workers4_memory.pt.trace.json.gz"


def test_dataloader_workers0_and_workers4_told_apart(corpus, tmp_path):
    from forensics.playbooks.performance.dataloader_bottleneck_trace import loader_shares

    w0 = detect("dataloader-bottleneck", one_trace(corpus, tmp_path, W0))
    w4 = detect("dataloader-bottleneck", one_trace(corpus, tmp_path, W4))
    assert len(w0) == 1 and w4 == []
    f = w0[0].facts
    assert f["single_process_loader"] is True and f["steps"] == 6
    assert 0.35 < f["median_share"] < 0.45
    assert f["gpu_idle_during_loading"] > 0.95  # the GPU runs nothing while num_workers=0 loads
    assert "num_workers=0" in w0[0].summary and "39%" in w0[0].summary
    assert w0[0].causes["too_few_workers"] == 0.9
    # workers=4: the loader share is small in every step.
    ctx = Context(ingest(tmp_path / W4.split(".")[0]))
    shares = loader_shares(ctx.table("spans").filter(pl.col("ph") == "X").with_columns(
        (pl.col("ts_us") + pl.col("dur_us")).alias("end_us")))
    assert shares.height == 6 and shares["share"].max() < 0.1


def test_dataloader_share_matches_independent_json(corpus):
    """The loader share of step 7 of the workers=0 trace, from the raw JSON."""
    doc = json.loads(gzip.decompress((corpus / "torch_profiler" / W0).read_bytes()))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    step = next(e for e in ev if e["name"] == "ProfilerStep#7")
    s0, s1 = step["ts"], step["ts"] + step["dur"]
    loader = sum(e["dur"] for e in ev if re.search(r"DataLoader.*__next__", e["name"]) and s0 <= e["ts"] < s1)
    from forensics.playbooks.performance.dataloader_bottleneck_trace import loader_shares
    from forensics.playbooks.trace_spans import spans

    tmp = Context(ingest(corpus / "torch_profiler" / W0))
    row = loader_shares(spans(tmp)).filter(pl.col("step") == 7).row(0, named=True)
    assert row["loader_us"] == pytest.approx(loader) and row["step_us"] == step["dur"]


def test_host_device_sync_on_a100_trace(corpus, tmp_path):
    hits = detect("host-device-sync", one_trace(corpus, tmp_path, "hta_a100sxm80_rank0_of16_record_shapes.json.gz"))
    assert len(hits) == 1
    f = hits[0].facts
    assert f["median_syncs_per_step"] == 204 and f["sync_calls"]["aten::_local_scalar_dense"] == 945
    assert 0.05 < f["gpu_idle_after_sync_share"] < 0.1
    assert detect("host-device-sync", one_trace(corpus, tmp_path, "hta_v100_ddp2_rank1_profile_memory.json.gz")) == []


def test_comm_compute_overlap_matches_brute_force(corpus, tmp_path):
    name = "hta_a100_ddp2_rank0_nccl_fields_basetime.json.gz"
    hits = detect("comm-compute-no-overlap", one_trace(corpus, tmp_path, name))
    assert len(hits) == 1
    doc = json.loads(gzip.decompress((corpus / "torch_profiler" / name).read_bytes()))
    k = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in k if re.search(r"(?i)^nccl|ncclKernel|ncclDevKernel", e["name"])]
    comp = [(e["ts"], e["ts"] + e["dur"]) for e in k if not re.search(r"(?i)^nccl|ncclKernel|ncclDevKernel", e["name"])]
    # Independent: sample time at 0.5 µs resolution over the comm kernels.
    lo = min(a for a, _ in comm)
    hi = max(b for _, b in comm)
    grid = np.arange(lo, hi, 0.5)
    in_comm = np.zeros(grid.size, bool)
    in_comp = np.zeros(grid.size, bool)
    for a, b in comm:
        in_comm[(grid >= a) & (grid < b)] = True
    for a, b in comp:
        if b > lo and a < hi:
            in_comp[(grid >= a) & (grid < b)] = True
    share = (in_comm & in_comp).sum() / in_comm.sum()
    assert hits[0].facts["overlap_share"] == pytest.approx(share, abs=0.01)
    assert hits[0].facts["streams"] == [40]
    assert detect("comm-compute-no-overlap", one_trace(corpus, tmp_path, "hta_tracediff_control_a100_rank3_of8.json.gz")) == []


def test_low_gpu_utilization_from_kernel_busy_time(corpus, tmp_path):
    hits = detect("low-gpu-utilization", one_trace(corpus, tmp_path, "hta_a100_ddp2_rank0_nccl_fields_basetime.json.gz"))
    assert len(hits) == 1 and hits[0].facts["per_step_util"].keys() == {4, 5, 6}
    assert 0.2 < hits[0].facts["median_util"] < 0.25
    assert detect("low-gpu-utilization", one_trace(corpus, tmp_path, W4)) == []


def test_kernel_launch_bound(corpus, tmp_path):
    hits = detect("kernel-launch-bound", one_trace(corpus, tmp_path, "hta_quadro_gp100_gpu_user_annotation.json.gz"))
    assert len(hits) == 1
    f = hits[0].facts
    assert f["kernels"] == 130 and f["median_kernel_us"] == 2.0 and f["launch_to_kernel"] > 3
    # A CUDA-graph replay launches 425 kernels from a handful of calls: not launch-bound.
    assert detect("kernel-launch-bound", one_trace(corpus, tmp_path, "tracelens_vllm_decode_cudagraph_replay_rocm.json.gz")) == []
    assert detect("kernel-launch-bound", one_trace(corpus, tmp_path, W4)) == []


def test_step_time_rise_within_a_trace(corpus, tmp_path):
    hits = detect("step-time-regression", one_trace(corpus, tmp_path, "hta_v100_ns_resolution_rank0.pt.trace.json.gz"))
    assert len(hits) == 1
    assert hits[0].facts["step_us"][101] == pytest.approx(35115.9, abs=1) and hits[0].facts["rise_ratio"] > 2.5
    assert detect("step-time-regression", one_trace(corpus, tmp_path, W4)) == []


def test_rank_straggler_across_rank_traces(corpus, tmp_path):
    pair = tmp_path / "pair"
    pair.mkdir()
    for r in (0, 1):
        shutil.copy(corpus / "torch_profiler" / f"hta_sampled_rank{r}_of128.json.gz", pair)
    assert detect("rank-straggler", pair) == []  # two healthy ranks of one job
    # The same job with rank 1's steps made 50% longer: it is named.
    doc = json.loads(gzip.decompress((pair / "hta_sampled_rank1_of128.json.gz").read_bytes()))
    for e in doc["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["dur"] = int(e["dur"] * 1.5)
    (pair / "hta_sampled_rank1_of128.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    hits = detect("rank-straggler", pair)
    assert len(hits) == 1 and hits[0].facts["straggler_rank"] == 1 and hits[0].ranks == [1]


def test_autograd_race_overlap_and_threads():
    hits = detect("autograd-race", SAMPLES / "autograd-race" / "shared-model-trace")
    assert len(hits) == 1
    f = hits[0].facts
    assert f["threads"] == ["trainer-0", "trainer-1"] and f["overlap_share"] > 0.05
    assert f["calls_per_thread"] == {"trainer-0": 6, "trainer-1": 6}  # Tensor.backward calls (6 steps each)
    assert all(e.file == "viztracer.json.gz" for e in hits[0].evidence)
    assert detect("autograd-race", SAMPLES / "autograd-race" / "nearmiss") == []


def test_samples_host_sync_and_loader_numbers():
    # 16 .item() calls per step on a CPU-only trace wait for no device: quiet; on an H100 they stall the GPU.
    assert detect("host-device-sync", SAMPLES / "host-device-sync" / "cpu-only-trace-nearmiss") == []
    hits = detect("host-device-sync", SAMPLES / "host-device-sync" / "h100")
    assert hits[0].facts["median_syncs_per_step"] >= 16 and hits[0].facts["gpu_idle_after_sync_share"] > 0.05
    assert detect("host-device-sync", SAMPLES / "host-device-sync" / "nearmiss") == []
    hits = detect("dataloader-bottleneck", SAMPLES / "dataloader-bottleneck" / "profiler-trace")
    assert hits[0].facts["median_share"] > 0.5 and hits[0].facts["single_process_loader"]

"""Text and CSV recorded on a real NVIDIA H100 (sample_logs/*-h100, _scripts/record_h100.sh): torch 2.11
+ CUDA 13, NCCL 2.28, transformers 5.17. Every line here is what the tools printed, not a copy of a format."""

from __future__ import annotations

import json

import polars as pl

from forensics.ingest import ingest
from tests.conftest import ROOT
from tests.helpers import frame

SAMPLES = ROOT / "sample_logs"


def _events(name: str) -> pl.DataFrame:
    return frame(ingest(SAMPLES / name), "events")


def _fields(ev: pl.DataFrame, code: str, i: int = 0) -> dict:
    return json.loads(ev.filter(pl.col("code") == code).get_column("fields")[i])


def test_oom_of_torch_2_11_with_this_process_sentence():
    run = ingest(SAMPLES / "cuda-oom" / "h100")
    ev = frame(run, "events")
    oom = ev.filter(pl.col("code") == "cuda_oom").row(0, named=True)
    f = json.loads(oom["fields"])
    assert (oom["line"], oom["step"]) == (104, 24)
    assert (f["requested"], f["gpu"], f["capacity"], f["free"]) == ("2.02 GiB", "0", "79.18 GiB", "1.97 GiB")
    assert (f["allocated"], f["reserved_unallocated"], f["this_process"]) == ("75.31 GiB", "1.15 GiB", "77.20 GiB")
    # The traceback that ends in it starts at its own line and takes the step of the bar before it.
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"], tb["step"], tb["message"][:23]) == (25, 104, 24, "torch.OutOfMemoryError:")


def test_transformers_5_17_quoted_dicts_step_by_bar():
    m = frame(ingest(SAMPLES / "cuda-oom" / "h100"), "metrics")
    first = m.filter(pl.col("step") == 1).select("name", "value").sort("name").rows()
    assert first == [("epoch", 0.003906), ("grad_norm", 1.536), ("loss", 10.47), ("lr", 0.0)]
    loss = m.filter(pl.col("name") == "loss").sort("step")
    # One row per logged step 1..24 (the 25th step ran out of memory before it logged).
    assert loss.get_column("step").to_list() == list(range(1, 25))
    assert loss.get_column("value").to_list()[5:8] == [8.816, 8.111, 7.45]


def test_healthy_trainer_eval_and_summary_rows():
    m = frame(ingest(SAMPLES / "healthy" / "hf-trainer-h100"), "metrics")
    ev = m.filter(pl.col("name") == "eval_loss").sort("step").select("step", "value").rows()
    assert ev == [(20, 1.621), (40, 0.08889), (60, 0.04926)]
    assert m.filter(pl.col("name") == "loss").sort("step").get_column("value")[-1] == 0.0504


def test_nvidia_smi_csv_of_driver_580_with_clocks_event_reasons():
    run = ingest(SAMPLES / "cuda-oom" / "h100")
    files = frame(run, "files").filter(pl.col("file") == "nvidia-smi.csv").row(0, named=True)
    assert (files["kind"], files["status"], files["rows"]) == ("nvsmi_query_csv", "parsed", 98)
    g = frame(run, "gpu").sort("line")
    first = g.row(0, named=True)
    assert (first["name"], first["memory_total_mib"], first["power_limit_w"], first["throttle_reasons"]) == (
        "NVIDIA H100 80GB HBM3", 81559.0, 700.0, "gpu_idle")
    # Memory climbs to the OOM: the peak sample holds most of the 80 GB.
    assert g.get_column("memory_used_mib").max() > 70000


def test_vectorized_gather_asserts_and_accelerator_error():
    ev = _events("device-assert/h100")
    asserts = ev.filter(pl.col("code") == "cuda_kernel_assert")
    assert asserts.height == 64 and asserts.get_column("line").min() == 15
    f = _fields(ev, "cuda_kernel_assert")
    assert (f["file"], f["line"], f["kernel"], f["block"], f["thread"]) == (
        "/pytorch/aten/src/ATen/native/cuda/IndexKernelUtils.cu", "16", "vectorized_gather_kernel", "398,0,0", "0,0,0")
    assert f["cond"] == 'ind >=0 && ind < ind_dim_size && "vectorized gather kernel index out of bounds"'
    dsa = ev.filter(pl.col("code") == "device_side_assert").row(0, named=True)
    assert (dsa["line"], dsa["step"], dsa["message"]) == (85, 14, "torch.AcceleratorError: CUDA error: device-side assert triggered")
    assert _fields(ev, "cuda_error_lookup_advice")["cuda_error_name"] == "cudaErrorAssert"


def test_nccl_2_28_stamped_warn_and_last_error_detail():
    ev = _events("nccl-timeout/duplicate-gpu-h100")
    dup = ev.filter(pl.col("code") == "nccl_duplicate_gpu").sort("line")
    # NCCL 2.28 stamps its WARN lines (`[2026-11-22 10:35:42] vm:683:683 [0] init.cc:904 NCCL WARN ...`).
    first = dup.row(0, named=True)
    assert (first["line"], first["rank"], str(first["ts"])) == (7, 0, "2026-11-22 10:35:42+00:00")
    assert json.loads(first["fields"]) == {"rank": "0", "other_rank": "1", "bus_id": "60"}
    err = ev.filter(pl.col("code") == "nccl_error").sort("line").row(0, named=True)
    f = json.loads(err["fields"])
    assert (err["line"], err["rank"], f["reason"], f["nccl_version"], f["nccl_code"]) == (21, 1, "invalid usage", "2.28.9", "ncclInvalidUsage")
    assert f["last_error"] == "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 60"
    rep = _fields(ev, "torchrun_child_failed_report")
    assert (rep["rank"], rep["exitcode"], rep["pid"], rep["other_ranks"]) == ("0", "1", "683", "1")


def test_triton_wild_store_is_an_illegal_memory_access():
    ev = _events("device-assert/illegal-h100")
    ima = ev.filter(pl.col("code") == "illegal_memory_access").row(0, named=True)
    assert (ima["line"], ima["step"]) == (13, 30)
    assert ima["message"] == "torch.AcceleratorError: CUDA error: operation not supported on global/shared address space"
    assert json.loads(ima["fields"])["form"] == "address_space"
    assert _fields(ev, "cuda_error_lookup_advice")["cuda_error_name"] == "cudaErrorInvalidAddressSpace"
    # The generic CUDA-error fallback gives way to the specific code.
    assert ev.filter(pl.col("code") == "cuda_error").height == 0


def test_nvidia_smi_580_outputs_agree_on_one_gpu():
    """`-q`, `-q -x` and the table, taken within one second of each other, and `dmon -o DT` (driver 580.159.04)."""
    run = ingest(ROOT / "tests" / "recordings" / "h100")
    files = {r["file"]: (r["kind"], r["status"], r["rows"]) for r in frame(run, "files").rows(named=True)}
    assert files == {
        "dmon.txt": ("nvsmi_dmon", "parsed", 12), "pmon.txt": ("nvsmi_dmon", "parsed", 0),
        "q.txt": ("nvsmi_query_text", "parsed", 1), "q.xml": ("nvsmi_xml", "parsed", 1),
        "table.txt": ("nvsmi_table", "parsed", 1), "table_idle.txt": ("nvsmi_table", "parsed", 1),
    }
    g = frame(run, "gpu")
    cols = ["bus_id", "name", "memory_total_mib", "power_limit_w", "pstate", "compute_mode", "mig_mode"]
    snap = g.filter(pl.col("file").is_in(["q.txt", "q.xml", "table.txt"])).select(cols).unique().rows()
    assert snap == [("00000000:00:06.0", "NVIDIA H100 80GB HBM3", 81559.0, 700.0, "P0", "Default", "Disabled")]
    q = g.filter(pl.col("file") == "q.txt").row(0, named=True)
    # `Clocks Event Reasons` (the section's name since driver 535) gives the throttle reasons.
    assert (q["throttle_reasons"], q["sm_clock_max_mhz"], q["pcie_link_gen"], q["memory_free_mib"]) == ("gpu_idle", 1980.0, 5, 81079.0)
    dmon = g.filter(pl.col("file") == "dmon.txt").sort("line")
    assert dmon.get_column("power_w").to_list()[:4] == [116.0, 116.0, 90.0, 70.0]
    assert str(dmon.get_column("ts")[0]) == "2026-11-22 10:43:44+00:00"
    # pmon's rows with no process (`-` in every column) are no process samples.
    assert frame(run, "gpu_procs").height == 0


def test_kineto_trace_of_torch_2_11_on_h100():
    run = ingest(SAMPLES / "host-device-sync" / "h100")
    f = frame(run, "files").filter(pl.col("kind") == "kineto_trace").row(0, named=True)
    assert (f["file"], f["status"]) == ("h100_llama_bf16.pt.trace.json.gz", "parsed")
    spans = frame(run, "spans")
    kernels = spans.filter(pl.col("cat") == "kernel")
    assert kernels.height == 1677 and set(kernels.get_column("stream").unique()) == {7}
    # Three active profiler steps (schedule wait=1, warmup=1, active=3 over steps 1-5).
    assert sorted(spans.get_column("step").drop_nulls().unique().to_list()) == [2, 3, 4]
    assert spans.filter(pl.col("name") == "aten::_local_scalar_dense").height == 237
    assert set(frame(run, "counters").get_column("name").unique()) == {"memory_allocated_bytes", "memory_delta_bytes", "memory_reserved_bytes"}
    # The console beside it: `step N loss X` lines.
    loss = frame(run, "metrics").filter(pl.col("name") == "loss").sort("step")
    assert loss.select("step", "value").rows() == [(1, 10.482), (2, 10.1885), (3, 9.9595), (4, 9.7288), (5, 9.4753)]


def test_leak_confirms_the_ooms_growth_cause():
    from forensics.contracts.context import Context
    from forensics.engine import analyze

    a = analyze(Context(ingest(SAMPLES / "memory-leak" / "h100")))
    oom = next(f for f in a.findings if f.id == "cuda-oom")
    assert oom.explained_by == ["memory-leak"]
    # Its own numbers fit "demand above capacity" too (98 MiB free for 128 MiB), but the leak proves growth.
    assert [c.cause.id for c in oom.causes][:2] == ["memory_growth", "demand_above_capacity"]

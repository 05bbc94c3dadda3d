"""Real logs pasted in public GitHub issues (tests/recordings/issues, sources in SOURCES.md) ingest cleanly.

Each fixture is ingested as a run folder; the test checks the events' codes, lines, ranks and key fields.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.conftest import ROOT
from tests.helpers import frame, ingest_text
from tests.test_signatures import events_of

ISSUES = ROOT / "tests" / "recordings" / "issues"


def ingest_issue(tmp_path, name: str) -> pl.DataFrame:
    run = ingest_text(tmp_path, (ISSUES / name).read_text(encoding="utf-8"), name=name)
    files = frame(run, "files")
    assert files.get_column("status").to_list() == ["parsed"], files.rows()
    return frame(run, "events").sort("line")


def rows(ev: pl.DataFrame, code: str, *keys: str) -> list[tuple]:
    out = []
    for r in ev.filter(pl.col("code") == code).iter_rows(named=True):
        f = json.loads(r["fields"])
        out.append((r["line"], r["rank"], *(f.get(k) for k in keys)))
    return out


def test_sources_list_every_fixture():
    listed = (ISSUES / "SOURCES.md").read_text(encoding="utf-8")
    for path in ISSUES.glob("*.log"):
        assert f"| {path.name} | https://github.com/" in listed, path.name


def test_llamafactory_7396_numbered_lines(tmp_path):
    """Lines prefixed `[80746] [rank0]:[E321 ...]`: the rank comes from the message's `[Rank N]` / `[PG 1 Rank N]`."""
    ev = ingest_issue(tmp_path, "llamafactory_7396_nccl_timeout.log")
    assert rows(ev, "nccl_watchdog_timeout", "seq", "op", "numel_in", "elapsed_ms") == [
        (1, 0, "1580", "ALLREDUCE", "466119168", "600060"), (2, 4, "1580", "ALLREDUCE", "466119168", "600067")]
    assert rows(ev, "nccl_work_status", "pg", "seq", "last_enqueued", "last_completed") == [
        (3, 0, "1", "1580", "1582", "1579"), (4, 3, "1", "1580", "1582", "1579")]


def test_llamafactory_6269_reduce_scatter(tmp_path):
    ev = ingest_issue(tmp_path, "llamafactory_6269_reduce_scatter_timeout.log")
    assert rows(ev, "nccl_watchdog_timeout", "op", "numel_in", "numel_out") == [
        (1, 0, "_REDUCE_SCATTER_BASE", "544997376", "68124672"),
        (3, 4, "_REDUCE_SCATTER_BASE", "544997376", "68124672"),
        (5, 3, "_REDUCE_SCATTER_BASE", "544997376", "68124672")]
    ts = ev.filter(pl.col("code") == "nccl_watchdog_timeout").get_column("ts").to_list()
    assert [(t.month, t.day, t.hour, t.minute, t.second) for t in ts] == [(12, 6, 18, 44, 12)] * 2 + [(12, 6, 18, 44, 13)]


def test_nccl_1409_indented_and_pg_name(tmp_path):
    ev = ingest_issue(tmp_path, "nccl_1409_indented_pg_name.log")
    assert rows(ev, "nccl_watchdog_timeout", "op", "seq") == [(1, 7, "BROADCAST", "80078"), (3, 3, "ALLREDUCE", "80078")]
    assert rows(ev, "nccl_work_status", "pg", "pg_name", "last_completed") == [(2, 7, "0", "default_pg", "80077")]


def test_ofa_271_2022_watchdog_without_numel(tmp_path):
    ev = ingest_issue(tmp_path, "ofa_271_old_watchdog.log")
    assert rows(ev, "nccl_watchdog_timeout", "seq", "timeout_ms", "numel_in") == [
        (1, 1, "469508", "1800000", None), (2, 3, "469508", "1800000", None), (3, 2, "469508", "1800000", None),
        (4, 6, "469508", "1800000", None), (5, 7, "469508", "1800000", None)]


def test_pytorch_118369_timeout_glued_to_a_progress_bar(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_118369_tqdm_glued.log")
    assert rows(ev, "nccl_watchdog_timeout", "seq", "elapsed_ms") == [
        (2, 0, "96120", "25624887"), (3, 0, "96117", "25625613"), (4, 0, "96125", "25625593"),
        (5, 0, "96125", "25625593"), (6, 7, "64088", "25625251")]


def test_ms_swift_3267_rank_prefixed_cuda_assert(tmp_path):
    ev = ingest_issue(tmp_path, "ms_swift_3267_rank_prefixed_assert.log")
    assert ev.select("line", "rank", "code", "severity").rows() == [
        (1, 0, "python_traceback", "error"),  # the paste starts inside the traceback: its tail is still one
        (9, 0, "device_side_assert", "error"),
        (10, 0, "cuda_launch_blocking_advice", "advice"),
        (11, 0, "cuda_launch_blocking_advice", "advice"),
        (12, 0, "cuda_dsa_advice", "advice"),
        (14, None, "cuda_kernel_assert", "error"),
    ]
    assert rows(ev, "cuda_kernel_assert", "kernel", "cond") == [
        (14, None, "nll_loss_forward_reduce_cuda_kernel_2d", "t >= 0 && t < n_classes")]


@pytest.mark.parametrize("name,expected", [
    ("ms_swift_1882_windows_assert.log", [(1, None, "250", "0,0,0"), (2, None, "250", "1,0,0")]),
    ("ultralytics_4728_dynamic_cast_assert.log", [(1, None, "78", "110,0,0"), (2, None, "78", "111,0,0")]),
    ("deeplab_19_thcunn_assert.log", [(1, None, "40", "769,0,0")]),
])
def test_kernel_assert_paths_of_every_platform(tmp_path, name, expected):
    assert rows(ingest_issue(tmp_path, name), "cuda_kernel_assert", "line", "thread") == expected


def test_cutorch_708_thc_device_assert(tmp_path):
    ev = ingest_issue(tmp_path, "cutorch_708_thc_check.log")
    assert rows(ev, "device_side_assert", "line") == [(1, None, "18")]


def test_nvsentinel_155_and_rm_init_adapter(tmp_path):
    ev = ingest_issue(tmp_path, "nvsentinel_155_fallen_off_bus.log")
    assert ev.select("line", "code").rows() == [(3, "gpu_fallen_off_bus")]
    ev = ingest_issue(tmp_path / "b", "cmpunlocker_4_rm_init_adapter.log")
    assert rows(ev, "gpu_init_failed", "pci", "rm_code", "uptime_s") == [(1, None, "0000:01:00.0", "0x22:0x56:894", "21.091872")]


def test_nccl_error_rank_prefixed_with_shm_last_error(tmp_path):
    ev = ingest_issue(tmp_path, "dle_1386_nccl_shm_rank_prefixed.log")
    assert rows(ev, "nccl_error", "line", "reason", "nccl_version") == [(7, 2, "2028", "unhandled system error", "2.20.5")]
    assert rows(ev, "nccl_error_detail", "nccl_code") == [(8, 2, "ncclSystemError")]
    assert rows(ev, "nccl_shm_attach_failed", "action", "segment", "size") == [(10, 2, "creating", "/dev/shm/nccl-c8G2vd", "5767520")]
    tb = ev.filter((pl.col("code") == "python_traceback") & (pl.col("rank") == 3)).row(0, named=True)
    assert (tb["line"], tb["rank"], tb["end_line"]) == (11, 3, 13)


def test_transformers_11658_nccl_warn_shm_and_2021_nccl_error(tmp_path):
    ev = ingest_issue(tmp_path, "transformers_11658_nccl_shm_warn.log")
    assert rows(ev, "nccl_shm_attach_failed", "action", "segment") == [(1, None, "creating", "nccl-shm-recv-c43b846667d22574-1-1-0")]
    assert rows(ev, "nccl_error", "line", "nccl_version") == [(5, None, "784", "2.7.8")]
    assert ev.filter(pl.col("code") == "nccl_warn").height == 0  # the specific shm event wins over the generic WARN


def test_vllm_prefixes(tmp_path):
    ev = ingest_issue(tmp_path, "gpustack_835_vllm_nccl.log")
    assert rows(ev, "nccl_error", "reason") == [(1, None, "unhandled system error"), (2, None, "unhandled system error")]
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"]) == (3, 9)
    ev = ingest_issue(tmp_path / "b", "gpustack_2680_vllm_rank_prefix.log")
    # The quoted `raise RuntimeError(f"NCCL error: {error_str}")` source line is not an event.
    assert rows(ev, "nccl_error", "reason") == [(4, 3, "unhandled system error")]
    # Rank 3's traceback lost its head in the paste (it starts at a frame's source line); rank 2's is whole.
    tbs = ev.filter(pl.col("code") == "python_traceback").sort("line")
    assert tbs.select("line", "end_line", "rank").rows()[0] == (1, 4, 3)
    assert json.loads(tbs.get_column("fields")[0])["head_truncated"] == "true"
    assert tbs.select("line", "rank").rows()[1] == (6, 2)


def test_pdsh_ip_prefixed_traceback(tmp_path):
    ev = ingest_issue(tmp_path, "deepspeed_769_pdsh_ip_prefix.log")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"]) == (3, 9)
    assert json.loads(tb["fields"])["function"] == "initialize_megatron"


def test_dataloader_chain_cut_short(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_8976_dataloader_chain.log")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    f = json.loads(tb["fields"])
    assert (tb["line"], tb["end_line"], f["chain"], f["truncated"]) == (1, 20, "cause", "true")
    assert tb["message"] == "RuntimeError: DataLoader worker (pid 1817) is killed by signal: Killed."
    assert rows(ev, "dataloader_worker_killed", "pids", "signal") == [(10, None, "1817", "Killed")]


def test_dcpdn_12_python27_dataloader(tmp_path):
    ev = ingest_issue(tmp_path, "dcpdn_12_dataloader_py27.log")
    assert ev.select("line", "end_line", "code").rows() == [(1, 8, "python_traceback"), (8, 8, "dataloader_worker_killed")]


def test_cppo_6_report_after_traceback_tail(tmp_path):
    ev = ingest_issue(tmp_path, "cppo_6_child_failed_sigkill.log")
    rep = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    assert (rep["line"], rep["end_line"], rep["rank"]) == (10, 25, 0)
    assert rows(ev, "torchrun_worker_signal", "signame", "pid") == [(24, 0, "SIGKILL", "14750")]  # the report row's rank


def test_sctnet_47_old_report(tmp_path):
    ev = ingest_issue(tmp_path, "sctnet_47_old_report.log")
    rep = ev.filter(pl.col("code") == "torchrun_child_failed_report").row(0, named=True)
    f = json.loads(rep["fields"])
    assert (rep["line"], rep["end_line"], f["exitcode"], f["other_ranks"], f["other_pids"]) == (1, 17, "1", "1", "866230")


def test_launcher_lines_of_three_eras(tmp_path):
    ev = ingest_issue(tmp_path, "colossalai_3514_sigterm_oom_kill.log")
    assert rows(ev, "torchrun_closing_worker", "pid") == [(3, None, "812914"), (4, None, "812915"), (5, None, "812916")]
    assert rows(ev, "torchrun_child_failed", "exitcode", "local_rank", "pid") == [(6, None, "-9", "3", "812917")]
    ev = ingest_issue(tmp_path / "b", "x_r1_23_glog_launcher.log")
    failed = ev.filter(pl.col("code") == "torchrun_child_failed").row(0, named=True)
    assert failed["line"] == 2 and (failed["ts"].month, failed["ts"].day, failed["ts"].hour) == (2, 17, 16)
    ev = ingest_issue(tmp_path / "c", "chatglm2_520_tqdm_glued_failed.log")
    assert rows(ev, "torchrun_child_failed", "exitcode", "pid") == [(1, None, "-9", "31631")]
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert tb["message"] == "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"


# One-line OOM messages pasted in issues, every era and paste mangling.
OOM_LINES = [
    ("https://github.com/pytorch/pytorch/issues/59778",
     "`CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total capacity; 781.59 MiB already allocated; 3.03 GiB free; 1.24 GiB reserved in total by PyTorch) `",
     {"requested": "2.26 GiB", "free": "3.03 GiB", "reserved": "1.24 GiB", "form": "bracket"}),
    ("https://github.com/carolchenyx/MGFN./issues/35",
     "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacty of 6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is allocated by PyTorch, and 2.30 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
     {"free": "0 bytes", "capacity": "6.00 GiB", "reserved_unallocated": "2.30 GiB", "form": "sentence"}),
    ("https://github.com/Synthintel0/MyGirlGPT/issues/11",
     "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 32.00 MiB. GPU 0 has a total capacty of 4.00 GiB of which 41.56 MiB is free. Including non-PyTorch memory, this process has 3.44 GiB memory in use. Of the allocated memory 2.58 GiB is allocated by PyTorch, and 1.90 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF.",
     {"this_process": "3.44 GiB", "allocated": "2.58 GiB"}),
    ("https://github.com/pytorch/pytorch/issues/16417",
     "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)",
     {"reserved_unallocated": "4.68 MiB", "free": "9.28 GiB"}),
    ("https://github.com/rshaojimmy/MADDoG/issues/11",
     "RuntimeError: CUDA out of memory. Tried to allocate 2.87 GiB (GPU 0; 14.76 GiB total capacity; 8.77 GiB already allocated; 19.75 MiB free; 13.71 GiB reserved in total by PyTorch)",
     {"reserved": "13.71 GiB", "reserved_unallocated": "5058.56 MiB"}),
    ("https://github.com/chnsh/DCRNN_PyTorch/issues/6",
     "`RuntimeError:CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 5.80 GiB total capacity; 4.36 GiB already allocated; 6.69 MiB free; 4.63 GiB reserved in total by PyTorch)`",
     {"requested": "20.00 MiB", "gpu": "0"}),
    ("https://github.com/ShannonAI/Self_Explaining_Structures_Improve_NLP_Models/issues/6",
     "Tried to allocate 20.00 MiB (GPU 0; 1.96 GiB total capacity; 1.24 GiB already allocated; 2.88 MiB free; 1.25 GiB reserved in total by PyTorch)",
     {"capacity": "1.96 GiB", "free": "2.88 MiB"}),
    ("https://github.com/deepspeedai/DeepSpeed/issues/6454",
     "CUDA out of memory.  Tried to allocate 3.74 GiB (GPU 3;  79.35 GiB total capacity;  55.83 GiB already allocated;  3.50 GiB free;  74.51 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.   See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
     {"gpu": "3", "capacity": "79.35 GiB", "reserved": "74.51 GiB"}),
    ("https://github.com/JDAI-CV/centerX/issues/51",
     "whyCUDA out of memory. Tried to allocate 130.00 MiB (GPU 1; 7.80 GiB total capacity; 5.91 GiB already allocated; 33.56 MiB free; 6.09 GiB reserved in total by PyTorch)",
     {"gpu": "1", "requested": "130.00 MiB"}),
    ("https://github.com/IDEA-Research/Grounded-SAM-2/issues/108",
     "`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 960.00 MiB. GPU 0 has a total capacity of 14.57 GiB of which 892.75 MiB is free. Process 23433 has 9.83 GiB memory in use. Including non-PyTorch memory, this process has 3.86 GiB memory in use. Of the allocated memory 3.33 GiB is allocated by PyTorch, and 417.48 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)`",
     {"other_pids": "23433", "other_memory": "9.83 GiB", "this_process": "3.86 GiB", "reserved_unallocated": "417.48 MiB"}),
    ("https://github.com/andimarafioti/florence2-finetuning/issues/17",
     "OutOfMemoryError: CUDA out of memory. Tried to allocate 108.00 MiB. GPU 0 has a total capacty of 15.89 GiB of which 65.12 MiB is free. Process 2670 has 15.82 GiB memory in use. Of the allocated memory 15.36 GiB is allocated by PyTorch, and 168.02 MiB is reserved by PyTorch but unallocated.",
     {"other_pids": "2670", "capacity": "15.89 GiB"}),
    ("https://github.com/jiesutd/NCRFpp/issues/121",
     "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/torch/lib/THC/generic/THCStorage.cu:58",
     {"form": "thc", "line": "58"}),
    ("https://github.com/jiesutd/NCRFpp/issues/121",
     "THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=58 error=2 : out of memory",
     {"form": "thc", "thc_line": "58"}),
    ("https://github.com/intel/intel-extension-for-pytorch/issues/629",
     "RuntimeError: XPU out of memory. Tried to allocate 1.71 GiB (GPU 0; 15.56 GiB total capacity; 176.00 MiB already allocated; 176.00 MiB reserved in total by PyTorch)",
     {"device": "XPU", "requested": "1.71 GiB", "allocated": "176.00 MiB", "reserved": "176.00 MiB", "form": "bracket"}),
    ("https://github.com/intel/intel-extension-for-pytorch/issues/846",
     "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 15.11 GiB. Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. Please use `empty_cache` to release all unoccupied cached memory.",
     {"device": "XPU", "capacity": "15.11 GiB", "allocated": "0 bytes", "form": "sentence"}),
    ("https://github.com/ROCm/TheRock/issues/1054",
     "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 16.00 GiB. GPU 0 has a total capacity of 15.24 GiB of which 15.09 GiB is free. Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_HIP_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
     {"device": "HIP", "requested": "16.00 GiB", "free": "15.09 GiB", "form": "sentence"}),
]


@pytest.mark.parametrize("url,line,expected", OOM_LINES, ids=[f"{u.split('github.com/')[1]}#{i}" for i, (u, _, _) in enumerate(OOM_LINES)])
def test_oom_lines_from_issues(url, line, expected):
    ev = events_of(line)
    assert ev.get_column("code").to_list() == ["cuda_oom"], (url, ev.rows())
    fields = json.loads(ev.item(0, "fields"))
    for key, value in expected.items():
        assert fields.get(key) == value, (url, key, fields)

"""The signature cases of tests/cases/signatures (format in tests/cases/README.md), one test per case."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import polars as pl
import pytest
from forensics.parsers import signatures

from tests.helpers import events_of

CASES_DIR = Path(__file__).resolve().parent / "cases" / "signatures"
# Keys of a case that compare against the event row itself (not its fields).
ROW_KEYS = ("line", "end_line", "rank", "step", "message")


def _load(kind: str) -> list[tuple[str, dict]]:
    out = []
    for path in sorted(CASES_DIR.glob("*.toml")):
        for case in tomllib.loads(path.read_text(encoding="utf-8")).get(kind, []):
            out.append((f"{path.stem}:{case['id']}", case))
    return out


CASES = _load("case")
NEAR_MISSES = _load("near_miss")


def test_case_ids_are_unique_and_files_are_named_by_their_code():
    ids = [i for i, _ in CASES + NEAR_MISSES]
    assert len(ids) == len(set(ids))
    for cid, case in CASES:
        assert cid.split(":", 1)[0] == case["code"], cid
        assert case["source"] and case["lines"], cid


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[i for i, _ in CASES])
def test_signature_case(case):
    ev = events_of(*case["lines"])
    if "codes" in case:
        assert ev.get_column("code").to_list() == case["codes"], (case["source"], ev.rows())
    row = ev.filter(pl.col("code") == case["code"])
    assert row.height == 1, ev.select("code", "fields").rows()
    got = row.row(0, named=True)
    assert got["severity"] == case["severity"]
    fields = json.loads(got["fields"])
    for key, value in case.get("fields", {}).items():
        assert fields.get(key) == value, (key, fields)
    if len(case["lines"]) == 1:
        assert got["line"] == 1 and got["end_line"] == 1
    for key in ROW_KEYS:
        if key in case:
            assert got[key] == case[key], (key, got[key])
    if "ts" in case:
        assert str(got["ts"]) == case["ts"]


@pytest.mark.parametrize("case", [c for _, c in NEAR_MISSES], ids=[i for i, _ in NEAR_MISSES])
def test_near_miss(case):
    assert set(events_of(*case["lines"]).get_column("code").to_list()) == set(case["codes"])


# Lines of forms whose code another case already covers, kept for the per-row coverage check.
EXTRA_LINES = [
    # log_end's dist_init form (at_end: its cases are in tests/test_dist_init_hang.py), OBS ultralytics/yolov5#4574
    "Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 (world_size=4, worker_count=8, timeout=0:30:00)",
    # log_end's plugin set-up and init_process_group-preamble forms (at_end: cases in tests/test_start_up_stop_lines.py)
    'Setting up PyTorch plugin "bias_act_plugin"...',  # OBS NVlabs/stylegan2-ada-pytorch#41
    "training on multiple gpus, this gpu 3",  # OBS wenet-e2e/wenet#812
    # log_end's train_start form (at_end: cases in tests/test_train_start_hang.py), OBS princeton-nlp/LLM-Shearing#53
    "Starting training...",
    # log_end's data-pipeline/runner start forms (at_end: cases in tests/test_data_pipeline_start_hang.py)
    "init prefetcher, this might take one minute or less...",  # OBS Megvii-BaseDetection/YOLOX#561
    # log_end's store-retry, Keras-bar and training-set-size forms (at_end: cases in tests/test_hang_log_endings.py)
    "I1127 21:38:31.255204 3935673 tcp_utils.cc:107] Retry to connect to 0.1.68.146:63314 while the server is not yet listening.",  # OBS PaddlePaddle/Paddle#48421
    " 999/1000 [============================>.] - ETA: 1s - loss: 0.2676 - rpn_class_loss: 0.0068",  # OBS matterport/Mask_RCNN#1588
    "Num training images: 118287",  # OBS yhenon/pytorch-retinanet#201
    # log_end's ps-lite start-up, wandb prompt and validation-start forms (at_end: cases in tests/test_waiting_log_ends.py)
    "[03:16:33] src/van.cc:75: Bind to role=scheduler, id=1, ip=machineA's IP address, port=9094, is_recovery=0",  # OBS apache/mxnet#5452
    "wandb: Enter your choice:",  # OBS wandb/wandb#1156
    "starting validation in mode val_sampling.",  # OBS MIC-DKFZ/medicaldetectiontoolkit#35
    # log_end's Paddle NCCL communicator start-up form (at_end: cases in tests/test_nccl_start_up_log_ends.py)
    "I0302 02:01:36.274989 31267 nccl_context.cc:83] init nccl context nranks: 4 local rank: 0/1 gpu id: 0/1 ring id: 0/1",  # OBS PaddlePaddle/PaddleFleetX#1054
    "Currently allocated     : 1.50 GiB",  # cuda_oom_detail (REC)
    "RuntimeError: NCCL Error 2: unhandled system error",  # torch nccl.cpp 1.x, OBS amdegroot/ssd.pytorch#577
    "RuntimeError: NCCL communicator was aborted on rank 2.  Original reason for failure was: [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1806151 milliseconds before timing out.",
    "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([32001, 4096]) from checkpoint, the shape in current model is torch.Size([32000, 4096]).",
    "Timeout (0:10:00)!",
    'Thread 2893 (idle): "MainThread"',
    "    - tensor 'L['x']' size mismatch at index 0. expected 19, actual 21",  # dynamo_recompile_reason list line, prefix stripped (OBS pytorch#110325)
    "RuntimeError: [enforce fail at inline_container.cc:747] . open file failed with strerror: Permission denied",
    # Heads of lines a paste wrapped (partial forms; parsers/followups.py joins the rest back on).
    "ctive operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for 1800011 millisecond",  # OBS open-r1#620
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",  # OBS TinyLLaVA_Factory#112
    "[ 4018.450000] Killed process 935 (python) total-vm:113656kB, anon-rss:102104kB, file-rss:0kB, shmem-rss:0kB",
    "zsh: segmentation fault (core dumped)  python train.py",
    "FatalError: `Segmentation fault` is detected by the operating system.",
    "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True. Excessive recompilations",
    "torch._dynamo.exc.Unsupported: Failed to trace builtin operator",
    "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
    "RuntimeError: NPU out of memory. Tried to allocate 5.03 GiB (NPU 3; 60.96 GiB total capacity; 49.47 GiB already allocated; 49.47 GiB current active; 1.32 GiB free; 57.55 GiB reserved in total by PyTorch)",
    "NPU out of memory. Tried to allocate more than 1EB memory",
    "level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
    # log_end's first-epoch header, tf.distribute all-reduce set-up and Ray worker-group forms (at_end: cases in
    # tests/test_first_step_log_ends.py)
    "Epoch 1/5",  # OBS matterport/Mask_RCNN#1823
    "INFO:tensorflow:batch_all_reduce: 4 all-reduces with algorithm = nccl, num_packs = 1",  # OBS tensorflow/tensorflow#44976
    "2022-03-22 11:11:18,857\tINFO trainer.py:199 -- Trainer logs will be logged in: /home/keep9oing/ray_results/train_2022-03-22_11-11-18",  # OBS ray-project/ray#23395
]


def test_every_signature_has_a_case():
    """Each [[signature]] row (not just each code) matches at least one line of the cases."""
    case_lines = [line for _, c in CASES for line in c["lines"]]
    quiet_lines = [line for _, n in NEAR_MISSES if n["codes"] for line in n["lines"]]
    lines = pl.Series(case_lines + EXTRA_LINES + quiet_lines)
    for sig in signatures.load():
        hit = lines.str.contains(sig.regex) & lines.str.contains_any(list(sig.needles), ascii_case_insensitive=True)
        assert hit.any(), f"{sig.code} ({sig.source}) has no test line"

"""Launcher prefixes (Open MPI / horovod tags, Ray worker tags, pdsh host names) and DeepSpeed's `[Rank N]`.

Every line is copied verbatim from a public issue thread (cited per case) or from the code index.
"""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
from forensics.parsers.prefixes import split_prefixes

from tests.helpers import frame, ingest_text

UTC = dt.timezone.utc


def split(*lines: str) -> list[tuple]:
    """(rank, ts, msg) of each line after prefix splitting."""
    out = split_prefixes(pl.DataFrame({"text": list(lines)}), 2024)
    return [(r["rank"], r["ts"], r["msg"]) for r in out.iter_rows(named=True)]


def events(tmp_path, *lines: str) -> list[tuple]:
    """(line, end_line, rank, code, message) of each event of a log made of these lines."""
    run = ingest_text(tmp_path, "\n".join(lines) + "\n")
    return frame(run, "events").sort("line", "code").select("line", "end_line", "rank", "code", "message").rows()


# --- Open MPI `--tag-output` / horovodrun --------------------------------------------------------------

# ChenRocks/UNITER#31 (horovod under mpirun --tag-output): `[job,rank]<stream>:` then the child's own text.
UNITER_31 = [
    '[1,1]<stderr>:  File "/opt/conda/lib/python3.6/site-packages/horovod/torch/mpi_ops.py", line 200, in allreduce_',
    "[1,1]<stderr>:    return synchronize(handle)",
    '[1,1]<stderr>:  File "/opt/conda/lib/python3.6/site-packages/horovod/torch/mpi_ops.py", line 436, in synchronize',
    "[1,1]<stderr>:    mpi_lib.horovod_torch_wait_and_clear(handle)",
    "[1,1]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks or an "
    "attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If the shutdown was "
    "caused by an exception, you should see the exception in the log before the first shutdown message.",
]


def test_open_mpi_tag_gives_the_rank_and_is_peeled():
    got = split(UNITER_31[1], UNITER_31[4])
    assert [(r, m[:40]) for r, _, m in got] == [
        (1, "    return synchronize(handle)"), (1, "RuntimeError: Horovod has been shut down")]


def test_open_mpi_tagged_traceback_is_one_block_of_that_rank(tmp_path):
    lines = ["[1,1]<stderr>:Traceback (most recent call last):", *UNITER_31]
    assert events(tmp_path, *lines) == [(1, 6, 1, "python_traceback", UNITER_31[4].removeprefix("[1,1]<stderr>:"))]


def test_sagemaker_mpirank_tag():
    # huggingface/accelerate SageMaker MPI log (code index): `[1,mpirank:N,host]<stream>:`.
    assert split(
        "[1,mpirank:3,algo-1]<stderr>:INFO:root:Reducer buckets have been rebuilt in this iteration.",
        "[1,mpirank:0,algo-1]<stdout>:algo-1:79:1300 [0] NCCL INFO Launch mode Parallel",
    ) == [(3, None, "Reducer buckets have been rebuilt in this iteration."),
          (0, None, "algo-1:79:1300 [0] NCCL INFO Launch mode Parallel")]


def test_horovodrun_rank_tag_with_ctime_stamp():
    # horovod/horovod#2097: horovodrun tags `[rank]<stream>:` after a ctime stamp; the stamp is the line's time
    # unless the child's own record prefix has one.
    line = ("Fri Sep 25 16:52:36 2020[1]<stderr>:2020-09-25 16:52:36.512268: I tensorflow/stream_executor/platform/"
            "default/dso_loader.cc:44] Successfully opened dynamic library libcudnn")
    ((rank, ts, msg),) = split(line)
    # The child's TensorFlow C++ record prefix is peeled too, and its stamp (to the microsecond) wins.
    assert (rank, ts) == (1, dt.datetime(2020, 9, 25, 16, 52, 36, 512268, tzinfo=UTC))
    assert msg == "Successfully opened dynamic library libcudnn"


# --- Ray -------------------------------------------------------------------------------------------------------


def test_ray_worker_prefix_is_peeled_and_the_record_prefix_after_it_read(tmp_path):
    # ray-project/ray#16979: `(pid=N) ` then Ray's own logger format; the rank is not in the prefix.
    got = split(
        "(pid=34272) 2021-07-14 13:21:26,887\tINFO distributed_torch_runner.py:58 -- Setting up process group for: "
        "tcp://10.148.18.24:47078 [rank=3]",
        "(pid=34275) NCCL DEBUG SET",
    )
    assert got[0][:2] == (None, dt.datetime(2021, 7, 14, 13, 21, 26, 887000, tzinfo=UTC))
    assert got[1] == (None, None, "NCCL DEBUG SET")


def test_ray_named_actor_prefixes():
    # (RayTrainWorker pid=17770) + DeepSpeed record: ray-project/ray Train issue log (code index);
    # (TrainTrainable pid=47169): Ray Train log (code index); (VllmWorker rank=3 pid=4665): vLLM's own form.
    got = split(
        "(RayTrainWorker pid=17770) [2025-10-15 15:51:07,627] [INFO] [real_accelerator.py:158:get_accelerator] "
        "Setting ds_accelerator to cuda (auto detect)",
        "(RayTrainWorker pid=1193, ip=10.244.4.193) Setting up process group for: env:// [rank=0, world_size=2]",
        "(TrainTrainable pid=47169) /home/ray/anaconda3/lib/python3.9/site-packages/transformers/utils/generic.py:441: "
        "UserWarning: torch.utils._pytree._register_pytree_node is deprecated.",
        "(ParaWorker pid=129375) Gpt<T>::load() - /llama-2-13b-hf/decoder.embed_tokens.weight.pt not found [repeated 5x across cluster]",
    )
    assert got[0] == (None, dt.datetime(2025, 10, 15, 15, 51, 7, 627000, tzinfo=UTC), "Setting ds_accelerator to cuda (auto detect)")
    assert [m for _, _, m in got[1:]] == [
        "Setting up process group for: env:// [rank=0, world_size=2]",
        "/home/ray/anaconda3/lib/python3.9/site-packages/transformers/utils/generic.py:441: UserWarning: "
        "torch.utils._pytree._register_pytree_node is deprecated.",
        # Ray's log deduplication suffix is not part of the message.
        "Gpt<T>::load() - /llama-2-13b-hf/decoder.embed_tokens.weight.pt not found",
    ]


def test_ray_prefixed_oom_is_recognised(tmp_path):
    # ray-project/ray#5755 (fairseq under Ray): the OOM signature reads the message after the worker tag.
    line = ("(pid=3959, ip=172.31.41.219) | WARNING: ran out of memory with exception: CUDA out of memory. Tried to "
            "allocate 1.50 GiB (GPU 0; 15.75 GiB total capacity; 11.71 GiB already allocated; 584.94 MiB free; 2.38 GiB cached);")
    run = ingest_text(tmp_path, line + "\n")
    ev = frame(run, "events").filter(pl.col("code") == "cuda_oom").row(0, named=True)
    assert ev["message"].startswith("| WARNING: ran out of memory")
    assert json.loads(ev["fields"])["requested"] == "1.50 GiB"


# --- pdsh (DeepSpeed multi-node launcher) ----------------------------------------------------------------------


def test_pdsh_host_before_a_record_prefix():
    # DeepSpeed pdsh launcher output (code index: a DeepSpeed operator's docs, verbatim log).
    got = split(
        "worker-1: [2022-09-08 12:02:16,518] [INFO] [launch.py:142:main] nnodes=2, num_local_procs=1, node_rank=1",
        "node01: [2024-01-08 16:13:55,768] [INFO] [real_accelerator.py:161:get_accelerator] Setting ds_accelerator to cuda (auto detect)",
        "node01: RuntimeError: CUDA error: an illegal memory access was encountered",
    )
    assert got == [
        (None, dt.datetime(2022, 9, 8, 12, 2, 16, 518000, tzinfo=UTC), "nnodes=2, num_local_procs=1, node_rank=1"),
        (None, dt.datetime(2024, 1, 8, 16, 13, 55, 768000, tzinfo=UTC), "Setting ds_accelerator to cuda (auto detect)"),
        # A host recognised on one line loses its prefix on every line of the frame.
        (None, None, "RuntimeError: CUDA error: an illegal memory access was encountered"),
    ]


def test_pdsh_ip_host_prefix(tmp_path):
    # deepspeedai/DeepSpeed#769 (tests/recordings/issues): IP-address hosts, no record prefix on the failing node.
    assert split("10.141.250.231: Traceback (most recent call last):")[0][2] == "Traceback (most recent call last):"


def test_near_misses_keep_their_words():
    # Exception names, module paths and `key: [list]` lines are not hosts; `(pid 12)` is no Ray tag.
    lines = [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory",
        "lr: [0.001, 0.001]",
        "(pid 1234) worker exited",
        "[1, 2]<stdout> is not a tag",
    ]
    assert [m for _, _, m in split(*lines)] == lines


# --- DeepSpeed `log_dist` `[Rank N]` ----------------------------------------------------------------------------


def test_deepspeed_log_dist_rank_ends_the_record_prefix():
    # transformers#14531 (`[Rank 0]`); the same call on every rank prints its own rank.
    got = split(
        "[2021-11-26 03:07:16,494] [INFO] [logging.py:69:log_dist] [Rank 0] step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]",
        "[2021-11-26 03:07:16,494] [INFO] [logging.py:69:log_dist] [Rank 4] step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]",
        # `[Rank -1]`: torch.distributed not initialised yet (formats.md §1.3 [SRC]).
        "[2021-11-26 03:07:16,494] [INFO] [logging.py:69:log_dist] [Rank -1] step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]",
    )
    assert [(r, m) for r, _, m in got] == [
        (0, "step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]"),
        (4, "step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]"),
        (None, "step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]"),
    ]


# --- `\r` segments inherit the physical line's launcher prefix --------------------------------------------------


def test_carriage_return_segments_inherit_the_rank_prefix(tmp_path):
    # tqdm redraws (`\r`) after a torchrun `--tee` / Open MPI tag: the launcher wrote its prefix once per line.
    bar = "Train Epoch     #1:  25%|##4       | {n}/26691 [22:30<1:08:06,  4.92it/s, loss=6.78, accuracy=0.271]"  # horovod#492
    text = (f"[default1]:\r{bar.format(n=6567)}\r{bar.format(n=6568)}\n"
            f"[1,2]<stderr>:\r{bar.format(n=6569)}\r[1,2]<stderr>:{bar.format(n=6570)}\n")
    run = ingest_text(tmp_path, text)
    m = frame(run, "metrics").filter(pl.col("name") == "loss").sort("line")
    assert m.select("line", "rank").rows() == [(1, 1), (1, 1), (2, 2), (2, 2)]


def test_ray_raylet_line_with_its_cpp_stamp(tmp_path):
    # WM-PO/WMPO#3: `(raylet) ` then Ray's spdlog stamp (level, pid, thread); the OOM-kill summary is host memory.
    line = ("(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: 2 Workers (tasks / actors) "
            "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at ")
    ((rank, ts, msg),) = split(line)
    assert (rank, ts) == (None, dt.datetime(2025, 12, 7, 9, 57, 19, 206000, tzinfo=UTC))
    assert msg.startswith("(raylet) node_manager.cc:3277: 2 Workers")
    assert [e[3] for e in events(tmp_path, line)] == ["host_oom_killed"]


# --- Slurm `srun --label`, Markdown-quoted pastes, NeMo's logger ---------------------------------------

# NVIDIA-NeMo/NeMo#5819 (NeMo Megatron under `srun --label`): the task id before every line. Here task 0
# holds global ranks 1-3: under torchrun-per-node a task is a node, so the label is not taken for a rank.
NEMO_5819 = [
    "0: [NeMo E 2023-01-18 07:39:42 exp_manager:423] You are running multi-node training without SLURM handling the "
    "processes. Please note that this is not tested in NeMo and could result in errors.",
    "0: Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/8",
    "0: Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/8",
    "0: Initializing distributed: GLOBAL_RANK: 2, MEMBER: 3/8",
    "1: Initializing distributed: GLOBAL_RANK: 2, MEMBER: 3/8",
    "1: Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/8",
    "1: Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/8",
]


def test_srun_labels_are_cut_and_the_nemo_record_prefix_read():
    got = split(*NEMO_5819)
    assert got[0] == (None, dt.datetime(2023, 1, 18, 7, 39, 42, tzinfo=UTC),
                      "You are running multi-node training without SLURM handling the processes. Please note that this "
                      "is not tested in NeMo and could result in errors.")
    assert [m for _, _, m in got[1:3]] == ["Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/8",
                                           "Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/8"]
    assert {r for r, _, _ in got} == {None}


def test_nemo_record_prefixes_of_other_eras():
    # NeMo W lines from NVIDIA/NeMo threads (code index): module names with `<frozen importlib`, a two-space body.
    assert split(
        "[NeMo W 2026-02-12 13:00:31 <frozen importlib:241] Megatron num_microbatches_calculator not found, using Apex version.",
        "[NeMo I 2024-11-28 09:58:12 megatron_parallel:524]  > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 26313472",
    ) == [
        (None, dt.datetime(2026, 2, 12, 13, 0, 31, tzinfo=UTC), "Megatron num_microbatches_calculator not found, using Apex version."),
        (None, dt.datetime(2024, 11, 28, 9, 58, 12, tzinfo=UTC),
         " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 26313472"),
    ]


def test_hand_printed_step_numbers_are_not_srun_labels(tmp_path):
    # `print(f"{step}: loss {loss}")`: a new number on every line is a step, not a task id.
    lines = ["100: loss 2.3100", "200: loss 2.2000", "300: loss 2.1000", "400: loss 2.0500"]
    assert [m for _, _, m in split(*lines)] == lines


def test_srun_labelled_tracebacks_are_one_block_per_task(tmp_path):
    # Two tasks failing alike, each line behind its `N: ` label (NeMo#5819's layout, torch's message).
    lines = []
    for task in (0, 1):
        lines += [f"{task}: Traceback (most recent call last):", f'{task}:   File "/ws/train.py", line 10, in <module>',
                  f"{task}:     main()", f"{task}: RuntimeError: CUDA error: an illegal memory access was encountered"]
    msg = "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert events(tmp_path, *lines) == [
        (1, 4, None, "python_traceback", msg), (4, 4, None, "illegal_memory_access", msg),
        (5, 8, None, "python_traceback", msg), (8, 8, None, "illegal_memory_access", msg),
    ]


# modelscope/ms-swift#6107: the log pasted inside a Markdown quote, `> ` before every line.
SWIFT_6107 = [
    "> iv-ydin754tmoxjd1twgixh:1458554:1478071 [6] NCCL INFO Channel 23/0 : 0[6] -> 1[7] via P2P/CUMEM/read",
    "> iv-ydin754tmoxjd1twgixh:1458549:1478046 [1] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "> iv-ydin754tmoxjd1twgixh:1458551:1480515 [3] NCCL INFO Assigned NET plugin IB to comm",
]


def test_markdown_quote_marks_are_cut():
    assert [m for _, _, m in split(*SWIFT_6107)] == [s.removeprefix("> ") for s in SWIFT_6107]


def test_quoted_metric_lines_read_as_their_own_format(tmp_path):
    # A torchtitan line (formats.md §1.8) anchors at `step:`: behind a quote mark it is still torchtitan's.
    text = "\n".join([*SWIFT_6107, "> step:  2  loss: 11.0000  memory:  1.00GiB(1.00%)  tps: 1,000  mfu: 1.00%"]) + "\n"
    m = frame(ingest_text(tmp_path, text), "metrics")
    assert m.select("line", "step", "name", "value", "source").rows() == [
        (4, 2, "loss", 11.0, "torchtitan"), (4, 2, "mem_max_reserved_mib", 1024.0, "torchtitan"),
        (4, 2, "mem_max_reserved_pct", 1.0, "torchtitan"), (4, 2, "tokens_per_s", 1000.0, "torchtitan"),
        (4, 2, "mfu", 1.0, "torchtitan"),
    ]


def test_a_few_quoted_lines_in_a_log_keep_their_marks():
    # Fewer than three lines in five starting with `>`: not a pasted quote, nothing is cut.
    lines = ["> note", "step 1 loss 2.0", "step 2 loss 1.9", "step 3 loss 1.8"]
    assert [m for _, _, m in split(*lines)] == lines


def test_skypilot_node_tags_are_cut_without_taking_the_node_for_a_rank():
    # skypilot-org/skypilot examples (code index): head and worker tags, the Go launcher's `ip=` before `pid=`.
    assert split(
        "(head, rank=0, pid=3808) All nodes: 10.100.9.12:8,10.100.10.12:8",
        "(worker1, rank=1, pid=2769, ip=10.100.10.12) Worker nodes",
        "(worker2, rank=2, ip=10.146.0.25, pid=13680) [rank9]: RuntimeError: NCCL error",
        "(head, rank=0, pid=3808) [1,0]<stdout>:# nThread 1 nGpus 1 minBytes 1024 maxBytes 8589934592",
    ) == [
        (None, None, "All nodes: 10.100.9.12:8,10.100.10.12:8"),
        (None, None, "Worker nodes"),
        (9, None, "RuntimeError: NCCL error"),
        (0, None, "# nThread 1 nGpus 1 minBytes 1024 maxBytes 8589934592"),  # mpirun's tag inside SkyPilot's
    ]


def test_quoted_nanogpt_log_with_its_nan_onset(tmp_path):
    # https://github.com/karpathy/nanoGPT/issues/215: the log pasted as a Markdown quote, `> ` and blank `> `
    # lines between records; the nanoGPT lines (formats.md §1.9) behind their time stamps are read as nanoGPT's.
    text = "\n".join([
        "> 2023-03-22 09:31:56 iter 2990: loss 3.8853, time 1096.65ms, mfu 15.34%", "> ",
        "> 2023-03-22 09:32:32 step 3000: train loss 4.0390, val loss 4.0427", "> ",
        "> saving checkpoint to out", "> ",
        "> 2023-03-22 09:32:41 iter 3000: loss 4.2490, time 35392.33ms, mfu 13.85%", "> ",
        "> 2023-03-22 09:32:52 iter 3010: loss nan, time 1019.95ms, mfu 14.12%",
    ]) + "\n"
    m = frame(ingest_text(tmp_path, text), "metrics")
    loss = m.filter(pl.col("name").is_in(["loss", "eval_loss"])).select("line", "ts", "step", "name", "value", "source").rows()
    assert loss[:3] == [
        (1, dt.datetime(2023, 3, 22, 9, 31, 56, tzinfo=UTC), 2990, "loss", 3.8853, "nanogpt"),
        (3, dt.datetime(2023, 3, 22, 9, 32, 32, tzinfo=UTC), 3000, "eval_loss", 4.0427, "nanogpt"),
        (7, dt.datetime(2023, 3, 22, 9, 32, 41, tzinfo=UTC), 3000, "loss", 4.249, "nanogpt"),
    ]
    assert loss[3][:4] == (9, dt.datetime(2023, 3, 22, 9, 32, 52, tzinfo=UTC), 3010, "loss") and loss[3][4] != loss[3][4]

"""Ranks from per-rank file names: what launchers and users name them, and names that only look numeric."""

from __future__ import annotations

import polars as pl
import pytest
from forensics.parsers.prefixes import rank_from_path

from forensics.ingest import ingest
from tests.helpers import frame, write_run


@pytest.mark.parametrize(("rel", "rank"), [
    ("rank3.log", 3),
    ("logs/node1-rank12.out", 12),
    ("log_rank_3.txt", 3),
    # DeepSpeed `--enable_each_rank_log DIR`: `{time.strftime('%Y%m%d%H%M%S')}_rank{dist_rank}.log` (launcher/launch.py).
    ("ds_logs/20241213093015_rank7.log", 7),
    ("worker_2.log", 2),
    ("global_rank_5.err", 5),
    # torchrun --log-dir: `<log_dir>/<run_id>/attempt_<n>/<local_rank>/{stdout,stderr}.log`.
    ("torchelastic/none_abc/attempt_0/3/stderr.log", 3),
    # Windows paths (a run folder copied from a Windows machine).
    ("logs\\rank4.log", 4),
    ("none_x\\attempt_1\\2\\stdout.log", 2),
    ("logs/rank3/train.log", 3),
])
def test_rank_in_the_name(rel, rank):
    assert rank_from_path(rel) == rank


@pytest.mark.parametrize("rel", [
    "run_2024.log", "llama-7b.log", "step100.log", "gpt2-124M.out",
    # Slurm array jobs' default `slurm-%A_%a.out`: the array task index, not a rank.
    "slurm-1234_3.out",
    "output_0_3.log",
    # A local rank, and hosts / pods: DeepSpeed hostfile node names, Kubeflow PyTorchJob pods.
    "local_rank3.log", "worker-1.log", "pytorch-dist-mnist-worker-0.log",
    "frank_3.log",
])
def test_no_rank_in_the_name(rel):
    assert rank_from_path(rel) is None


HF_LINE = "{'loss': 1.306, 'learning_rate': 1.2195121951219514e-06, 'epoch': 0.0}\n"  # huggingface/accelerate#1837


def test_a_rank_prefix_in_the_file_wins_over_the_local_rank_directory(tmp_path):
    # On the second node torchrun's `attempt_0/0/` holds global rank 8, which its `[rank8]:` lines say.
    run = ingest(write_run(tmp_path, {
        "node1/none_x/attempt_0/0/stderr.log": "[rank8]: " + HF_LINE,
        "node0/none_x/attempt_0/0/stderr.log": HF_LINE,
    }))
    got = frame(run, "metrics").filter(pl.col("name") == "loss").select("file", "rank").sort("file").rows()
    assert got == [("node0/none_x/attempt_0/0/stderr.log", 0), ("node1/none_x/attempt_0/0/stderr.log", 8)]

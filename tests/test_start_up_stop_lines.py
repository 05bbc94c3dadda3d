"""A log that stops on a framework's start-up line (StyleGAN's JIT plugin set-up, wenet's / fairseq's / DETR's line
printed right before init_process_group) is a silent-hang; the same lines followed by anything are not."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# NVlabs/stylegan2-ada-pytorch#41: train.py's start-up, then custom_ops' brief line with no `Done.` (hung for hours).
SG_START = ["Loading training set...", "", "Num images:  505487", "Image shape: [3, 256, 256]", "Label shape: [0]", "",
            "Constructing networks..."]
SG_PLUGIN = 'Setting up PyTorch plugin "bias_act_plugin"...'
# The brief form as printed (print(..., end=''): a trailing space and no newline before `Done.`).
SG_PLUGIN_BRIEF = 'Setting up PyTorch plugin "bias_act_plugin"... '
# nv-tlabs/GET3D#132: the same line for the upfirdn2d plugin, stuck ten minutes.
GET3D_PLUGIN = 'Setting up PyTorch plugin "upfirdn2d_plugin"...'
# NVlabs/long-video-gan README and StyleGAN2-ADA training logs: each plugin set up, then the run goes on.
SG_DONE = ['Setting up PyTorch plugin "bias_act_plugin"... Done.', 'Setting up PyTorch plugin "upfirdn2d_plugin"... Done.']
SG_NEXT = "Generator              Parameters  Buffers  Output shape         Datatype"
# custom_ops verbosity 'full': the set-up line, cpp_extension's lines, then `Done setting up …`.
SG_FULL = ['Setting up PyTorch plugin "bias_act_plugin"...', "Using /scratch/.cache/torch_extensions as PyTorch extensions root...",
           "Detected CUDA files, patching ldflags", "Emitting ninja build file /scratch/.cache/torch_extensions/bias_act_plugin/build.ninja...",
           'Done setting up PyTorch plugin "bias_act_plugin".']
# mahdi-darvish/GAN-Augmented-Pet-Classifier#1: the build failed (`Failed!`), a warning and a traceback follow.
SG_FAILED = ['Setting up PyTorch plugin "bias_act_plugin"... Failed!',
             r"C:\Users\Graham\Desktop\ICSCapstone\stylegan2-ada-pytorch-main\torch_utils\ops\bias_act.py:50: UserWarning: "
             "Failed to build CUDA kernels for bias_act. Falling back to slow reference implementation. Details:"]

# wenet-e2e/wenet#812: every process logs this line, then calls init_process_group (gloo, 8 nodes): nothing after.
WENET_INIT = [f"2021-11-24 08:11:55,95{i} INFO training on multiple gpus, this gpu {g}" for i, g in enumerate((2, 5, 4, 1, 6, 0, 7, 3))]
# wenet/utils/train_utils.py init_distributed (2023+): the same line with the rank and world size.
WENET_INIT_NEW = ["2024-03-01 10:02:11,412 INFO training on multiple gpus, this gpu 0, rank 0, world_size 2",
                  "2024-03-01 10:02:11,415 INFO training on multiple gpus, this gpu 1, rank 1, world_size 2"]
# wenet-e2e/wenet#1709: a start-up that completed goes on with the model and the first epoch.
WENET_NEXT = ["the number of model params: 46,197,266", "2023-02-27 08:55:39,141 INFO Epoch 0 TRAIN info lr 8e-08"]
# facebookresearch/detr#21 (util/misc.py init_distributed_mode prints before init_process_group): here the group formed
# and rank 0 went on (`git:` then its args); fundamentalvision/Deformable-DETR#204 stopped on the init lines.
DETR_INIT = [f"| distributed init (rank {r}): env://" for r in (3, 1, 4, 2, 6, 7, 0, 5)]
DETR_NEXT = ["git:", "  sha: be9d447ea3208e91069510643f75dadb7e9d163d, status: clean, branch: master"]
# facebookresearch/fairseq#604 (pre-logger fairseq): the data, then the init line; there a traceback followed.
FAIRSEQ_INIT = ["| dictionary: 267744 types", "| data-bin/wikitext-103 train 403231 examples",
                "| data-bin/wikitext-103 valid 851 examples", "| distributed init (rank 0): tcp://192.168.010.100:22015"]
FAIRSEQ_CRASH = ["Traceback (most recent call last):", '  File "/home/tuan/anaconda3/bin/fairseq-train", line 11, in <module>',
                 "    load_entry_point('fairseq', 'console_scripts', 'fairseq-train')()",
                 "RuntimeError: Connection timed out"]
# DeiT / MAE / ConvNeXt util/misc.py: `| distributed init (rank R): URL, gpu G`.
DEIT_INIT = ["| distributed init (rank 1): env://, gpu 1", "| distributed init (rank 0): env://, gpu 0"]


def _analyze(tmp_path: Path, lines: list[str]) -> tuple[Analysis, pl.DataFrame]:
    ctx = Context(ingest(write_run(tmp_path, {"console.log": "\n".join(lines) + "\n"})))
    return analyze(ctx), ctx.events


def _problems(a: Analysis) -> list:
    return [f for f in a.findings if f.severity > Severity.INFO]


def _end_forms(ev: pl.DataFrame) -> list[tuple[int, str]]:
    ends = ev.filter(pl.col("code") == "log_end")
    return list(zip(ends.get_column("line").to_list(), ends.get_column("fields").to_list(), strict=True))


def _stop_finding(tmp_path: Path, lines: list[str], form: str):
    """The first problem of a log whose last line gives the one `log_end` of `form`; it quotes that line first."""
    a, ev = _analyze(tmp_path, lines)
    (line, fields), = _end_forms(ev)
    assert line == len(lines) and f'"form":"{form}"' in fields
    top = _problems(a)[0]
    assert top.evidence[0].line == len(lines)
    return top


@pytest.mark.parametrize("lines", [
    [*SG_START, SG_PLUGIN],
    [SG_PLUGIN_BRIEF],
    [GET3D_PLUGIN],
    [*SG_DONE[:1], GET3D_PLUGIN],
], ids=["stylegan2_ada_train_start", "brief_trailing_space", "get3d_upfirdn2d", "second_plugin_after_a_done_one"])
def test_log_stopping_at_a_plugin_set_up_is_a_stale_build_lock(tmp_path, lines):
    top = _stop_finding(tmp_path, lines, "extension_build")
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.MEDIUM, "stale_build_lock")
    assert ("bias_act_plugin" if "bias_act" in lines[-1] else "upfirdn2d_plugin") in top.summary


@pytest.mark.parametrize("lines", [
    [*SG_START, *SG_DONE, "", SG_NEXT],
    SG_DONE,
    SG_FULL,
    [*SG_START, SG_PLUGIN, SG_NEXT],
], ids=["done_then_network_table", "every_plugin_done", "full_verbosity_done", "set_up_then_training_goes_on"])
def test_plugin_set_up_that_finished_is_quiet(tmp_path, lines):
    a, ev = _analyze(tmp_path, lines)
    assert _end_forms(ev) == []
    assert not _problems(a)


def test_failed_plugin_build_is_not_a_hang(tmp_path):
    # The fallback to the slow reference implementation is not a hang: no `log_end`, no silent-hang.
    a, ev = _analyze(tmp_path, SG_FAILED)
    assert _end_forms(ev) == []
    assert "silent-hang" not in {f.id for f in _problems(a)}


@pytest.mark.parametrize("lines", [
    WENET_INIT,
    WENET_INIT_NEW,
    DETR_INIT,
    FAIRSEQ_INIT,
    DEIT_INIT,
], ids=["wenet_2021", "wenet_rank_world_size", "detr_env", "fairseq_tcp", "deit_gpu"])
def test_log_stopping_before_init_process_group_is_a_low_hang(tmp_path, lines):
    top = _stop_finding(tmp_path, lines, "dist_init")
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.LOW, "rendezvous_incomplete")


@pytest.mark.parametrize("lines", [
    [*WENET_INIT, *WENET_NEXT],
    [*DETR_INIT, *DETR_NEXT],
], ids=["wenet_then_model", "detr_then_git"])
def test_init_lines_followed_by_the_run_are_quiet(tmp_path, lines):
    a, ev = _analyze(tmp_path, lines)
    assert _end_forms(ev) == []
    assert not _problems(a)


def test_init_line_before_a_crash_is_the_crash(tmp_path):
    # fairseq#604: the init line then a traceback: the error's playbook explains the run, not a hang.
    a, ev = _analyze(tmp_path, [*FAIRSEQ_INIT, *FAIRSEQ_CRASH])
    assert _end_forms(ev) == []
    assert "silent-hang" not in {f.id for f in _problems(a)}

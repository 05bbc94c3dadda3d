"""The signature table itself: well-formed rows, documented codes, first-stage needles, size fields."""

from __future__ import annotations

import re

import polars as pl
import pytest
from forensics.parsers import signatures

from forensics.contracts.fields import field_expr, size_to_mib
from tests.helpers import events_of

# formats.md 2.1 OBS (tests/cases/signatures/cuda_oom.toml, oom_current_this_process): the hint sits on the OOM line.
OOM_LINE = 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 19.68 GiB. GPU 0 has a total capacity of 23.68 GiB of which 11.88 GiB is free. Including non-PyTorch memory, this process has 11.79 GiB memory in use. Of the allocated memory 11.44 GiB is allocated by PyTorch, and 43.59 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)'


def test_size_to_mib():
    s = pl.DataFrame({"s": ["20.00 MiB", "0 bytes", "4.00 GiB", "512 bytes", "1.50 KiB", "2 GB", "nonsense", None]})
    got = s.select(size_to_mib(pl.col("s"))).to_series().to_list()
    assert got[:6] == [20.0, 0.0, 4096.0, 512 / 1048576, 1.5 / 1024, 2048.0]
    assert got[6] is None and got[7] is None


def test_field_expr_reads_fields_json():
    ev = events_of(OOM_LINE)
    got = ev.select(size_to_mib(field_expr("requested")).alias("req")).item()
    assert got == pytest.approx(19.68 * 1024)


def test_table_rows_are_well_formed():
    sigs = signatures.load()
    assert sigs and all(s.severity in signatures.SEVERITIES for s in sigs)
    for s in sigs:
        assert re.compile(s.regex).groups == len(re.compile(s.regex).groupindex), s.code
        assert "(?=" not in s.regex and "(?!" not in s.regex and "(?<" not in s.regex.replace("(?P<", "")


def test_every_code_is_documented_in_the_table_header():
    head = signatures.TABLE.read_text(encoding="utf-8").split("[macros]")[0]
    listed = set(re.findall(r"\b[a-z][a-z0-9_]*\b", head))
    assert set(signatures.codes()) <= listed


def test_first_stage_needles_cover_every_needle_and_skip_healthy_lines():
    stage = signatures.needles()
    # One Aho-Corasick pass: the budget grows only with forms no family word covers (TensorFlow's `OOM when
    # allocating tensor`, the localised `已杀死`, faulthandler's `(most recent call first):` and frame lines; Horovod's
    # stall report, cpp_extension's root line and its lock warning, Lightning's `GLOBAL_RANK:` registration;
    # TensorFlow's `Model diverged with loss = NaN`, the IDE's `Process finished with exit code`, the flight
    # recorder analyzer's `Not all ranks joining collective`; TensorFlow's `Received a label value of`, printed bare
    # under Keras' `Detected at node …`; TensorFlow's CTC `No valid path found.`, bare once its glog prefix is split off;
    # a terminal's `^C` echo; Lightning's and transformers' end-of-loop lines, yolact's `|| ETA: ` column and its
    # `Computing validation mAP` announcement; Keras' TerminateOnNaN `terminating training`, TRL's completion-only
    # collator `This instance will be ignored in loss calculation`; PIL's `image file is truncated (` and `cannot identify
    # image file`, flash-attn's `FlashAttention only supports Ampere GPUs or newer`, sentencepiece's
    # `[model_proto->ParseFromArray(`; Unsloth's `All labels in your dataset are -100`, torch's two optimizer
    # `loaded state dict …` parameter-group messages, Paddle's `No stack trace in paddle`, icefall's two grad-scale
    # lines, GluonTS' `Got NaN in first epoch`, scikit-learn's three non-finite input forms; Caffe's `Data layer prefetch
    # queue empty`; PaddleSeg's `Kappa:nan`/`Kappa: nan`, the early-stopping helper's `Validation loss decreased (`,
    # fastText's `Number of labels:`, ML-Agents' `Not Training.`; CNTK's `training criterion is not a number`, Caffe's
    # `Snapshotting ` announcement; gdb's `handleNCCLGuard` frame, DebugUnderflowOverflow's
    # `Detected inf/nan during batch_number` header and its rows' `     inf `, `     nan `, `e+04 ` columns; Caffe's
    # `Cannot copy param `, Open MPI's `FORCE-TERMINATE AT `, abseil's `*** SIG… received at time=`, the desync report's
    # `but didn't join collective #`, accelerate's `Cannot apply desired operation due to shape mismatches`, TensorFlow's
    # `Shape mismatch in the collective instance`, the loader's `undefined symbol: _Z` of a C++ symbol).
    assert len(stage) < 166
    # `at_end` signatures read only a log's last line, never the prefiltered candidates.
    for sig in (s for s in signatures.load() if not s.at_end):
        for needle in sig.needles:
            assert any(f in needle.lower() for f in stage), needle
    healthy = pl.Series([
        "{'loss': 2.3456, 'grad_norm': 1.2345678, 'learning_rate': 4.999e-05, 'epoch': 0.01}",
        " [2025-03-01 10:00:00.123456] iteration      100/  500000 | consumed samples:        51200 | elapsed time per iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 400.1 | learning rate: 1.500000E-04 | global batch size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |",
        "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1234.56 | max allocated: 2345.67 | reserved: 3000.00 | max reserved: 3100.00",
        "[2023-04-28 06:59:46,878] [INFO] [logging.py:96:log_dist] [Rank 0] step=510, skipped=8, lr=[0.001], mom=[(0.9, 0.999)]",
        "[2023-04-28 06:59:46,878] [INFO] [timer.py:260:stop] epoch=0/micro_step=100/global_step=100, RunningAvgSamplesPerSec=12.3, CurrSamplesPerSec=12.1, MemAllocated=4.1GB, MaxMemAllocated=7.9GB",
        "[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%",
        "iter 100: loss 3.2345, time 123.45ms, mfu 38.12%",
        "Epoch 1:   4%|▎         | 40/1095 [00:03<01:37, 10.84it/s, v_num=10]",
    ])
    assert not healthy.str.contains_any(stage, ascii_case_insensitive=True).any()

"""Samples a batch or a loss cannot take (bad-input-data), loss guards raised as exceptions (nan-loss), background-thread
tracebacks and fully qualified exception names without an Error suffix (unclassified-failure): positives and near misses."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def _problems(tmp_path: Path, text: str) -> list:
    a = analyze(Context(ingest(write_run(tmp_path, {"train.log": text}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


def _ids(tmp_path: Path, text: str) -> list[str]:
    return [f.id for f in _problems(tmp_path, text)]


# bghira/SimpleTuner#59: a repo's collate_fn stacking latents of different sizes (fetch.py -> collate_fn -> torch.stack).
COLLATE_STACK = """Traceback (most recent call last):
  File "/root/SimpleTuner/train_sdxl.py", line 858, in main
    for step, batch in enumerate(train_dataloader):
  File "/root/SimpleTuner/.venv/lib/python3.10/site-packages/torch/utils/data/_utils/fetch.py", line 54, in fetch
    return self.collate_fn(data)
  File "/root/SimpleTuner/train_sdxl.py", line 559, in collate_fn
    pixel_values = torch.stack(latents)
RuntimeError: stack expects each tensor to be equal size, but got [4, 128, 170] at entry 0 and [4, 96, 128] at entry 2
"""
# The same message from a stack in a model's forward: a code error, not the data's shapes.
FORWARD_STACK = """Traceback (most recent call last):
  File "train.py", line 40, in <module>
    out = model(x)
  File "model.py", line 12, in forward
    h = torch.stack([a, b], dim=0)
RuntimeError: stack expects each tensor to be equal size, but got [8, 16] at entry 0 and [8, 32] at entry 1
"""


def test_uneven_samples_under_collate_frames_are_bad_input_data(tmp_path):
    found = _problems(tmp_path, COLLATE_STACK)
    assert found[0].id == "bad-input-data"
    assert found[0].causes[0].cause.id == "uneven_sample_shapes"
    assert found[0].evidence[0].line == 8


def test_the_stack_message_outside_collate_stays_unclassified(tmp_path):
    assert _ids(tmp_path, FORWARD_STACK) == ["unclassified-failure"]


@pytest.mark.parametrize("line", [
    # albumentations-team/albumentations#459, #1158 and the >= 1.4 check_bboxes form.
    "ValueError: Expected x_max for bbox (0.94375, 0.5775173611111111, 1.003125, 0.6372395833333333, 0) to be in the range [0.0, 1.0], got 1.003125.",
    "ValueError: Expected y_min for bbox (tensor(0.4942), tensor(1.1944), tensor(0.5233), tensor(1.1998), tensor(45, dtype=torch.int32)) to be in the range [0.0, 1.0], got 1.1944444179534912.",
    "ValueError: y_max is less than or equal to y_min for bbox [0.1 0.5 0.8 0.5 0. ].",
])
def test_albumentations_box_checks_are_annotations_outside_the_image(tmp_path, line):
    found = _problems(tmp_path, "epoch 0 step 10 loss 1.25\n" + line + "\n")
    assert found[0].id == "bad-input-data" and found[0].causes[0].cause.id == "annotations_outside_image"


def test_a_box_message_in_prose_is_no_annotation_error(tmp_path):
    assert _ids(tmp_path, "INFO: expected boxes per image 12, clipping each bbox to the image\nepoch 1 loss 0.5\n") == []


CTC = ("#00000010: loss=336.84377636 ler=1.15732210 dt=4.88046891s\n"
       "2019-02-13 09:49:08.596539: W tensorflow/core/util/ctc/ctc_loss_calculator.cc:144] No valid path found.\n"
       "#00000020: loss=260.75162315 ler=1.04867650 dt=3.11120788s\n")


def test_tensorflow_ctc_without_a_valid_path_is_a_medium_bad_input_finding(tmp_path):
    found = _problems(tmp_path, CTC)
    assert [f.id for f in found] == ["bad-input-data"]
    assert found[0].severity == Severity.MEDIUM and found[0].causes[0].cause.id == "infeasible_samples"


def test_no_valid_path_without_the_ctc_calculator_stays_quiet(tmp_path):
    # A route planner or a file lookup may print the same sentence: only TensorFlow's CTC calculator's line counts.
    assert _ids(tmp_path, "planner: No valid path found.\nstep 3 loss 0.25\n") == []


@pytest.mark.parametrize("line", [
    "ValueError: Training loss is nan",  # RUCAIBox/RecBole#1726, #679
    "ValueError: loss is nan while training",  # aaronWool/rcvpose#23
    "ValueError: The loss returned in `training_step` is tensor(nan, device='cuda:0', grad_fn=<DivBackward0>).",
])
def test_a_loss_guard_raised_as_an_exception_is_nan_loss(tmp_path, line):
    tb = f'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    trainer.fit()\n{line}\n'
    assert _ids(tmp_path, tb)[0] == "nan-loss"


@pytest.mark.parametrize("line", [
    "ValueError: Input contains NaN, infinity or a value too large for dtype('float64').",
    "ValueError: Expected parameter loc (Tensor of shape (64, 2)) of distribution Normal to satisfy the constraint Real(), but found invalid values: tensor([[nan, nan]])",
    "ValueError: loss_weight is nan",
])
def test_a_nan_input_or_weight_is_not_a_nan_loss(tmp_path, line):
    tb = f'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    trainer.fit()\n{line}\n'
    assert "nan-loss" not in _ids(tmp_path, tb)


def test_paddle_loader_killed_by_sigkill_reads_like_torchs(tmp_path):
    line = "SystemError: (Fatal) DataLoader process (pid 10222) exited is killed by signal: Killed. (at /paddle/paddle/fluid/imperative/data_loader.cc:181)\n"
    assert _ids(tmp_path, line)[0] == "host-memory-exhaustion"


# wandb/wandb#1526: the file_stream thread's uncaught exception while epochs go on.
THREAD = """Epoch 6: loss = 0.000
Exception in thread Thread-5:
Traceback (most recent call last):
  File "/usr/lib/python3.8/threading.py", line 932, in _bootstrap_inner
    self.run()
  File "/usr/lib/python3.8/site-packages/wandb/sdk/internal/file_stream.py", line 255, in _thread_body
    self._send(ready_chunks)
requests.exceptions.HTTPError: 500 Server Error
"""


def test_a_background_threads_traceback_is_not_the_runs_failure(tmp_path):
    assert _ids(tmp_path, THREAD) == []


def test_a_main_thread_traceback_after_a_thread_error_still_counts(tmp_path):
    main = ('Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    main()\n'
            "KeyError: 'speaker_adversarial'\n")
    assert _ids(tmp_path, THREAD + main) == ["unclassified-failure"]


@pytest.mark.parametrize("line", [
    "triton.runtime.autotuner.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: 98304. Reducing block sizes or `num_stages` may help.",
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: 65536. Reducing block sizes or `num_stages` may help.",
])
def test_a_qualified_exception_without_an_error_suffix_ends_the_log_as_a_failure(tmp_path, line):
    assert _ids(tmp_path, line + "\n") == ["unclassified-failure"]


@pytest.mark.parametrize("line", [
    "Epoch: 5",
    "callbacks.EarlyStopping: patience 3",  # one module part: too short to be a qualified exception class
    "torch.distributed.run: setting OMP_NUM_THREADS",  # lowercase last part
])
def test_a_last_line_that_merely_holds_a_colon_stays_quiet(tmp_path, line):
    assert _ids(tmp_path, "step 1 loss 0.5\n" + line + "\n") == []

"""Failure forms of frameworks other than PyTorch's own messages: XLA/JAX device OOMs (one line or wrapped by a
paste), TensorFlow's allocator failure on a CPU device (host RAM), a final exception pasted with only its
`raise` line, and a trainer's prose `Loss is Infinity.`; each with the near misses that must stay quiet."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import log_events, write_run


def _fired(tmp: Path, text: str) -> list[str]:
    """Playbook ids of the findings above info, first first."""
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f.id for f in a.findings if f.severity > Severity.INFO]


def test_xla_oom_is_a_device_oom(tmp_path: Path):
    text = ("Epoch 1 step 10 loss 2.31\n"
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes.\n"
            "BufferAssignment OOM Debugging.\n")
    assert _fired(tmp_path, text)[:1] == ["cuda-oom"]


def test_xla_oom_wrapped_by_the_paste_is_joined(tmp_path: Path):
    text = ("2019-06-13 01:17:08.886805: E external/org_tensorflow/tensorflow/compiler/xla/python/local_client.cc:672] "
            "Execution of replica 0 failed: Resource exhausted: Out \n"
            "of memory while trying to allocate 5520758552 bytes.\n")
    ev = log_events(tmp_path, text).filter(pl.col("code") == "cuda_oom")
    assert ev.height == 1, ev
    fields = json.loads(ev.item(0, "fields"))
    assert fields["requested"] == "5520758552 bytes" and "partial" not in fields
    assert ev.item(0, "end_line") == 2
    assert _fired(tmp_path / "run", text)[:1] == ["cuda-oom"]


def test_tf_oom_on_a_cpu_device_is_host_memory(tmp_path: Path):
    text = ("epoch 9 of 55, step 40 of 2006, loss = 0.64\n"
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
            "shape[64,224,224,3] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu\n")
    fired = _fired(tmp_path, text)
    assert fired[:1] == ["host-memory-exhaustion"] and "cuda-oom" not in fired


def test_tf_oom_on_a_gpu_device_stays_a_device_oom(tmp_path: Path):
    text = ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
            "shape[300,120,435] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n")
    fired = _fired(tmp_path, text)
    assert fired[:1] == ["cuda-oom"] and "host-memory-exhaustion" not in fired


def test_exception_pasted_with_only_its_raise_line_is_a_failure(tmp_path: Path):
    text = ('raise MisconfigurationException(f"No `{loader_name}()` method defined to run `Trainer.{trainer_method}`.")\n'
            "pytorch_lightning.utilities.exceptions.MisconfigurationException: No `test_dataloader()` method defined "
            "to run `Trainer.test`.\n")
    assert _fired(tmp_path, text) == ["unclassified-failure"]


def test_raise_line_near_misses_stay_quiet(tmp_path: Path):
    # An exception named mid-sentence, a logged warning, a raise of another exception, and an exception
    # after which training went on.
    mentions = ("The docs say the trainer will raise MisconfigurationException if no test_dataloader is defined.\n"
                "WARNING: ValueError: could not parse the config, using defaults\n")
    assert _fired(tmp_path / "a", mentions) == []
    other = ('    raise ValueError("bad")\n'
             "KeyError: 'val_acc'\n")
    assert _fired(tmp_path / "b", other) == []
    went_on = ('raise ValueError(f"bad sample {i}")\n'
               "ValueError: bad sample 12\n"
               "step 11 loss 2.30\n"
               "step 12 loss 2.29\n")
    assert _fired(tmp_path / "c", went_on) == []


def test_prose_loss_is_infinity_is_a_nan_loss(tmp_path: Path):
    line = ("2017-08-20 16:11:{s:02d} INFO  DistriOptimizer$:295 - [Epoch 64 {n}/1281167][Iteration {i}] Train 1792 in "
            "4.4seconds. Throughput is 408.4 records/second. Loss is {v}. Current learning rate is 0.0462.\n")
    text = (line.format(s=38, n=736512, i=45457, v="1.2645824") + line.format(s=42, n=738304, i=45458, v="1.308916")
            + line.format(s=46, n=740096, i=45459, v="Infinity"))
    assert _fired(tmp_path, text)[:1] == ["nan-loss"]
    finite = line.format(s=38, n=736512, i=45457, v="1.2645824") + line.format(s=42, n=738304, i=45458, v="1.308916")
    assert "nan-loss" not in _fired(tmp_path / "finite", finite)

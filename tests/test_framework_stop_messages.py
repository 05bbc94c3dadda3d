"""Messages with which a framework stops a run and names the cause: a label past the class count (TensorFlow's sparse
cross-entropy, transformers' CTC heads), a TPU program over its HBM (XLA), Ray's memory monitor killing a worker,
GPT-NeoX giving up after consecutive fp16 overflows. Each ranks its playbook first; their source lines stay quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def problems(tmp: Path, text: str) -> list:
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


CASES = {
    # https://github.com/kakaoenterprise/RYANSQL/issues/2
    "tf_label_range": ("tensorflow.python.framework.errors_impl.InvalidArgumentError: Received a label value of 6 which is "
                       "outside the valid range of [0, 6).  Label values: 6\n", "bad-input-data", "wrong_class_count"),
    # https://github.com/huggingface/transformers/issues/18096
    "hf_ctc_vocab": ("ValueError: Label values must be <= vocab_size: 30\n", "bad-input-data", "wrong_class_count"),
    # openxla.org error code E1000 sample (JAX on TPU)
    "xla_hbm": ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
                "memory in memory space hbm. Used 49.34G of 32.00G hbm. Exceeded hbm capacity by 17.34G.\n",
                "cuda-oom", "demand_above_capacity"),
    # https://github.com/ray-project/ray/issues/28776
    "ray_oom": ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n",
                "host-memory-exhaustion", None),
    # https://github.com/EleutherAI/gpt-neox/issues/482
    "neox_overflow": ("Exception: Skipped 50 iterations in a row due to Overflow - Exiting training.\n", "fp16-overflow", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_stop_message_ranks_its_playbook_first(tmp_path: Path, name: str):
    text, root, cause = CASES[name]
    found = problems(tmp_path, text)
    assert found and found[0].id == root, [(f.id, f.summary) for f in found]
    if cause:
        assert found[0].causes[0].cause.id == cause
    assert any(e.line == 1 for e in found[0].evidence)


def test_tpu_hbm_summary_names_the_device_and_sizes(tmp_path: Path):
    top = problems(tmp_path, CASES["xla_hbm"][0])[0]
    assert top.summary.startswith("TPU out of memory") and "49.34G of 32.00G" in top.summary


# The lines that print these messages, shown by IPython tracebacks and quoted in threads, are not the messages.
SOURCE_LINES = [
    '-> 1247                 raise ValueError(f"Label values must be <= vocab_size: {self.config.vocab_size}")',
    'raise Exception(f"Skipped {self.n} iterations in a row due to Overflow - Exiting training.")',
    "# memory monitor https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html",
]


def test_source_lines_stay_quiet(tmp_path: Path):
    found = problems(tmp_path, "\n".join(SOURCE_LINES) + "\n")
    assert not [f for f in found if f.id in {"bad-input-data", "fp16-overflow", "host-memory-exhaustion"}], [(f.id, f.summary) for f in found]

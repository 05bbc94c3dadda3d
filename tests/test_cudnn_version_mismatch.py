"""TensorFlow/XLA's loaded-versus-compiled cuDNN error is driver-runtime-mismatch, and the abort it causes is no separate root."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def problems(tmp: Path, text: str) -> list:
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


# https://github.com/DrSleep/tensorflow-deeplab-resnet/issues/162 (TF 1.x, compatibility versions), then the fatal
# glog check of the first convolution and the shell's abort report.
TF1 = ("E tensorflow/stream_executor/cuda/cuda_dnn.cc:378] Loaded runtime CuDNN library: 6021 (compatibility version 6000) "
       "but source was compiled with 5105 (compatibility version 5100).  If using a binary install, upgrade your CuDNN library "
       "to match.\n"
       "F tensorflow/core/kernels/conv_ops.cc:532] Check failed: stream->parent()->GetConvolveAlgorithms(&algorithms) \n"
       "Aborted (core dumped)\n")
# XLA's wording (TF 2.x, JAX): `compiled with: X.Y.Z`, then JAX's own error.
XLA = ("E0430 22:32:43.417007 2493694 cuda_dnn.cc:454] Loaded runtime CuDNN library: 9.1.0 but source was compiled with: "
       "9.8.0. CuDNN library needs to have matching major version and equal or higher minor version.\n"
       "jax.errors.JaxRuntimeError: FAILED_PRECONDITION: DNN library initialization failed.\n")


def test_tf1_mismatch_then_abort_is_one_environment_finding(tmp_path):
    found = problems(tmp_path, TF1)
    assert found[0].id == "driver-runtime-mismatch"
    assert found[0].causes[0].cause.id == "cudnn_mismatch"
    assert found[0].evidence[0].line == 1
    assert "unclassified-failure" not in {f.id for f in found}


def test_xla_dotted_versions(tmp_path):
    found = problems(tmp_path, XLA)
    assert found[0].id == "driver-runtime-mismatch" and found[0].causes[0].cause.id == "cudnn_mismatch"


def test_a_healthy_tensorflow_start_naming_cudnn_stays_quiet(tmp_path):
    text = ("2021-03-01 10:00:00.000000: I tensorflow/stream_executor/platform/default/dso_loader.cc:49] "
            "Successfully opened dynamic library libcudnn.so.8\n"
            "2021-03-01 10:00:01.000000: I tensorflow/stream_executor/cuda/cuda_dnn.cc:359] Loaded cuDNN version 8101\n"
            "Epoch 1/20\n"
            # the first epoch's summary: a log cut right at the epoch header is a low at-end hang reading
            "1875/1875 [==============================] - 5s 2ms/step - loss: 0.2962 - accuracy: 0.9139\n")
    assert problems(tmp_path, text) == []

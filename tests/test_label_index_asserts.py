"""Index-bound kernel asserts: a label out of range when a loss raised them, device-assert elsewhere."""

from __future__ import annotations

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from tests.helpers import ingest_text

# wei-tim/YOWO#38: the THC-era assert line (no source file), then the traceback through the focal loss.
ASSERT = ("void THCudaTensor_scatterFillKernel(TensorInfo<Real, IndexType>, TensorInfo<long, IndexType>, Real, int, "
          "IndexType) [with IndexType = unsigned int, Real = float, Dims = 2]: block: [0,0,0], thread: [1,0,0] "
          "Assertion `indexValue >= 0 && indexValue < tensor.sizes[dim]` failed.\n")
TRACEBACK = ('Traceback (most recent call last):\n'
             '  File "train.py", line 180, in train\n'
             '    loss = region_loss(output, target)\n'
             '  File "/home/u/YOWO/{module}.py", line 58, in forward\n'
             '    self.alpha = self.alpha.cuda()\n'
             'RuntimeError: CUDA error: device-side assert triggered\n')


def _top(tmp_path, text: str) -> str:
    a = analyze(Context(ingest_text(tmp_path, text)))
    return [f.id for f in a.findings if f.severity > Severity.INFO][0]


def test_scatter_index_assert_under_a_loss_frame_is_a_label_out_of_range(tmp_path):
    assert _top(tmp_path, ASSERT + TRACEBACK.format(module="FocalLoss")) == "bad-input-data"


def test_scatter_index_assert_outside_a_loss_stays_a_device_assert(tmp_path):
    """Near miss: the same assert raised under a model's own indexing is any index, not a label."""
    assert _top(tmp_path, ASSERT + TRACEBACK.format(module="backbone")) == "device-assert"

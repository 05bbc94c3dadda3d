"""loss-stagnation's chance reading (ln K of a class count) on a loss that diverged to astronomical values: no head has
a billion classes, so such a level is never read as chance (and its ln(K) arithmetic never runs on it)."""

from __future__ import annotations

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# facebookresearch/fairseq#41: the fconv model's loss explodes to 1e12 after the grad norm (lines as logged, shortened
# to the columns that matter).
DIVERGED = """| epoch 001  1000 / 331737 loss=9.57 (10.94), wps=18515, lr=1.25, clip=100%, gnorm=2.0540
| epoch 001  2000 / 331737 loss=8.61 (9.91), wps=18466, lr=1.25, clip=100%, gnorm=1.7149
| epoch 001  3000 / 331737 loss=7.50 (9.23), wps=18493, lr=1.25, clip=100%, gnorm=2.7501
| epoch 001  4000 / 331737 loss=6.87 (8.75), wps=18522, lr=1.25, clip=100%, gnorm=100615.8788
| epoch 001  5000 / 331737 loss=10405.01 (136.96), wps=18532, lr=1.25, clip=100%, gnorm=1500459828271.3960
| epoch 001  6000 / 331737 loss=4773454961.36 (92926125.94), wps=18564, lr=1.25, clip=100%, gnorm=37459419138681.4219
| epoch 001  7000 / 331737 loss=7746569234820.15 (126329286789.38), wps=18577, lr=1.25, clip=100%, gnorm=inf
"""


def test_a_loss_at_1e12_is_divergence_not_chance(tmp_path):
    found = [f for f in analyze(Context(ingest(write_run(tmp_path, {"train.log": DIVERGED})))).findings
             if f.severity > Severity.INFO]
    assert found[0].id == "gradient-explosion"
    assert "loss-stagnation" not in {f.id for f in found}

"""dataloader-bottleneck on a few logged points: a paste of a run's first iterations is warm-up, not a verdict.

Lines copy public pastes: Oneflow-Inc/libai#308 (LiBai's detectron2-style printer, iterations 0-4 of a
healthy 100-iteration ViT test: `data_time` is a 20-iteration window average still holding the first
batches, while `time` starts after the timer's warm-up) and facebookresearch/detectron2#195 (a healthy
run, data_time a tenth of time). The iteration numbers are changed where a test says so.
"""

from __future__ import annotations

from forensics.contracts.context import Context
from forensics.engine import analyze
from tests.helpers import ingest_text

LIBAI = """\
[06/27 08:45:41 lb.engine.trainer]: Starting training from iteration 0
[06/27 08:45:43 lb.utils.events]:  iteration: 0/100  consumed_samples: 16  total_loss: 2.344  data_time: 0.2230 s/iter  lr: 0.00e+00
[06/27 08:45:43 lb.utils.events]:  eta: 0:00:42  iteration: 1/100  consumed_samples: 32  total_loss: 2.373  data_time: 0.2223 s/iter  lr: 5.00e-04
[06/27 08:45:44 lb.utils.events]:  eta: 0:00:26  iteration: 2/100  consumed_samples: 48  total_loss: 2.401  time: 0.2740 s/iter  data_time: 0.2175 s/iter total_throughput: 58.38 samples/s lr: 1.00e-03
[06/27 08:45:44 lb.utils.events]:  eta: 0:00:26  iteration: 3/100  consumed_samples: 64  total_loss: 2.706  time: 0.2739 s/iter  data_time: 0.2169 s/iter total_throughput: 58.41 samples/s lr: 1.00e-03
[06/27 08:45:44 lb.utils.events]:  eta: 0:00:26  iteration: 4/100  consumed_samples: 80  total_loss: 2.693  time: 0.2773 s/iter  data_time: 0.2180 s/iter total_throughput: 57.70 samples/s lr: 1.00e-03
"""

DETECTRON2_HEALTHY = """\
[11/01 11:23:38 d2.utils.events]: eta: 8:08:27  iter: 639  total_loss: 1.194  loss_cls: 0.831  loss_box_reg: 0.355  time: 0.3326  data_time: 0.0328  lr: 0.006394  max_mem: 3961M
[11/01 11:23:44 d2.utils.events]: eta: 8:08:20  iter: 659  total_loss: 1.172  loss_cls: 0.815  loss_box_reg: 0.362  time: 0.3324  data_time: 0.0366  lr: 0.006593  max_mem: 3961M
[11/01 11:23:51 d2.utils.events]: eta: 8:08:14  iter: 679  total_loss: 1.120  loss_cls: 0.772  loss_box_reg: 0.353  time: 0.3325  data_time: 0.0365  lr: 0.006793  max_mem: 3961M
"""


def _loader(tmp_path, text: str):
    return [f for f in analyze(Context(ingest_text(tmp_path, text))).findings if f.id == "dataloader-bottleneck"]


def test_first_iterations_of_a_run_stay_quiet(tmp_path):
    assert _loader(tmp_path, LIBAI) == []


def test_same_lines_past_the_warm_up_still_fire(tmp_path):
    later = LIBAI
    for k in range(4, -1, -1):
        later = later.replace(f"iteration: {k}/100", f"iteration: {k + 40}/100")
    found = _loader(tmp_path, later)
    assert len(found) == 1 and found[0].severity.name == "MEDIUM"
    assert found[0].facts["data_share"] > 0.7
    assert {e.line for e in found[0].evidence} <= {4, 5, 6}


def test_healthy_detectron2_share_stays_quiet(tmp_path):
    assert _loader(tmp_path, DETECTRON2_HEALTHY) == []

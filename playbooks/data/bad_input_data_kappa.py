"""bad-input-data from an evaluation whose Cohen's kappa is undefined: labels and predictions all one class."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.data.bad_input_data import PLAYBOOK
from forensics.playbooks.evidence import combine, detection, events

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

KAPPA_CODES = ("kappa_undefined",)
# numpy's 0/0 warning raised on the kappa line of the metric code (`kappa = (po - pe) / (1 - pe)` in PaddleSeg's
# metrics.py): the same undefined value, quoted beside it.
ZERO_DIVIDE_CODES = ("numpy_invalid_value",)
KAPPA_SOURCE = r"(?i)metrics\.py|kappa"


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """A printed kappa of NaN. Cohen's kappa (po - pe) / (1 - pe) is 0/0 only where the expected agreement pe is 1,
    which needs every label and every prediction of the evaluation to be the same class: the evaluation set holds one
    class only. A segmentation set whose foreground is written as 255 (read as the ignore index) or masks saved
    as 0/255 where 0/1 are expected leaves only the background (PaddlePaddle/PaddleSeg#372: `Category IoU: [1.0000
    0.0000]`, `Kappa:nan`, target pixels 255; #1267 and PaddlePaddle/Paddle#34282: `mIoU: 0.5000 Acc: 1.0000 Kappa:
    nan`). A model that only predicts the majority class while both classes are labelled gives a finite kappa near 0
    (PaddleSeg#1537: `Kappa: -0.0008`) and is no finding here."""
    ev = events(ctx, KAPPA_CODES)
    if ev.height == 0:
        return None
    warn = events(ctx, ZERO_DIVIDE_CODES)
    if warn.height:
        warn = warn.filter(pl.col("message").str.contains(KAPPA_SOURCE) | pl.col("text").str.contains(KAPPA_SOURCE))
    return detection(
        combine(ev, warn),
        "the evaluation's Cohen's kappa is NaN (0/0: expected agreement 1), possible only when every label and every "
        "prediction is the same class: the evaluation labels hold a single class (masks encoded 0/255 where class ids "
        "0..K-1 are expected, or a label value the loss ignores)",
        {"single_class_labels": 0.9, "wrong_class_count": 0.4},
        confidence=0.75,
        severity=Severity.MEDIUM,
        lead=ev.head(1),
        facts={"kappa_lines": ev.height},
    )

"""nan-loss from an early-stopping checkpoint line whose validation loss is NaN after a NaN best (NaN at every evaluation)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.evidence import events
from forensics.playbooks.fields import field
from forensics.playbooks.numerical.nan_loss import PLAYBOOK

from forensics.contracts.context import Context, evidence_rows, onset_of
from forensics.contracts.model import Detection, Severity

EARLY_STOP_CODES = ("early_stopping_nonfinite",)
NONFINITE = r"^-?(?:nan|inf)$"
# The validation losses those repositories print beside it (`Vali Loss: nan`, Informer/Autoformer/Time-Series-Library
# exp_main.py), quoted as the loss the checkpoint line compares.
EVAL_LOSS = r"^(?:eval|val|vali|valid|validation|test|dev)_loss$"


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """`Validation loss decreased (nan --> nan)`: the early-stopping helper's best validation loss so far is NaN and
    the new one is NaN too. A NaN makes the helper's comparison false, so every NaN evaluation is saved as an
    "improvement" and the best stays NaN: the line proves two evaluations in a row were NaN, and the first NaN line
    of the run (`inf --> nan`, its initial best) that none before it was finite (zhouhaoyi/Informer2020#193, #461;
    thuml/Time-Series-Library#315: `Vali Loss: nan` beside finite train and test losses). One `(0.41 --> nan)`
    after finite evaluations is a single NaN evaluation, which the evaluation-loss rule of nan-loss leaves alone.
    Medium, as that rule: the training loss may be finite (a validation split with gaps or an unnormalised column)."""
    ev = events(ctx, EARLY_STOP_CODES)
    if ev.height == 0:
        return None
    best = field("best").fill_null("")
    twice = ev.filter(best.str.contains(NONFINITE))
    if twice.height == 0:
        return None
    nan_rows = pl.DataFrame()
    for name in M.names_like(ctx, EVAL_LOSS):
        s = M.series(ctx, name).filter(~pl.col("value").is_finite())
        if s.height:
            nan_rows = s
            break
    train = M.series(ctx, M.LOSS, finite=True)
    beside = f" while the training loss stays finite ({M.fmt(train.item(-1, 'value'))} last)" if train.height else ""
    return Detection(
        summary=("the early-stopping check logs `Validation loss decreased (nan --> nan)`: the best validation loss so "
                 f"far is already NaN and the new one is NaN too, at {twice.height} evaluation(s) after the first{beside}; "
                 "the model gives NaN on held-out data (non-finite or unnormalised inputs in that split, or a NaN from "
                 "the first evaluation)"),
        onset=onset_of(twice),
        evidence=M.quote(nan_rows.head(2)) + evidence_rows(twice.head(2)),
        evidence_count=twice.height + nan_rows.height,
        causes={"bad_batch": 0.6, "log_or_div_zero": 0.4},
        confidence=0.7,
        severity=Severity.MEDIUM,
        facts={"signal": "early_stopping", "nonfinite_points": twice.height + 1},
    )

"""tokenizer-mismatch from a chat-template preprocess that masked whole samples (FastChat/LLaVA `tokenization mismatch`)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.data.tokenizer_mismatch import PLAYBOOK
from forensics.playbooks.evidence import detection, events, first_message

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

# preprocess_* compares the length its template separators give with the tokenized sample and, when they differ,
# sets every target of the sample to IGNORE_INDEX and prints this warning: the sample teaches nothing. A loss of
# exactly 0 beside the warnings is the run in which no sample kept a target.
TEMPLATE_CODES = ("template_tokenization_mismatch",)


@PLAYBOOK.detector(("events",))
def detect_template_mismatch(ctx: Context, th: dict) -> Detection | None:
    """`tokenization mismatch` warnings: high with a loss mostly at 0, medium repeated with no loss logged, else low."""
    ev = events(ctx, TEMPLATE_CODES)
    if ev.height == 0:
        return None
    loss = M.series(ctx, M.LOSS)
    zero = loss.filter(pl.col("value") == 0.0)
    # Most logged points at exactly 0: a single all-masked batch among learning ones is not the run's state.
    if zero.height and 2 * zero.height >= loss.height:
        severity, confidence = Severity.HIGH, 0.9
        what = f"the loss reads exactly 0 ({zero.height} of {loss.height} logged point(s)): every target is masked"
    elif loss.height == 0 and ev.height >= th["min_template_mismatches"]:
        severity, confidence = Severity.MEDIUM, 0.6
        what = "each one is a sample whose targets were all masked"
    else:
        severity, confidence = Severity.LOW, 0.5
        what = "those samples' targets were masked" + ("; the loss is not 0, so other samples still train" if loss.height else "")
    found = detection(ev, f"the conversation template does not fit the tokenizer ({ev.height} `tokenization mismatch` "
                          f"warning(s)): {what}: {first_message(ev)}", {"chat_template": 1.0},
                      confidence=confidence, severity=severity,
                      facts={"template_mismatches": ev.height, "zero_loss_points": zero.height})
    # The zero-loss lines prove the damage: quoted right after the first warnings, before the repeats.
    found.evidence = found.evidence[:2] + M.quote(zero, limit=2) + found.evidence[2:]
    return found

"""bad-input-data from updates skipped for a NaN gradient norm while the logged loss stays finite (ESPnet's trainer)."""

from __future__ import annotations

from forensics.playbooks import metric_series as M
from forensics.playbooks.data.bad_input_data import PLAYBOOK
from forensics.playbooks.evidence import combine, detection, events

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

SKIP_CODES = ("nonfinite_grad_skipped",)
# Only NaN: an `inf` norm is what an fp16 overflow step gives, and the scaler skipping it is normal.
NAN_SKIP = r"grad norm is (?:tensor\()?-?nan"
CTC_CODES = ("ctc_nan_grad_samples",)
# fp16 loss scaling in the log: NaN gradients there are overflow first (fp16-overflow and nan-loss judge them).
FP16_CODES = ("fp16_overflow", "loss_scale_min_reached")


@PLAYBOOK.detector(("events", "metrics"))
def detect_nan_grad_skips(ctx: Context, th: dict) -> Detection | None:
    """Repeated NaN-gradient skips with a finite loss: samples whose gradient is NaN though the batch loss is not."""
    skips = events(ctx, SKIP_CODES, text=NAN_SKIP)
    ctc = events(ctx, CTC_CODES)
    if skips.height < th["min_skipped_updates"] and ctc.height == 0:
        return None
    loss = M.series(ctx, M.LOSS)
    if loss.height and not bool(loss.get_column("value").is_finite().all()):
        return None  # a non-finite loss: nan-loss
    if events(ctx, FP16_CODES).height or M.present(ctx, M.LOSS_SCALE):
        return None
    has_ctc = ctc.height > 0 or bool(M.names_like(ctx, r"ctc"))
    causes = {"infeasible_samples": 0.9, "corrupt_samples": 0.5} if has_ctc else {"corrupt_samples": 0.7, "infeasible_samples": 0.5}
    finite = f"; the logged loss stays finite ({M.fmt(float(loss.item(-1, 'value')))} last)" if loss.height else ""
    why = " with a CTC loss (utterances shorter than their transcripts give NaN CTC gradients)" if has_ctc else ""
    summary = (f"{skips.height} update(s) skipped because the gradient norm was NaN{finite}: some samples give NaN gradients"
               f"{why}" + (f"; the CTC loss reported NaN-gradient samples {ctc.height} time(s)" if ctc.height else ""))
    ev = combine(skips, ctc)
    return detection(ev, summary, causes, confidence=0.75, severity=Severity.HIGH,
                     facts={"skipped_updates": skips.height, "ctc_nan_grad_reports": ctc.height,
                            "ctc_loss": has_ctc, "loss_finite": bool(loss.height)})

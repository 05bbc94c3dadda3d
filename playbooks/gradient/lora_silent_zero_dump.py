"""lora-silent-zero from a dump of LoRA-up weights after training: every module exactly 0 (the adapters never learned)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks import metric_series as M
from forensics.playbooks.gradient.lora_silent_zero import DUMP, PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection


@PLAYBOOK.detector(("metrics",))
def detect_dump(ctx: Context, th: dict) -> Detection | None:
    """All LoRA-up modules of a weight dump at exactly 0; some zeros among trained modules are no finding."""
    if not M.present(ctx, (DUMP,)):
        return None
    rows = ctx.metric_rows(DUMP).filter(pl.col("value").is_not_nan())
    if rows.height < th["dump_min_modules"] or bool((rows.get_column("value").abs() > th["atol"]).any()):
        return None
    first = rows.row(0, named=True)
    return Detection(
        summary=f"all {rows.height} LoRA-up (lora_B) weights of the adapter dump read exactly 0: lora_up starts at zero "
                "and only training moves it, so the adapters never learned",
        onset=M.onset_at(first),
        evidence=M.quote(rows.head(3)),
        evidence_count=rows.height,
        causes={"not_trainable": 0.8, "clipping_to_zero": 0.3, "ddp_skips_adapters": 0.3},
        confidence=0.85,
        facts={"modules": rows.height, "zero_modules": rows.height},
    )

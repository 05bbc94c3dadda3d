"""An exception line whose message runs over several lines to the end of a paste (no traceback above it) is how the
process ended: a finding, not a clean report; a log that goes on after such lines, or ends on indented lines under
something else, stays quiet."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import analyze_console

# sipie800/ComfyUI-PuLID-Flux-Enhanced#34: xformers' dispatch report, every kernel rejected, under a dashed rule.
XFORMERS = [
    "---------------------------------------------------------------------------------------",
    "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:",
    "     query       : shape=(1, 577, 16, 64) (torch.bfloat16)",
    "     key         : shape=(1, 577, 16, 64) (torch.bfloat16)",
    "     value       : shape=(1, 577, 16, 64) (torch.bfloat16)",
    "     attn_bias   : <class 'NoneType'>",
    "     p           : 0.0",
    "`fa2F@v2.6.3-24-gbdf733b` is not supported because:",
    "    requires device with capability > (8, 0) but your GPU has capability (7, 5) (too old)",
    "    bf16 is only supported on A100+ GPUs",
    "`cutlassF-pt` is not supported because:",
    "    bf16 is only supported on A100+ GPUs",
]
# overwindows/PALM#2: omegaconf's message with its full_key / reference_type / object_type rows.
OMEGACONF = [
    "omegaconf.errors.ConfigAttributeError: Key 'min_lr' is not in struct",
    "        full_key: optimization.min_lr",
    "        reference_type=Any",
    "        object_type=dict",
]
# omry/omegaconf#209: the same rows printed twice, a blank line between, after the `...` of a cut paste.
OMEGACONF_TWICE = [
    "...",
    "omegaconf.errors.ConfigAttributeError: Key 'drover' not in 'MySQLConfig'",
    "        full_key: drover",
    "        reference_type=Optional[dict]",
    "        object_type=MySQLConfig",
    "",
    "        full_key: drover",
    "        reference_type=Optional[dict]",
    "        object_type=MySQLConfig",
]


def problems(tmp_path: Path, lines: list[str]) -> list:
    return analyze_console(tmp_path, lines)[0]


def cited(f) -> set[str]:
    return {f"{e.file}:{e.line}" for e in f.evidence}


def test_xformers_dispatch_report_is_the_final_error(tmp_path):
    found = problems(tmp_path, XFORMERS)
    assert [f.id for f in found] == ["unclassified-failure"]
    assert cited(found[0]) == {"console.log:2"}
    assert "No operator found" in found[0].facts["final_error"]


def test_omegaconf_message_rows_make_a_final_error(tmp_path):
    for i, lines in enumerate((OMEGACONF, OMEGACONF_TWICE)):
        found = problems(tmp_path / str(i), lines)
        assert [f.id for f in found] == ["unclassified-failure"], lines
        assert found[0].facts["final_error"].startswith("omegaconf.errors.ConfigAttributeError: Key '")


def test_a_log_that_goes_on_after_the_message_stays_quiet(tmp_path):
    # The same report caught and logged, then training lines (a fallback to another attention path): no final error.
    went_on = XFORMERS[1:] + ["Epoch 1: 100%|##########| 50/50 [00:12<00:00,  4.01it/s, loss=0.532]"]
    assert problems(tmp_path, went_on) == []


def test_indented_rows_under_other_lines_stay_quiet(tmp_path):
    # transformers Trainer.log_metrics at the end of a healthy run; Python's warnings module (the source line indented
    # under its `file:line: UserWarning:` header).
    metrics = ["***** train metrics *****", "  epoch                    =        3.0", "  train_loss               =     0.5314",
               "  train_runtime            = 0:12:01.33"]
    warning = ["/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will create "
               "4 worker processes in total.", "  warnings.warn(_create_warning_msg("]
    assert problems(tmp_path / "m", metrics) == []
    assert problems(tmp_path / "w", warning) == []

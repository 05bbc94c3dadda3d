"""transformers' DebugUnderflowOverflow report as fp16-overflow evidence: activations climbing to the float16 limit
(65504) and then `inf`; the report cut before its inf row, or a NaN-only report, is not read as an fp16 overflow."""

from __future__ import annotations

from forensics.contracts.model import Severity
from tests.helpers import analyze_console

# stas00/ml-engineering debug/pytorch.md (the same report is quoted in transformers' debug_utils.py docstring and
# docs/source/en/debugging.md): google/mt5-small under fp16 mixed precision, the tail of the report from its `[...]`.
MT5_REPORT = [
    "Detected inf/nan during batch_number=0",
    "Last 21 forward frames:",
    "abs min  abs max  metadata",
    "[...]",
    "                  encoder.block.2.layer.1.DenseReluDense.wi_0 Linear",
    "2.17e-07 4.50e+00 weight",
    "1.79e-06 4.65e+00 input[0]",
    "2.68e-06 3.70e+01 output",
    "                  encoder.block.2.layer.1.DenseReluDense.wi_1 Linear",
    "8.08e-07 2.66e+01 weight",
    "1.79e-06 4.65e+00 input[0]",
    "1.27e-04 2.37e+02 output",
    "                  encoder.block.2.layer.1.DenseReluDense.wo Linear",
    "1.01e-06 6.44e+00 weight",
    "0.00e+00 9.74e+03 input[0]",
    "3.18e-04 6.27e+04 output",
    "                  encoder.block.2.layer.1.DenseReluDense T5DenseGatedGeluDense",
    "1.79e-06 4.65e+00 input[0]",
    "3.18e-04 6.27e+04 output",
    "                  encoder.block.2.layer.1.dropout Dropout",
    "3.18e-04 6.27e+04 input[0]",
    "0.00e+00      inf output",
]


def test_report_climbing_to_the_fp16_limit_then_inf_is_fp16_overflow(tmp_path):
    top = analyze_console(tmp_path, MT5_REPORT)[0][0]
    assert (top.id, top.severity) == ("fp16-overflow", Severity.HIGH)
    assert top.causes[0].cause.id == "range_exceeded"
    # The header, the first row at the peak (DenseReluDense.wo's output) and the inf row are quoted.
    assert [e.line for e in top.evidence] == [1, 16, 22]
    assert top.facts["abs_max"] == 6.27e4


def test_report_cut_before_its_inf_row_is_no_fp16_overflow(tmp_path):
    assert "fp16-overflow" not in [f.id for f in analyze_console(tmp_path, MT5_REPORT[:-1])[0]]


def test_report_whose_values_exceed_the_fp16_range_is_no_fp16_overflow(tmp_path):
    # A finite abs max above 65504 cannot be a float16 tensor: the inf that follows is some other precision's.
    rows = [line.replace("6.27e+04", "7.27e+05") for line in MT5_REPORT]
    assert "fp16-overflow" not in [f.id for f in analyze_console(tmp_path, rows)[0]]

"""fp16-overflow on real line shapes: a scale halving to (or already below) 1 is a collapse, even as bare
apex skip lines; start-up calibration and a single routine overflow note at a stable scale stay quiet."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

APEX = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {}"


def run_of(tmp_path: Path, text: str) -> Analysis:
    return analyze(Context(ingest(write_run(tmp_path, {"train.log": text}))))


def medium_plus(a: Analysis) -> set[str]:
    return {f.id for f in a.findings if f.severity >= Severity.MEDIUM}


def test_apex_scale_halving_steadily_below_one_is_a_collapse(tmp_path):
    # apex amp, bare skip lines only: 32768 -> 0.5, every step skipped
    text = "\n".join(APEX.format(float(2 ** k)) for k in range(15, -2, -1)) + "\n"
    assert "fp16-overflow" in medium_plus(run_of(tmp_path, text))


def test_apex_scale_already_near_zero_in_scientific_notation_is_a_collapse(tmp_path):
    scales = ["8.165126103939127e-202", "4.082563051969564e-202", "2.041281525984782e-202", "1.020640762992391e-202",
              "5.103203814961955e-203", "2.5516019074809773e-203"]
    text = "\n".join(APEX.format(s) for s in scales) + "\n"
    assert "fp16-overflow" in medium_plus(run_of(tmp_path, text))


def test_single_apex_skip_line_below_one_is_a_collapse(tmp_path):
    assert "fp16-overflow" in medium_plus(run_of(tmp_path, APEX.format("0.0078125") + "\n"))


def test_apex_startup_calibration_then_stable_stays_quiet(tmp_path):
    # near miss: three start-up overflows 1024 -> 256, nothing after
    text = "\n".join(APEX.format(s) for s in ("1024.0", "512.0", "256.0")) + "\n"
    assert "fp16-overflow" not in medium_plus(run_of(tmp_path, text))


def test_long_startup_calibration_above_one_stays_quiet(tmp_path):
    # near miss: a big initial scale calibrated down 16 halvings, but never to the floor
    text = "\n".join(APEX.format(float(2 ** k)) for k in range(31, 15, -1)) + "\n"
    assert "fp16-overflow" not in medium_plus(run_of(tmp_path, text))


FAIRSEQ_TRAIN = ("2020-03-25 {t} | INFO | train | epoch 009:     {i} / 367 loss=4.226, nll_loss=2.588, ppl=6.01, wps=26975.6, "
                 "ups=0.07, wpb=403516, bsz=14222.1, num_updates={u}, lr=0.00075225, gnorm=0.314, clip=0, oom=0, "
                 "loss_scale={s}, train_wall=1361, wall=45722")
FAIRSEQ_NOTE = "2020-03-25 {t} | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: {s}"


def test_one_fairseq_overflow_note_at_a_stable_scale_of_one_is_routine(tmp_path):
    # near miss: loss_scale 1 before and after a single overflow note
    text = "\n".join([
        FAIRSEQ_TRAIN.format(t="06:40:00", i=50, u=2960, s=1),
        FAIRSEQ_NOTE.format(t="06:55:07", s="1.0"),
        FAIRSEQ_TRAIN.format(t="06:55:07", i=99, u=3009, s=1),
    ]) + "\n"
    assert "fp16-overflow" not in {f.id for f in run_of(tmp_path, text).findings if f.severity > Severity.LOW}


def test_fairseq_overflow_notes_repeating_at_the_floor_are_a_collapse(tmp_path):
    lines = []
    for k in range(6):
        lines.append(FAIRSEQ_NOTE.format(t=f"06:5{k}:07", s="1.0"))
        lines.append(FAIRSEQ_TRAIN.format(t=f"06:5{k}:08", i=99 + k, u=3009 + k, s=1))
    assert "fp16-overflow" in medium_plus(run_of(tmp_path, "\n".join(lines) + "\n"))

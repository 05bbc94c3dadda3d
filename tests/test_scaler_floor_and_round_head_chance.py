"""fp16-overflow from icefall's grad-scale warnings and old Megatron's colon-less `loss scale`; loss-stagnation at
ln(K) of a round head size (SwAV's 3000 prototypes, lightly's 512) late in a run, quiet at the start and when noisy."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.conftest import ROOT
from tests.helpers import write_run

INCIDENTS = ROOT / "tests" / "recordings" / "incidents"


def run_of(tmp_path: Path, text: str) -> Analysis:
    return analyze(Context(ingest(write_run(tmp_path, {"train.log": text}))))


def top(a: Analysis) -> str | None:
    problems = [f for f in a.findings if f.severity > Severity.INFO]
    return problems[0].id if problems else None


def medium_plus(a: Analysis) -> set[str]:
    return {f.id for f in a.findings if f.severity >= Severity.MEDIUM}


def test_icefall_grad_scale_warnings_alone_are_a_scaler_collapse(tmp_path):
    # k2-fsa/icefall#1463 without its error.txt: the ranks' warnings before the paste is cut.
    text = (INCIDENTS / "icefall_1463_zipformer_large_grad_scale_too_small" / "console.log").read_text(encoding="utf-8")
    a = run_of(tmp_path, text)
    assert top(a) == "fp16-overflow"
    f = next(f for f in a.findings if f.id == "fp16-overflow")
    assert any("Grad scale is small" in (e.text or "") for e in f.evidence)


OLD_MEGATRON = " iteration {:8d}/    3000 | elapsed time per iteration (ms): 11052.7 | learning rate 9.517E-06 | lm loss {} | loss scale {} |"


def test_old_megatron_scale_falling_below_one_is_a_collapse(tmp_path):
    # THUDM/Chinese-Transformer-XL#7: 64 -> 8 -> 4 -> 0.1 with an `lm loss NAN` interval; the overflow leads the NaN.
    text = (INCIDENTS / "chinese_transformer_xl_7_finetune_fp16_loss_scale_collapse" / "console.log").read_text(encoding="utf-8")
    a = run_of(tmp_path, text)
    ids = [f.id for f in a.findings if f.severity > Severity.INFO]
    assert ids[:2] == ["fp16-overflow", "nan-loss"]


def test_old_megatron_stable_scale_stays_quiet(tmp_path):
    # near miss: the same line shape with a healthy dynamic scale (2**15, one halving and back) and a falling loss.
    rows = [(100, "6.758929E+00", "32768.0"), (200, "6.286667E+00", "32768.0"), (300, "5.763325E+00", "16384.0"),
            (400, "5.193296E+00", "32768.0"), (500, "4.792100E+00", "32768.0"), (600, "4.454510E+00", "32768.0")]
    a = run_of(tmp_path, "\n".join(OLD_MEGATRON.format(i, loss, s) for i, loss, s in rows) + "\n")
    assert medium_plus(a) == set()


def test_swav_loss_at_ln_3000_on_every_iteration_of_epoch_163_is_stagnation(tmp_path):
    text = (INCIDENTS / "swav_12_loss_stuck_at_ln3000_uniform_prototypes" / "console.log").read_text(encoding="utf-8")
    a = run_of(tmp_path, text)
    assert top(a) == "loss-stagnation"
    f = next(f for f in a.findings if f.id == "loss-stagnation")
    assert f.facts["classes"] == 3000


def test_swav_first_epoch_at_ln_3000_stays_quiet(tmp_path):
    # near miss: every SwAV run starts at the entropy of its prototypes; the same lines in epoch 0 are the start.
    text = (INCIDENTS / "swav_12_loss_stuck_at_ln3000_uniform_prototypes" / "console.log").read_text(encoding="utf-8")
    a = run_of(tmp_path, text.replace("Epoch: [163]", "Epoch: [0]").replace("Starting epoch 163", "Starting epoch 0"))
    assert "loss-stagnation" not in medium_plus(a)


LIGHTLY = ["epoch: 00, loss: 6.28696", "epoch: 01, loss: 6.23867", "epoch: 02, loss: 6.23839", "epoch: 03, loss: 6.23837",
           "epoch: 04, loss: 6.23836", "epoch: 05, loss: 6.23836"]


def test_lightly_swav_epoch_losses_at_ln_512_are_stagnation(tmp_path):
    # lightly-ai/lightly#1521: lightly's SwAV example (512 prototypes) prints one average per epoch; 6.23836 = ln(512).
    a = run_of(tmp_path, "\n".join(LIGHTLY) + "\n")
    assert top(a) == "loss-stagnation"
    assert next(f for f in a.findings if f.id == "loss-stagnation").facts["classes"] == 512


def test_epoch_losses_near_a_round_count_but_moving_stay_quiet(tmp_path):
    # near miss: the same shape with a loss that still moves by 0.1% between epochs (a slow healthy descent near ln 512).
    values = ["6.2490", "6.2441", "6.2402", "6.2371", "6.2349", "6.2330"]
    a = run_of(tmp_path, "\n".join(f"epoch: {i:02d}, loss: {v}" for i, v in enumerate(values)) + "\n")
    assert "loss-stagnation" not in medium_plus(a)

"""An LR printed as exactly zero on every logged point while the loss moves is lr-schedule-anomaly; an LR rounded to
zero by a 2-5 decimal print format (`lr:0.0000`) is no value at all.

Shapes: ViTPose_pytorch `Epoch [000/210] | Loss 0.0029 | LR 0.00000000 | Step: ...` (jaehyunnn/ViTPose_pytorch#9,
layer decay applied every step), YOLOv4-pytorch `lr:0.0000` late in a decay (argusswift/YOLOv4-pytorch#91, answered
"print with {:06f}": healthy), Megatron `learning rate: 0.000E+00`, bros `lr: 0.0` (Python's repr of an exact zero).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import frame, ingest_text, write_run

BAR = "| Step: 100%|##########| 1827/1827 [03:38<00:00,  8.38it/s]"


def vitpose(lrs: list[str], losses: list[str]) -> str:
    return "".join(f"> Epoch [{i:03d}/210] | Loss {loss} | LR {lr} {BAR}\n" for i, (lr, loss) in enumerate(zip(lrs, losses, strict=True)))


def problems(tmp: Path, text: str) -> list:
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f for f in a.findings if f.severity.name.lower() != "info"]


def lrs(tmp: Path, text: str) -> list[float]:
    return frame(ingest_text(tmp, text), "metrics").filter(pl.col("name") == "lr")["value"].to_list()


def test_lr_zero_at_every_point_while_the_loss_moves(tmp_path):
    found = problems(tmp_path, vitpose(["0.00000000"] * 3, ["0.0029", "0.0037", "0.0031"]))
    assert found and found[0].playbook.id == "lr-schedule-anomaly" and found[0].severity.name == "MEDIUM"
    assert "reads 0 at all 3 logged points" in found[0].summary
    assert [e.line for e in found[0].evidence] == [1, 2]


def test_rounded_zero_lr_is_not_zero(tmp_path):
    # Four decimals: the decayed LR (below 5e-5) prints as 0.0000; nothing says it is 0.
    text = vitpose(["0.0000"] * 4, ["0.0029", "0.0037", "0.0031", "0.0027"])
    assert lrs(tmp_path / "a", text) == []
    assert problems(tmp_path / "b", text) == []
    # The YOLOv4-pytorch line as printed, at three steps with a moving loss.
    yolo = "".join(f"[2020-11-17 12:49:56,134]-[train.py line:223]:  === Epoch:[ 26/50],step:[{s}/44640],img_size:[416],"
                   f"total_loss:{t}|loss_ciou:11.0461|loss_conf:15.9487|loss_cls:23.3814|lr:0.0000 \n"
                   for s, t in ((42640, "50.3763"), (42650, "49.1022"), (42660, "51.0170")))
    assert lrs(tmp_path / "d", yolo) == []
    assert problems(tmp_path / "c", yolo) == []


def test_exact_zero_forms_are_read_as_zero(tmp_path):
    assert lrs(tmp_path / "a", "[epoch: 5/50] || train_loss: 16.82515 || lr: 0.0 || time: 197.6 secs.\n") == [0.0]
    assert lrs(tmp_path / "b", vitpose(["0.00000000"], ["0.0029"])) == [0.0]
    assert lrs(tmp_path / "c", vitpose(["0.0001"], ["0.0029"])) == [0.0001]


def test_near_misses_stay_quiet(tmp_path):
    # One point; a loss that does not move (loss-stagnation's lr_zero over a long run); an LR that is not zero.
    assert problems(tmp_path / "a", vitpose(["0.00000000"], ["0.0029"])) == []
    assert problems(tmp_path / "b", vitpose(["0.00000000"] * 3, ["0.0030"] * 3)) == []
    assert problems(tmp_path / "c", vitpose(["0.00010000"] * 3, ["0.0029", "0.0037", "0.0031"])) == []

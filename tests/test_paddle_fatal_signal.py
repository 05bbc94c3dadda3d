"""Paddle's fatal-signal block: a segmentation fault with no frame of Paddle's own points at the environment's native
libraries (driver-runtime-mismatch, low confidence); one with Paddle's frames, or cut before its summary, does not."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.model import Severity
from tests.helpers import analyze_console

HEAD = ["--------------------------------------", "C++ Traceback (most recent call last):",
        "--------------------------------------"]
SUMMARY = ["----------------------", "Error Message Summary:", "----------------------",
           "FatalError: `Segmentation fault` is detected by the operating system.",
           '  [TimeInfo: *** Aborted at 1702453676 (unix time) try "date -d @1702453676" if you are using GNU date ***]',
           "  [SignalInfo: *** SIGSEGV (@0x0) received by PID 35373 (TID 0x7f0a2f217700) from PID 0 ***]"]
# PaddlePaddle/Paddle#59983 (PaddleSeg training, paddlepaddle-gpu post102 on CUDA 10.2): the shell's report after it.
EXTERNAL = HEAD + ["No stack trace in paddle, may be caused by external reasons.", ""] + SUMMARY + ["", "Segmentation fault (core dumped)"]
# PaddlePaddle/PaddleSeg#2506: a UserWarning above, no blank line inside the block.
EXTERNAL_WARNED = (["/opt/conda/envs/python35-paddle120-env/lib/python3.7/site-packages/paddle/nn/layer/norm.py:654: UserWarning: "
                    "When training, we now always track global mean and variance.",
                    '  "When training, we now always track global mean and variance.")']
                   + HEAD + ["No stack trace in paddle, may be caused by external reasons."] + SUMMARY)
# PaddlePaddle/PaddleX#518: the fault inside Paddle's own executor (its frames listed), with the same summary.
OWN_FRAMES = HEAD + [
    "0   std::thread::_State_impl<std::thread::_Invoker<std::tuple<ThreadPool::ThreadPool(unsigned long)::{lambda()#1}> > >::_M_run()",
    "4   paddle::framework::details::OpHandleBase::Run(bool)",
    "5   paddle::framework::details::ComputationOpHandle::RunImpl()",
    "6   paddle::framework::OperatorBase::Run(paddle::framework::Scope const&, paddle::platform::Place const&)",
    "",
] + SUMMARY


def problems(tmp_path: Path, lines: list[str]) -> list:
    return analyze_console(tmp_path, lines)[0]


def test_segfault_outside_paddle_points_at_the_build(tmp_path):
    for i, lines in enumerate((EXTERNAL, EXTERNAL_WARNED)):
        found = problems(tmp_path / str(i), lines)
        assert [f.id for f in found] == ["driver-runtime-mismatch"], lines
        top = found[0]
        assert (top.causes[0].cause.id, top.confidence, top.severity) == ("framework_build_mismatch", 0.4, Severity.MEDIUM)
        quoted = [e.text for e in top.evidence]
        assert quoted[0].startswith("No stack trace in paddle") and quoted[1].startswith("FatalError: `Segmentation fault`")


def test_segfault_inside_paddle_or_cut_block_is_not_the_build(tmp_path):
    assert [f.id for f in problems(tmp_path / "own", OWN_FRAMES)] == ["unclassified-failure"]
    # The paste stops before the summary: no signal is shown, so nothing proves a crash at all.
    cut = HEAD + ["No stack trace in paddle, may be caused by external reasons."]
    assert "driver-runtime-mismatch" not in [f.id for f in problems(tmp_path / "cut", cut)]

"""No failed run reported clean: failure signals, unclassified-failure and its lexicon, hang evidence, new message forms.

The new message forms are signature cases kept as data (tests/cases/signatures/, run by test_signature_cases.py);
the tests here write real pasted lines into a run folder and analyse it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from forensics.playbooks.lexicon import Lexicon, shipped, tokens

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.conftest import ROOT
from tests.helpers import write_run


def _analyse(tmp_path: Path, text: str, name: str = "train.log"):
    return analyze(Context(ingest(write_run(tmp_path, {name: text}))))


def _problems(a) -> list:
    return [f for f in a.findings if f.severity > Severity.INFO]


# A KeyError in the program's own code (k2kobayashi/crank#26): no playbook's pattern, so unclassified-failure.
KEYERROR = """Traceback (most recent call last):
  File "/content/crank/crank/bin/train.py", line 179, in <module>
    main()
  File "/content/crank/crank/bin/train.py", line 82, in get_model
    if conf["speaker_adversarial"]:
KeyError: 'speaker_adversarial'
"""


def test_an_uncaught_exception_of_the_program_is_never_reported_clean(tmp_path):
    a = _analyse(tmp_path, KEYERROR)
    top = _problems(a)[0]
    assert top.id == "unclassified-failure" and top.severity == Severity.HIGH
    assert "KeyError: 'speaker_adversarial'" in top.summary
    assert top.evidence[0].line == 1
    # The lexicon's vote: the program's own bug leads, and it says which words voted.
    assert top.causes[0].cause.id == "unclassified_failure"
    assert "keyerror" in top.facts["votes"]["unclassified-failure"]["words"]


def test_a_launcher_report_of_a_nonzero_exit_is_a_failure_and_names_the_first_failing_rank(tmp_path):
    # torchrun's report of a child's exit code 1, nothing else in the paste (xzz777/SCTNet#47).
    report = (ROOT / "tests" / "recordings" / "issues" / "sctnet_47_old_report.log").read_text(encoding="utf-8")
    top = _problems(_analyse(tmp_path, report))[0]
    assert top.id == "unclassified-failure"
    assert top.onset.rank == 0 and "rank 0" in top.summary


@pytest.mark.parametrize("ending", [
    # Ctrl-C while computing: a healthy run stopped by its user.
    "Traceback (most recent call last):\n  File \"train.py\", line 54, in main\n    out = model(x)\nKeyboardInterrupt\n",
    # SystemExit and warnings raised as exceptions end nothing.
    "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    sys.exit(0)\nSystemExit: 0\n",
    # An exception of a teardown hook after the work (a wrapper's terminate()).
    "Traceback (most recent call last):\n  File \"wrapper.py\", line 318, in terminate\n    raise ValueError(\"Timeout reached\")\nValueError: Timeout reached\n",
])
def test_healthy_endings_stay_quiet(tmp_path, ending):
    progress = "".join(f"2024-05-01 10:00:{i:02d},000 - INFO - train - step {i} | loss {1.0 / i:.4f}\n" for i in range(1, 20))
    a = _analyse(tmp_path, progress + ending)
    assert not _problems(a), [(f.id, f.summary) for f in a.findings]


def test_a_caught_exception_followed_by_training_is_no_failure(tmp_path):
    head = "".join(f"2024-05-01 10:00:{i:02d},000 - INFO - train - step {i} | loss 0.5\n" for i in range(1, 10))
    tail = "".join(f"2024-05-01 10:01:{i:02d},000 - INFO - train - step {i} | loss 0.5\n" for i in range(10, 20))
    a = _analyse(tmp_path, head + KEYERROR + tail)
    assert "unclassified-failure" not in {f.id for f in _problems(a)}


def test_a_specific_playbook_claims_the_failure(tmp_path):
    # CNTK's OOM (microsoft/CNTK#2607 form) then the Python traceback it raised: cuda-oom, not unclassified.
    text = ("CUDA failure 2: out of memory ; GPU=0 ; hostname=L-1 ; expr=cudaMalloc((void**) &deviceBufferPtr, sizeof(AllocatedElemType) * numElements)\n"
            "Traceback (most recent call last):\n  File \"run_faster_rcnn.py\", line 35, in <module>\n    trained_model = train_faster_rcnn(cfg)\n"
            "RuntimeError: CUDA failure 2: out of memory ; GPU=0 ; hostname=L-1 ; expr=cudaMalloc((void**) &deviceBufferPtr, sizeof(AllocatedElemType) * numElements)\n")
    ids = [f.id for f in _problems(_analyse(tmp_path, text))]
    assert ids[0] == "cuda-oom" and "unclassified-failure" not in ids


def test_a_stop_from_outside_is_no_failure(tmp_path):
    # A Slurm requeue (facebookincubator/submitit#1708): the tasks' exit code 1 follows the cancellation.
    text = ("slurmstepd: error: *** JOB 608 ON node1 CANCELLED AT 2022-08-12T02:06:12 DUE TO JOB REQUEUE ***\n"
            "srun: error: node1: tasks 2-3: Exited with exit code 1\n")
    assert "unclassified-failure" not in {f.id for f in _problems(_analyse(tmp_path, text))}


def test_a_shell_killed_report_is_the_unproven_host_memory_finding(tmp_path):
    # jaewon-lee-b/lte#22: `config loaded.` then a bare `Killed`.
    top = _problems(_analyse(tmp_path, "config loaded.\nKilled\n"))[0]
    assert top.id == "host-memory-exhaustion" and top.confidence < 0.5
    assert "not proven" in top.summary


def test_a_ctrl_c_inside_a_blocking_wait_is_a_low_hang_finding_quoting_the_frame(tmp_path):
    text = ("Iteration 200: train = 1.3745\n^CTraceback (most recent call last):\n......\n"
            "  File \"/opt/lib/python3.6/site-packages/torch/utils/data/dataloader.py\", line 841, in _next_data\n"
            "    idx, data = self._get_data()\n"
            "  File \"/opt/lib/python3.6/site-packages/torch/utils/data/dataloader.py\", line 808, in _get_data\n"
            "    success, data = self._try_get_data()\n")
    top = _problems(_analyse(tmp_path, text))[0]
    assert top.id == "silent-hang" and top.severity == Severity.LOW
    assert "_get_data (dataloader.py:808)" in top.summary
    assert top.causes[0].cause.id == "stuck_dataloader"


def test_a_faulthandler_timeout_dump_is_a_hang_quoting_the_stuck_frame(tmp_path):
    # Tribler/tribler#6606: pytest's faulthandler_timeout dump of every thread.
    text = ("Timeout (0:01:10)!\nThread 0x00007f71fe57d640 (most recent call first):\n"
            "  File \"/opt/python3.8/threading.py\", line 302 in wait\n"
            "  File \"/home/runner/sentry_sdk/_queue.py\", line 240 in get\n")
    top = _problems(_analyse(tmp_path, text))[0]
    assert top.id == "silent-hang"
    assert "stuck in wait (threading.py:302)" in top.summary
    assert (top.evidence[0].file, top.evidence[0].line) == ("train.log", 3)


def test_a_crash_dump_of_faulthandler_is_no_hang(tmp_path):
    text = ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007cfe4bd05080 (most recent call first):\n"
            "  File \"/opt/train.py\", line 5 in step\n")
    assert "silent-hang" not in {f.id for f in _problems(_analyse(tmp_path, text))}


def test_watchdog_frames_without_the_sentence_are_a_collective_timeout(tmp_path):
    # hiyouga/LlamaFactory#8261-shaped dump with the `Watchdog caught …` sentence cut from the paste.
    text = ("Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632 (most recent call first):\n"
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7b99599e31b6 in /opt/torch/lib/libc10.so)\n"
            "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x2b4 (0x7b9906ffec74 in /opt/torch/lib/libtorch_cuda.so)\n"
            "frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x890 (0x7b99070007d0 in /opt/torch/lib/libtorch_cuda.so)\n")
    assert _problems(_analyse(tmp_path, text))[0].id == "nccl-timeout"


def test_lexicon_votes_are_deterministic_and_explained():
    lex = Lexicon(priors={"a": -1.0, "b": -1.0}, weights={"a": {"memory": 2.0}, "b": {"timeout": 1.0, "nccl": 1.5}})
    votes = lex.rank("NCCL watchdog timeout after 600000 ms")
    assert [v.candidate for v in votes] == ["b", "a"]
    assert votes[0].words == (("nccl", 1.5), ("timeout", 1.0))
    assert abs(sum(v.likelihood for v in votes) - 1.0) < 0.01
    # CamelCase exceptions vote with their words; hex addresses and stop words do not.
    assert {"resourceexhaustederror", "resource", "exhausted"} <= tokens("ResourceExhaustedError at 0x7f3a2b1c4d5e")
    assert "0x7f3a2b1c4d5e" not in tokens("at 0x7f3a2b1c4d5e") and "traceback" not in tokens("Traceback")


def test_shipped_lexicon_is_learned_from_several_threads():
    doc = json.loads((ROOT / "playbooks" / "failure_lexicon.json").read_text(encoding="utf-8"))
    assert doc["built_by"] == "bench/build_failure_lexicon.py" and doc["min_threads"] >= 2
    # Every voting word comes from a candidate with at least that many threads.
    assert all(c["threads"] >= doc["min_threads"] for c in doc["candidates"].values() if c["words"])
    votes = shipped().rank("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert votes[0].candidate == "cuda-oom"

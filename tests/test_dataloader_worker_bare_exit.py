"""A DataLoader worker found dead with no reason printed is host memory (unproven, medium); a line naming the
worker's own end decides otherwise."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def problems(tmp: Path, text: str) -> list:
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


# https://github.com/facebookresearch/detectron2/issues/384 (docker, fixed by --shm-size) and
# https://github.com/NUS-HPC-AI-Lab/VideoSys/issues/97 (host RAM growth until killed): the pid(s) line alone.
BARE = '''Traceback (most recent call last):
  File "/root/miniconda3/envs/opendit/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1285, in _get_data
    success, data = self._try_get_data()
  File "/root/miniconda3/envs/opendit/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1146, in _try_get_data
    raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e
RuntimeError: DataLoader worker (pid(s) 2365846) exited unexpectedly
'''


def test_bare_exit_is_unproven_host_memory(tmp_path):
    found = problems(tmp_path, BARE)
    assert found[0].id == "host-memory-exhaustion"
    assert found[0].severity == Severity.MEDIUM and found[0].confidence < 0.5
    assert {c.cause.id for c in found[0].causes[:2]} == {"small_shm", "too_many_workers"}


def test_exit_code_form_is_the_workers_own_error(tmp_path):
    # https://github.com/YuanGongND/ast/issues/112: the worker exited by itself (a Python error in it).
    text = ("RuntimeError: DataLoader worker (pid 39424) exited unexpectedly with exit code 1. Details are lost due to "
            "multiprocessing. Rerunning with num_workers=0 may give better error trace.\n")
    assert "host-memory-exhaustion" not in {f.id for f in problems(tmp_path, text)}


def test_a_segfault_named_before_it_decides(tmp_path):
    text = ("ERROR: Unexpected segmentation fault encountered in worker.\n"
            "RuntimeError: DataLoader worker (pid(s) 1234) exited unexpectedly\n")
    assert "host-memory-exhaustion" not in {f.id for f in problems(tmp_path, text)}


def test_the_workers_own_exception_decides(tmp_path):
    text = ("RuntimeError: DataLoader worker (pid(s) 1234) exited unexpectedly\n"
            "KeyError: Caught KeyError in DataLoader worker process 0.\n"
            "Original Traceback (most recent call last):\n"
            '  File "/usr/lib/python3/site-packages/torch/utils/data/_utils/worker.py", line 287, in _worker_loop\n'
            "    data = fetcher.fetch(index)\n"
            "KeyError: 'label'\n")
    assert "host-memory-exhaustion" not in {f.id for f in problems(tmp_path, text)}


def test_killed_by_signal_keeps_its_proven_finding(tmp_path):
    text = ("RuntimeError: DataLoader worker (pid 1224) is killed by signal: Killed.\n"
            "RuntimeError: DataLoader worker (pid(s) 1224) exited unexpectedly\n")
    top = problems(tmp_path, text)[0]
    assert top.id == "host-memory-exhaustion" and top.confidence >= 0.7

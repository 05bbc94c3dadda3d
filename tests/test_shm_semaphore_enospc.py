"""ENOSPC where nothing is written to disk: multiprocessing semaphores (SemLock) and /dev/shm are shared memory, so
`[Errno 28] No space left on device` under their frames is a full /dev/shm (host-memory-exhaustion), while the same
error under torch.save frames stays a full checkpoint disk."""

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


# https://github.com/python/cpython/issues/93253: reproduced with `docker run --shm-size="1m"`.
SEMLOCK = '''Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "<string>", line 1, in <listcomp>
  File "/usr/local/lib/python3.8/multiprocessing/context.py", line 141, in Array
    return Array(typecode_or_type, size_or_initializer, lock=lock,
  File "/usr/local/lib/python3.8/multiprocessing/sharedctypes.py", line 93, in Array
    lock = ctx.RLock()
  File "/usr/local/lib/python3.8/multiprocessing/context.py", line 73, in RLock
    return RLock(ctx=self.get_context())
  File "/usr/local/lib/python3.8/multiprocessing/synchronize.py", line 187, in __init__
    SemLock.__init__(self, RECURSIVE_MUTEX, 1, 1, ctx=ctx)
  File "/usr/local/lib/python3.8/multiprocessing/synchronize.py", line 57, in __init__
    sl = self._semlock = _multiprocessing.SemLock(
OSError: [Errno 28] No space left on device
'''
# https://github.com/babysor/MockingBird/issues/774: torch.save on a full disk (near miss: a checkpoint, not shm).
TORCH_SAVE = '''Traceback (most recent call last):
  File "E:\\ai\\MockingBird\\venv\\lib\\site-packages\\torch\\serialization.py", line 379, in save
    _save(obj, opened_zipfile, pickle_module, pickle_protocol)
  File "E:\\ai\\MockingBird\\venv\\lib\\site-packages\\torch\\serialization.py", line 499, in _save
    zip_file.write_record(name, storage.data_ptr(), num_bytes)
OSError: [Errno 28] No space left on device
'''
# https://github.com/Plachtaa/VITS-fast-fine-tuning/issues/397: joblib's start-up probe warns and falls back to serial
# mode; alone it is no failure (near miss).
JOBLIB_PROBE = '''/root/miniconda3/envs/vits/lib/python3.8/site-packages/joblib/_multiprocessing_helpers.py:46: UserWarning: [Errno 28] No space left on device.  joblib will operate in serial mode
  warnings.warn('%s.  joblib will operate in serial mode' % (e,))
'''


def test_semlock_enospc_is_a_full_dev_shm(tmp_path: Path):
    found = problems(tmp_path, SEMLOCK)
    assert found and found[0].id == "host-memory-exhaustion"
    assert found[0].causes[0].cause.id == "small_shm"
    assert "checkpoint-failure" not in {f.id for f in found}
    assert any(e.line == 14 for e in found[0].evidence)


def test_torch_save_enospc_stays_a_checkpoint_disk(tmp_path: Path):
    found = problems(tmp_path, TORCH_SAVE)
    assert found and found[0].id == "checkpoint-failure"
    assert "host-memory-exhaustion" not in {f.id for f in found}


def test_joblib_probe_warning_is_not_shm_exhaustion(tmp_path: Path):
    assert "host-memory-exhaustion" not in {f.id for f in problems(tmp_path, JOBLIB_PROBE)}

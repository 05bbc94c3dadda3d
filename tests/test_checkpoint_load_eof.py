"""A checkpoint cut short on load (torch's `unexpected EOF`, pickle's `Ran out of input` under torch.load) and a full
disk under Windows paths are checkpoint-failure; the same EOFError of a Windows DataLoader worker is not."""

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


# https://github.com/YuvalNirkin/fsgan/issues/18 (legacy archive, PyTorch 1.0)
UNEXPECTED_EOF = '''Traceback (most recent call last):
  File "/home/hsl/Project/Face-swap/fsgan/fsgan/utils/utils.py", line 166, in load_model
    checkpoint = torch.load(model_path, map_location=lambda storage, loc: storage)
  File "/home/hsl/anaconda3/lib/python3.6/site-packages/torch/serialization.py", line 368, in load
    return _load(f, map_location, pickle_module)
  File "/home/hsl/anaconda3/lib/python3.6/site-packages/torch/serialization.py", line 549, in _load
    deserialized_objects[key]._set_from_file(f, offset, f_should_read_directly)
RuntimeError: unexpected EOF, expected 1880922 more bytes. The file might be corrupted.
'''
# https://github.com/pytorch/pytorch/issues/27043 (an empty checkpoint file)
EMPTY_FILE = '''Traceback (most recent call last):
  File "/home/zgz/process.py", line 632, in load_state_dict
    state_dict = torch.load(trained_model_file, map_location='cpu')
  File "/opt/anaconda3/lib/python3.7/site-packages/torch/serialization.py", line 386, in load
    return _load(f, map_location, pickle_module, **pickle_load_args)
  File "/opt/anaconda3/lib/python3.7/site-packages/torch/serialization.py", line 563, in _load
    magic_number = pickle_module.load(f, **pickle_load_args)
EOFError: Ran out of input
'''
# https://github.com/jfzhang95/pytorch-deeplab-xception/issues/220: a spawned DataLoader worker on Windows.
SPAWN_EOF = '''Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "E:\\ProgramData\\Anaconda3\\envs\\yolov5-master\\lib\\multiprocessing\\spawn.py", line 105, in spawn_main
    exitcode = _main(fd)
  File "E:\\ProgramData\\Anaconda3\\envs\\yolov5-master\\lib\\multiprocessing\\spawn.py", line 115, in _main
    self = reduction.pickle.load(from_parent)
EOFError: Ran out of input
'''
# https://github.com/babysor/MockingBird/issues/774: torch.save on Windows, the traceback glued after a progress bar.
WINDOWS_ENOSPC = '''{| Epoch: 55/167 (996/1926) | Loss: 0.2907 | 0.93 steps/s | Step: 425k | }Traceback (most recent call last):
  File "E:\\ai\\MockingBird\\venv\\lib\\site-packages\\torch\\serialization.py", line 379, in save
    _save(obj, opened_zipfile, pickle_module, pickle_protocol)
  File "E:\\ai\\MockingBird\\venv\\lib\\site-packages\\torch\\serialization.py", line 499, in _save
    zip_file.write_record(name, storage.data_ptr(), num_bytes)
OSError: [Errno 28] No space left on device
'''
# A full disk while writing a CSV log: no save or load of a checkpoint (near miss of the Windows path rule).
WINDOWS_ENOSPC_LOG = '''Traceback (most recent call last):
  File "E:\\work\\train.py", line 80, in <module>
    writer.writerow(row)
OSError: [Errno 28] No space left on device
'''


def test_legacy_archive_cut_short(tmp_path):
    top = problems(tmp_path, UNEXPECTED_EOF)[0]
    assert top.id == "checkpoint-failure" and top.causes[0].cause.id == "interrupted_write"


def test_empty_checkpoint_under_torch_load(tmp_path):
    top = problems(tmp_path, EMPTY_FILE)[0]
    assert top.id == "checkpoint-failure" and top.causes[0].cause.id == "interrupted_write"


def test_spawned_worker_eof_is_not_a_checkpoint(tmp_path):
    assert "checkpoint-failure" not in {f.id for f in problems(tmp_path, SPAWN_EOF)}


def test_windows_serialization_frames_make_enospc_a_checkpoint_save(tmp_path):
    top = problems(tmp_path, WINDOWS_ENOSPC)[0]
    assert top.id == "checkpoint-failure" and top.causes[0].cause.id == "disk_full"


def test_windows_enospc_outside_a_save_is_not_a_checkpoint(tmp_path):
    assert "checkpoint-failure" not in {f.id for f in problems(tmp_path, WINDOWS_ENOSPC_LOG)}

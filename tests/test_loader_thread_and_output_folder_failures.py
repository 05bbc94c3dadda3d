"""A DataLoader pin-memory thread's traceback ends the run (unclassified-failure); a PermissionError creating the run's
output folder is checkpoint-failure: real positives and near misses (a thread error training outlived, caches, dataset
folders; other threads' tracebacks: tests/test_unfit_samples_and_background_thread_errors.py)."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def _problems(tmp_path: Path, text: str) -> list:
    a = analyze(Context(ingest(write_run(tmp_path, {"train.log": text}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


def _ids(tmp_path: Path, text: str) -> list[str]:
    return [f.id for f in _problems(tmp_path, text)]


# Abe404/root_painter#168 (Python 3.10: the thread is named after its target), cut at the last whole line of the paste.
PIN_THREAD_310 = """Exception in thread Thread-272 (_pin_memory_loop):
Traceback (most recent call last):
  File "/usr/lib/python3.10/threading.py", line 1016, in _bootstrap_inner
    self.run()
  File "/usr/lib/python3.10/threading.py", line 953, in run
    self._target(*self._args, **self._kwargs)
  File "/home/sporring/.local/lib/python3.10/site-packages/torch/utils/data/_utils/pin_memory.py", line 49, in _pin_memory_loop
    do_one_step()
  File "/home/sporring/.local/lib/python3.10/site-packages/torch/utils/data/_utils/pin_memory.py", line 26, in do_one_step
    r = in_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
  File "/usr/lib/python3.10/multiprocessing/queues.py", line 122, in get
    return _ForkingPickler.loads(res)
  File "/home/sporring/.local/lib/python3.10/site-packages/torch/multiprocessing/reductions.py", line 305, in rebuild_storage_fd
    fd = df.detach()
  File "/usr/lib/python3.10/multiprocessing/resource_sharer.py", line 58, in detach
    return reduction.recv_handle(conn)
  File "/usr/lib/python3.10/multiprocessing/reduction.py", line 189, in recv_handle
    return recvfds(s, 1)[0]
"""
# AllenCell/cyto-dl#65 (Python 3.8: `Thread-570`, the loop named only by its frame, wrapped by the terminal).
PIN_THREAD_38 = """Exception in thread Thread-570:
Traceback (most recent call last):
  File "/usr/lib/python3.8/threading.py", line 932, in _bootstrap_inner
    self.run()
  File "/usr/lib/python3.8/threading.py", line 870, in run
    self._target(*self._args, **self._kwargs)
  File "/allen/aics/assay-dev/users/Filip/Projects/aics_im2im/venv/lib/python3.8/site-packages/torch/utils/data/_utils/pin_memory.py", line 49, in
_pin_memory_loop
    do_one_step()
  File "/allen/aics/assay-dev/users/Filip/Projects/aics_im2im/venv/lib/python3.8/site-packages/torch/utils/data/_utils/pin_memory.py", line 26, in do_one_step
    r = in_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
  File "/usr/lib/python3.8/multiprocessing/queues.py", line 116, in get
    return _ForkingPickler.loads(res)
  File "/allen/aics/assay-dev/users/Filip/Projects/aics_im2im/venv/lib/python3.8/site-packages/torch/multiprocessing/reductions.py", line 305, in
rebuild_storage_fd
    fd = df.detach()
  File "/usr/lib/python3.8/multiprocessing/resource_sharer.py", line 57, in detach
    with _resource_sharer.get_connection(self._id) as conn:
"""
# layumi/Person_reID_baseline_pytorch#365: the thread's traceback, then the main one the DataLoader raised for it.
PIN_THREAD_THEN_MAIN = """Exception in thread Thread-1:
Traceback (most recent call last):
  File "/home/chutao@1/anaconda3/envs/pytorch1.7/lib/python3.8/threading.py", line 932, in _bootstrap_inner
    self.run()
  File "/home/chutao@1/anaconda3/envs/pytorch1.7/lib/python3.8/threading.py", line 870, in run
    self._target(*self._args, **self._kwargs)
  File "/home/chutao@1/anaconda3/envs/pytorch1.7/lib/python3.8/site-packages/torch/utils/data/_utils/pin_memory.py", line 28, in _pin_memory_loop
    idx, data = r
ValueError: not enough values to unpack (expected 2, got 0)
Traceback (most recent call last):
  File "train.py", line 540, in <module>
    model = train_model(model, criterion, optimizer_ft, exp_lr_scheduler,
  File "/home/chutao@1/anaconda3/envs/pytorch1.7/lib/python3.8/site-packages/torch/utils/data/dataloader.py", line 1029, in _get_data
    raise RuntimeError('Pin memory thread exited unexpectedly')
RuntimeError: Pin memory thread exited unexpectedly
"""


def test_a_pin_memory_threads_traceback_is_a_failure_on_310_thread_names(tmp_path):
    problems = _problems(tmp_path, PIN_THREAD_310)
    assert [f.id for f in problems] == ["unclassified-failure"]
    assert problems[0].severity >= Severity.MEDIUM
    assert {e.line for e in problems[0].evidence} >= {2}


def test_a_pin_memory_threads_traceback_is_a_failure_named_by_its_frame(tmp_path):
    assert _ids(tmp_path, PIN_THREAD_38) == ["unclassified-failure"]


def test_the_main_traceback_the_loader_raises_still_counts(tmp_path):
    assert _ids(tmp_path, PIN_THREAD_THEN_MAIN) == ["unclassified-failure"]


def test_a_pin_memory_thread_error_that_training_outlived_is_quiet(tmp_path):
    # Near miss: epochs went on after the thread's traceback (its exception line, then more progress), so it ended nothing.
    thread_only = PIN_THREAD_THEN_MAIN.split("Traceback (most recent call last):\n  File \"train.py\"")[0]
    after = "".join(f"Epoch {e}: 100%|██████████| 500/500 [01:02<00:00,  8.01it/s, loss={1.5 - e / 100:.3f}]\n" for e in range(51, 55))
    assert _ids(tmp_path, thread_only + after) == []


# STVIR/pysot#53: the log folder made from the config at start.
POSIX_LOGS = """Traceback (most recent call last):
  File "../../tools/train.py", line 378, in <module>
    main()
  File "../../tools/train.py", line 327, in main
    os.makedirs(cfg.TRAIN.LOG_DIR)
  File "/home/public/anaconda3/lib/python3.6/os.py", line 220, in makedirs
    mkdir(name, mode)
PermissionError: [Errno 13] Permission denied: './logs'
"""
# matterport/Mask_RCNN#2054: model.train creating its log/checkpoint folder.
MRCNN_LOGS = """Training network heads
Traceback (most recent call last):
  File "samples/balloon/balloon.py", line 364, in <module>
    train(model)
  File "samples/balloon/balloon.py", line 199, in train
    layers='heads')
  File "/usr/local/lib/python3.7/site-packages/mask_rcnn-2.1-py3.7.egg/mrcnn/model.py", line 2336, in train
  File "/usr/local/lib/python3.7/os.py", line 211, in makedirs
    makedirs(head, exist_ok=exist_ok)
  File "/usr/local/lib/python3.7/os.py", line 221, in makedirs
    mkdir(name, mode)
PermissionError: [Errno 13] Permission denied: '/home/logs'
"""
# andabi/deep-voice-conversion#58 (as a plain traceback): the denied path is a parent ('/data'); the frames name the logdir.
LOGDIR_VARIABLE = """Traceback (most recent call last):
  File "train1.py", line 78, in <module>
    train(args, logdir=logdir_train1)
  File "train1.py", line 32, in train
    logger.set_logger_dir(logdir)
  File "/home/u/anaconda3_501/lib/python3.6/site-packages/tensorpack/utils/logger.py", line 133, in set_logger_dir
    mkdir_p(dirname)
  File "/home/u/anaconda3_501/lib/python3.6/site-packages/tensorpack/utils/fs.py", line 25, in mkdir_p
    os.makedirs(dirname)
  File "/home/u/anaconda3_501/lib/python3.6/os.py", line 210, in makedirs
    makedirs(head, mode, exist_ok)
  File "/home/u/anaconda3_501/lib/python3.6/os.py", line 220, in makedirs
    mkdir(name, mode)
PermissionError: [Errno 13] Permission denied: '/data'
"""


def test_a_denied_output_folder_creation_is_a_checkpoint_failure(tmp_path):
    for i, text in enumerate((POSIX_LOGS, MRCNN_LOGS, LOGDIR_VARIABLE)):
        problems = _problems(tmp_path / str(i), text)
        assert problems and problems[0].id == "checkpoint-failure", (i, [f.id for f in problems])
        assert problems[0].causes[0].cause.id == "not_writable"
        assert "output folder" in problems[0].summary


# huggingface/dataset-viewer#1608: hf_hub_download creating its cache folder.
HF_CACHE = """Traceback (most recent call last):
  File "/src/services/search/src/search/routes/search.py", line 91, in download_index_file
    hf_hub_download(
  File "/src/services/search/.venv/lib/python3.9/site-packages/huggingface_hub/file_download.py", line 1159, in hf_hub_download
    os.makedirs(storage_folder, exist_ok=True)
  File "/usr/local/lib/python3.9/os.py", line 215, in makedirs
    makedirs(head, exist_ok=exist_ok)
  File "/usr/local/lib/python3.9/os.py", line 225, in makedirs
    mkdir(name, mode)
PermissionError: [Errno 13] Permission denied: '/.cache'
"""
# FRED-2/OptiType#98: a dataset installer creating its data folder.
DATA_FOLDER = """Traceback (most recent call last):
  File "install_stimuli_gui.py", line 127, in load_database
    os.makedirs(target)
  File "/usr/lib/python2.7/os.py", line 150, in makedirs
    makedirs(head, mode)
  File "/usr/lib/python2.7/os.py", line 157, in makedirs
    mkdir(name, mode)
OSError: [Errno 13] Permission denied: '/local'
"""


def test_a_denied_cache_or_dataset_folder_is_no_checkpoint_failure(tmp_path):
    for i, text in enumerate((HF_CACHE, DATA_FOLDER)):
        ids = _ids(tmp_path / str(i), text)
        assert ids == ["unclassified-failure"], (i, ids)


def test_a_denied_log_file_open_is_no_checkpoint_failure(tmp_path):
    # Near miss: opening a log file (no folder creation), as the playbook's known false positives say.
    text = """Traceback (most recent call last):
  File "train.py", line 20, in <module>
    fh = logging.FileHandler(os.path.join(args.output, 'train.log'))
  File "/usr/lib/python3.8/logging/__init__.py", line 1147, in __init__
    StreamHandler.__init__(self, self._open())
PermissionError: [Errno 13] Permission denied: '/home/logs/train.log'
"""
    assert "checkpoint-failure" not in _ids(tmp_path, text)

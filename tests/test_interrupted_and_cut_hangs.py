"""Hangs shown by where a JIT extension load stops, by a Ctrl-C's tracebacks or a stack a paste cut at both ends, and
by watchdog timeouts in collectives of different sizes; with the interrupts, loads and timeouts that stay as they were."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# MCG-NJU/SparseOcc#40: the verbose JIT load of `dvr`, the log stops at the import of the built library.
DVR_LOAD = ["Using /home/gyh/.cache/torch_extensions/py38_cu118 as PyTorch extensions root...",
            "Detected CUDA files, patching ldflags",
            "Emitting ninja build file /home/gyh/.cache/torch_extensions/py38_cu118/dvr/build.ninja...",
            "Building extension module dvr...",
            "Allowing ninja to set a default number of workers... (overridable by setting the environment variable MAX_JOBS=N)",
            "ninja: no work to do.",
            "Loading extension module dvr..."]
# DeepSpeed's op load goes on (OptimalScale/LMFlow#219).
LOADED = "Time to load utils op: 0.37459588050842285 seconds"
# dusty-nv/jetson-inference#782: the frames of a Ctrl-C traceback, pasted without opener, indentation or exception line.
CUT_STACK = ['File "train_ssd.py", line 150, in test',
             "for _, data in enumerate(loader):",
             'File "/usr/local/lib/python3.6/dist-packages/torch/utils/data/dataloader.py", line 779, in _try_get_data',
             "data = self._data_queue.get(timeout=timeout)",
             'File "/usr/lib/python3.6/multiprocessing/queues.py", line 104, in get',
             "if not self._poll(timeout):",
             'File "/usr/lib/python3.6/multiprocessing/connection.py", line 414, in _poll',
             "r = wait([self], timeout)"]
# The same kind of paste cut inside the model's forward (torch/nn/modules/module.py, conv.py frames): no wait.
CUT_IN_WORK = ['File "train_ssd.py", line 150, in test',
               "confidence, locations = net(images)",
               'File "/usr/local/lib/python3.6/dist-packages/torch/nn/modules/module.py", line 727, in _call_impl',
               "result = self.forward(*input, **kwargs)",
               'File "/usr/local/lib/python3.6/dist-packages/torch/nn/modules/conv.py", line 423, in forward',
               "return self._conv_forward(input, self.weight)"]
# chainer/chainer#2903: one report line, then Ctrl-C; the worker processes' tracebacks cut after their first frame.
CHAINER = ["epoch       iteration   elapsed_time  main/loss   main/accuracy",
           "0           1           7.3559        1.07867     0.498882       ",
           "^CProcess Process-8:..........................................]  1.00%",
           "Process Process-7:###########.................................] 35.29%",
           "Traceback (most recent call last):rations",
           "Traceback (most recent call last):me to finish: 0:00:00.",
           '  File "/mnt/sakura201/stsutsui/anadonda2/lib/python2.7/multiprocessing/process.py", line 258, in _bootstrap']
# A worker interrupted inside its dataset's transform (chainer's MultiprocessIterator worker calling get_example).
WORKER_AT_WORK = ['  File "/home/owner/anaconda3/envs/chainercv/lib/python3.5/site-packages/chainer/iterators/multiprocess_iterator.py", line 390, in _worker',
                  "    data = _fetch_dataset[index]",
                  '  File "/home/owner/anaconda3/envs/chainercv/lib/python3.5/site-packages/chainer/dataset/dataset_mixin.py", line 67, in __getitem__',
                  "    return self.get_example(index)",
                  "KeyboardInterrupt"]
WATCHDOG = ("[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
            "OpType=ALLREDUCE, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for 600049 milliseconds before timing out.")


def _analyze(tmp_path: Path, lines: list[str]) -> Analysis:
    return analyze(Context(ingest(write_run(tmp_path, {"console.log": "\n".join(lines) + "\n"}))))


def _problems(a: Analysis) -> list:
    return [f for f in a.findings if f.severity > Severity.INFO]


def test_log_stopping_at_loading_extension_module_is_a_low_hang(tmp_path):
    top = _problems(_analyze(tmp_path, DVR_LOAD))[0]
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.LOW, "stale_build_lock")
    assert top.evidence[0].line == 7 and "Loading extension module dvr" in top.summary


def test_log_stopping_at_building_extension_module_is_a_low_hang(tmp_path):
    top = _problems(_analyze(tmp_path, DVR_LOAD[:4]))[0]
    assert (top.id, top.severity, top.evidence[0].line) == ("silent-hang", Severity.LOW, 4)


def test_extension_load_followed_by_the_load_time_is_quiet(tmp_path):
    assert not _problems(_analyze(tmp_path, [*DVR_LOAD, LOADED]))


def test_extension_load_at_the_end_of_a_crashed_run_is_no_hang(tmp_path):
    a = _analyze(tmp_path, ["RuntimeError: CUDA error: an illegal memory access was encountered", *DVR_LOAD])
    assert "silent-hang" not in {f.id for f in _problems(a)}


def test_stack_cut_at_both_ends_in_a_queue_wait_is_a_low_hang(tmp_path):
    a = _analyze(tmp_path, CUT_STACK)
    top = _problems(a)[0]
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.LOW, "stuck_dataloader")
    assert "_poll (connection.py:414)" in top.summary and top.evidence[0].line == 1
    assert "unclassified-failure" not in {f.id for f in a.findings}


def test_stack_cut_inside_the_forward_is_quiet(tmp_path):
    assert not _problems(_analyze(tmp_path, CUT_IN_WORK))


def test_ctrl_c_over_idle_workers_is_a_low_hang_not_a_failure(tmp_path):
    a = _analyze(tmp_path, CHAINER)
    problems = _problems(a)
    assert [(f.id, f.severity) for f in problems] == [("silent-hang", Severity.LOW)]
    assert problems[0].causes[0].cause.id == "stuck_dataloader" and "(Process-8)" in problems[0].summary


def test_ctrl_c_while_a_worker_runs_its_dataset_is_quiet(tmp_path):
    a = _analyze(tmp_path, [*CHAINER, *WORKER_AT_WORK])
    assert not _problems(a)


def test_timeouts_in_collectives_of_different_sizes_are_a_mismatch(tmp_path):
    # 2U1/Qwen-VL-Series-Finetune#17: rank 0 in a 544997376-element all-reduce, the others in 2560-element ones.
    lines = [WATCHDOG.format(r=0, seq=959, n=544997376)] + [WATCHDOG.format(r=r, seq=963, n=2560) for r in (1, 5, 4, 2)]
    top = _problems(_analyze(tmp_path, lines))[0]
    assert (top.id, top.onset.rank, top.evidence[0].line) == ("collective-mismatch", 0, 1)
    assert "rank 0: ALLREDUCE of 544997376 elements" in top.summary


def test_timeouts_in_the_same_collective_stay_a_timeout(tmp_path):
    # hiyouga/LlamaFactory#7396: every rank in SeqNum 1580 of 466119168 elements.
    lines = [WATCHDOG.format(r=r, seq=1580, n=466119168) for r in (0, 4, 2)]
    ids = [f.id for f in _problems(_analyze(tmp_path, lines))]
    assert ids[0] == "nccl-timeout" and "collective-mismatch" not in ids


def test_a_rank_with_timeouts_of_several_works_is_not_compared(tmp_path):
    # pytorch/pytorch#118369: one rank reports works of several process groups; sizes across ranks prove nothing then.
    lines = [WATCHDOG.format(r=0, seq=96120, n=2560), WATCHDOG.format(r=0, seq=96125, n=4096), WATCHDOG.format(r=7, seq=64088, n=4096)]
    assert "collective-mismatch" not in {f.id for f in _problems(_analyze(tmp_path, lines))}

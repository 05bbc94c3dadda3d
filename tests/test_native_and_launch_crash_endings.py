"""Crash endings in native libraries' and launchers' own words: which playbook ranks first, and what stays quiet."""

from __future__ import annotations

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from tests.helpers import ingest_text


def _problems(tmp_path, text: str) -> list[str]:
    a = analyze(Context(ingest_text(tmp_path, text)))
    return [f.id for f in a.findings if f.severity > Severity.INFO]


def test_caffe_cuda_check_out_of_memory_is_a_device_oom(tmp_path):
    # BestSonny/SSTD#9: glog's abort of Caffe's CUDA_CHECK on cudaErrorMemoryAllocation, then the shell's abort line.
    text = ("F1206 10:15:04.766489   447 syncedmem.cpp:56] Check failed: error == cudaSuccess (2 vs. 0)  out of memory\n"
            "*** Check failure stack trace: ***\nAborted (core dumped)\n")
    assert _problems(tmp_path, text)[:1] == ["cuda-oom"]


def test_bare_memoryerror_ending_a_traceback_is_host_memory(tmp_path):
    # carpedm20/deep-rl-tensorflow#20: a replay memory too large for RAM.
    text = ('Traceback (most recent call last):\n  File "/home/strky/deep-rl-tensorflow/agents/experience.py", line 15, in __init__\n'
            "    self.observations = np.empty([self.memory_size] + observation_dims, dtype=np.uint8)\nMemoryError\n")
    assert _problems(tmp_path, text)[:1] == ["host-memory-exhaustion"]


def test_glibc_abort_is_a_failure_not_a_clean_run(tmp_path):
    # sfzhang15/ATSS#73 (the old glibc form, no traceback) and yxlijun/Pelee.Pytorch#20 (the newer bare message).
    assert _problems(tmp_path / "a", "*** Error in `/usr/bin/python2.7': free(): invalid pointer: 0x00007f801fcdbb80 ***\n") == ["unclassified-failure"]
    assert _problems(tmp_path / "b", "free(): invalid pointer\nAborted (core dumped)\n") == ["unclassified-failure"]


def test_windows_ide_ntstatus_exit_is_a_failure_and_ctrl_c_is_not(tmp_path):
    assert _problems(tmp_path / "a", "Epoch 1/100: 0%|          | 0/18\n\nProcess finished with exit code -1073741819 (0xC0000005)\n") == ["unclassified-failure"]
    assert _problems(tmp_path / "b", "Epoch 1/100: 0%|          | 0/18\n\nProcess finished with exit code -1073741510 (0xC000013A: interrupted by Ctrl+C)\n") == []


def test_yolo_label_class_assert_is_bad_input_data(tmp_path):
    # WongKinYiu/yolov7#1952.
    text = ('Traceback (most recent call last):\n  File "train.py", line 251, in train\n'
            "    assert mlc < nc, 'Label class %g exceeds nc=%g in %s. Possible class labels are 0-%g' % (mlc, nc, opt.data, nc - 1)\n"
            "AssertionError: Label class 19 exceeds nc=5 in data/custom_data.yaml. Possible class labels are 0-4\n")
    assert _problems(tmp_path, text)[:1] == ["bad-input-data"]


def test_invalid_device_ordinal_is_a_launch_failure_not_a_shared_context(tmp_path):
    # meituan/YOLOv6#313, KellerJordan/modded-nanogpt#61: more ranks per node than visible GPUs.
    text = ('Traceback (most recent call last):\n  File "train.py", line 402, in <module>\n    torch.cuda.set_device(local_rank)\n'
            "RuntimeError: CUDA error: invalid device ordinal\n")
    found = _problems(tmp_path, text)
    assert found[:1] == ["unclassified-failure"] and "cuda-context-corruption" not in found

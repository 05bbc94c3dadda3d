"""Multi-line blocks through the whole text-log pipeline: tracebacks, C++ dumps, torchrun reports, nvidia-smi tables.

Texts are literal formats.md items (section cited) or real output recorded here; each test asserts
the block's line span, message, rank and fields.
"""

from __future__ import annotations

import datetime as dt
import json

import polars as pl

from tests.helpers import frame, ingest_text
from tests.test_nvsmi_table import T470

UTC = dt.timezone.utc


def blocks(tmp_path, text: str, name: str = "train.log", code: str | None = None) -> list[dict]:
    ev = frame(ingest_text(tmp_path, text, name=name), "events")
    if code:
        ev = ev.filter(pl.col("code") == code)
    rows = ev.sort("line").to_dicts()
    for r in rows:
        r["fields"] = json.loads(r["fields"])
    return rows


OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 1 has a total capacity of 4.00 GiB "
       "of which 2.35 GiB is free. Of the allocated memory 825.15 MiB is allocated by PyTorch, and 24.85 MiB is reserved "
       "by PyTorch but unallocated.")


def test_plain_traceback_is_one_event_with_final_exception_line(tmp_path):
    text = (
        "step 1 loss 2.0\n"
        "Traceback (most recent call last):\n"
        '  File "/ws/train.py", line 270, in <module>\n'
        "    main()\n"
        '  File "/ws/train.py", line 201, in main\n'
        "    x = emb(ids)\n"
        "IndexError: index out of range in self\n"
        "\n"
        "step 9 loss 1.0\n"
    )
    (tb,) = blocks(tmp_path, text, code="python_traceback")
    assert (tb["line"], tb["end_line"], tb["message"]) == (2, 7, "IndexError: index out of range in self")
    assert tb["fields"] == {"file": "/ws/train.py", "line": "201", "function": "main", "exc_type": "IndexError", "frames": "2"}
    assert tb["severity"] == "error"
    assert tb["text"].splitlines()[0] == "Traceback (most recent call last):"


def test_interleaved_rank_prefixed_tracebacks_are_assembled_per_rank(tmp_path):
    """formats.md §2 general shape: `[rankN]: ` excepthook prefix, two ranks interleaving."""
    text = (
        "[rank1]: Traceback (most recent call last):\n"
        "[rank0]: Traceback (most recent call last):\n"
        '[rank1]:   File "/ws/train.py", line 270, in <module>\n'
        '[rank0]:   File "/ws/train.py", line 270, in <module>\n'
        "[rank1]:     main()\n"
        "[rank0]:     main()\n"
        '[rank1]:   File "/ws/train.py", line 200, in main\n'
        "[rank1]:     loss.backward()\n"
        '[rank0]:   File "/ws/train.py", line 201, in main\n'
        "[rank0]:     x = y[3]\n"
        "[rank0]: IndexError: index out of range in self\n"
        f"[rank1]: {OOM}\n"
    )
    tbs = blocks(tmp_path, text, code="python_traceback")
    assert [(t["line"], t["end_line"], t["rank"]) for t in tbs] == [(1, 12, 1), (2, 11, 0)]
    assert tbs[0]["message"] == OOM and tbs[0]["fields"]["exc_type"] == "torch.OutOfMemoryError"
    assert tbs[0]["fields"]["line"] == "200"
    assert tbs[1]["message"] == "IndexError: index out of range in self"
    # Each event's text holds its own rank's lines only.
    assert all(ln.startswith("[rank1]:") for ln in tbs[0]["text"].splitlines())


def test_chained_tracebacks_are_one_event_with_the_last_exception(tmp_path):
    text = (
        "Traceback (most recent call last):\n"
        '  File "a.py", line 3, in <module>\n'
        "    q.get(timeout=1)\n"
        "_queue.Empty\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "a.py", line 9, in <module>\n'
        "    run()\n"
        "RuntimeError: boom\n"
        "\n"
        "The above exception was the direct cause of the following exception:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "b.py", line 2, in <module>\n'
        "    wrap()\n"
        "ValueError: wrapped\n"
    )
    (tb,) = blocks(tmp_path, text, code="python_traceback")
    assert (tb["line"], tb["end_line"], tb["message"]) == (1, 18, "ValueError: wrapped")
    assert tb["fields"]["chain"] == "context,cause"
    assert tb["fields"]["first_exception"] == "_queue.Empty"
    assert (tb["fields"]["file"], tb["fields"]["line"]) == ("b.py", "2")


def test_multiline_cuda_error_message_belongs_to_the_traceback(tmp_path):
    """formats.md §2.6 2.0-2.7 form: the message spans four lines."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "t.py", line 5, in <module>\n'
        "    loss.item()\n"
        "RuntimeError: CUDA error: device-side assert triggered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
        "\n"
        "epoch 2\n"
    )
    ev = blocks(tmp_path, text)
    tb = next(e for e in ev if e["code"] == "python_traceback")
    assert (tb["line"], tb["end_line"], tb["message"]) == (1, 7, "RuntimeError: CUDA error: device-side assert triggered")
    codes = [(e["line"], e["code"], e["severity"]) for e in ev if e["code"] != "python_traceback"]
    assert codes == [(4, "device_side_assert", "error"), (5, "cuda_launch_blocking_advice", "advice"),
                     (6, "cuda_launch_blocking_advice", "advice"), (7, "cuda_dsa_advice", "advice")]


def test_traceback_ends_at_the_next_log_record(tmp_path):
    text = (
        "Traceback (most recent call last):\n"
        '  File "t.py", line 5, in <module>\n'
        "    f()\n"
        "KeyError: 'labels'\n"
        "[2024-04-10 16:02:56,193] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 270 closing signal SIGTERM\n"
    )
    (tb,) = blocks(tmp_path, text, code="python_traceback")
    assert (tb["end_line"], tb["message"], tb["fields"]["exc_type"]) == (4, "KeyError: 'labels'", "KeyError")


def test_truncated_traceback_is_kept_and_marked(tmp_path):
    text = "Traceback (most recent call last):\n" '  File "t.py", line 5, in <module>\n' "    f()\n"
    (tb,) = blocks(tmp_path, text, code="python_traceback")
    assert (tb["line"], tb["end_line"], tb["fields"]["truncated"]) == (1, 3, "true")
    assert tb["message"].startswith("Traceback (most recent call last)")


def test_logger_exception_opener_with_bare_frames(tmp_path):
    text = (
        "2024-05-01 10:00:00,123 - ERROR - trainer - Traceback (most recent call last):\n"
        '  File "t.py", line 5, in <module>\n'
        "    f()\n"
        "OSError: [Errno 28] No space left on device\n"
    )
    ev = blocks(tmp_path, text)
    tb = next(e for e in ev if e["code"] == "python_traceback")
    assert (tb["line"], tb["end_line"], tb["message"]) == (1, 4, "OSError: [Errno 28] No space left on device")
    assert tb["ts"] == dt.datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=UTC)
    assert any(e["code"] == "no_space_left" and e["line"] == 4 for e in ev)


def test_time_stamped_prefix_on_every_line(tmp_path):
    """vLLM-style record prefix repeated on each traceback line (OBS gpustack/gpustack#835)."""
    text = (
        "ERROR 12-25 01:10:28 engine.py:366] Traceback (most recent call last):\n"
        'ERROR 12-25 01:10:28 engine.py:366]   File "/x/engine.py", line 357, in run_mp_engine\n'
        "ERROR 12-25 01:10:28 engine.py:366]     engine = MQLLMEngine.from_engine_args(engine_args=engine_args,\n"
        "ERROR 12-25 01:10:29 engine.py:366] RuntimeError: NCCL error: unhandled system error\n"
    )
    (tb,) = blocks(tmp_path, text, code="python_traceback")
    assert (tb["end_line"], tb["message"]) == (4, "RuntimeError: NCCL error: unhandled system error")


def test_dataloader_worker_original_traceback_is_inner_exception(tmp_path):
    tb = blocks(tmp_path, _recording("dataloader_exception.log"), code="python_traceback")[0]
    assert tb["message"] == "ValueError: Caught ValueError in DataLoader worker process 0."
    assert tb["fields"]["inner_exception"] == "ValueError: corrupt sample 2"
    assert (tb["line"], tb["end_line"]) == (1, 29)


def test_cpp_frame_dump_is_one_event_with_its_rank(tmp_path):
    """formats.md §2.4.1 ~2.2/2.3 sequence: the dump continues the `[rank7]:` record above it."""
    text = (
        "[rank7]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 7] Process group watchdog thread terminated with exception: [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600017 milliseconds before timing out.\n"
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 (most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f94ddb56897 in .../torch/lib/libc10.so)\n"
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x7f94dee2ec62 in .../libtorch_cuda.so)\n"
        "\n"
    )
    (dump,) = blocks(tmp_path, text, code="cpp_stacktrace")
    assert (dump["line"], dump["end_line"], dump["rank"]) == (2, 4, 7)
    assert dump["fields"]["function"] == "checkTimeout" and dump["fields"]["line"] == "565"
    assert dump["fields"]["frames"] == "2"
    assert dump["fields"]["origin"].startswith("c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout")




def test_child_failed_report_sigkill(tmp_path):
    """formats.md §2.5 real report [OBS lzhxmu/CPPO#6]."""
    (rep,) = blocks(tmp_path, _issue("cppo_6_child_failed_sigkill.log"), code="torchrun_child_failed_report")
    assert (rep["line"], rep["end_line"], rep["rank"]) == (10, 25, 0)
    assert rep["ts"] == dt.datetime(2025, 5, 21, 15, 43, 3, tzinfo=UTC)
    f = rep["fields"]
    assert (f["title"], f["rank"], f["local_rank"], f["exitcode"], f["pid"]) == ("src/open_r1/grpo_gsm.py", "0", "0", "-9", "14750")
    assert (f["host"], f["error_file"], f["signal"], f["failures"]) == (
        "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker", "<N/A>", "SIGKILL", "1")
    assert f["traceback"] == "Signal 9 (SIGKILL) received by PID 14750"
    assert "other_ranks" not in f
    assert rep["message"] == "src/open_r1/grpo_gsm.py FAILED: rank 0 (local_rank 0) exitcode -9: Signal 9 (SIGKILL) received by PID 14750"


def test_child_failed_report_old_layout_with_other_failures(tmp_path):
    """PyTorch <=1.10 layout (`Root Cause:` / `Other Failures:` / `msg:`) [OBS xzz777/SCTNet#47]."""
    text = (
        "tools/train.py FAILED         \n"
        "=======================================\n"
        "Root Cause:\n"
        "[0]:\n"
        "  time: 2025-02-20_22:01:20\n"
        "  rank: 0 (local_rank: 0)\n"
        "  exitcode: 1 (pid: 866229)\n"
        "  error_file: <N/A>\n"
        '  msg: "Process failed with exitcode 1"\n'
        "=======================================\n"
        "Other Failures:\n"
        "[1]:\n"
        "  time: 2025-02-20_22:01:20\n"
        "  rank: 1 (local_rank: 1)\n"
        "  exitcode: 1 (pid: 866230)\n"
        "  error_file: <N/A>\n"
        '  msg: "Process failed with exitcode 1"\n'
    )
    (rep,) = blocks(tmp_path, text, code="torchrun_child_failed_report")
    assert (rep["line"], rep["end_line"], rep["rank"]) == (1, 17, 0)
    f = rep["fields"]
    assert (f["title"], f["exitcode"], f["pid"], f["traceback"]) == ("tools/train.py", "1", "866229", "Process failed with exitcode 1")
    assert (f["other_ranks"], f["other_local_ranks"], f["other_exitcodes"], f["other_pids"], f["failures"]) == ("1", "1", "1", "866230", "2")


def test_child_failed_report_with_py_callstack_and_signal_suffix(tmp_path):
    """Recorded here (torch 2.13, 2 gloo ranks, rank 1 SIGKILLs itself): exitcode line carries `(SIGTERM)`."""
    text = _recording("torchrun_kill/console.log")
    (rep,) = blocks(tmp_path, text, name="console.log", code="torchrun_child_failed_report")
    f = rep["fields"]
    assert (rep["rank"], f["exitcode"], f["pid"]) == (0, "-15", "16798")
    assert f["exception"].startswith("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error")
    assert (f["other_ranks"], f["other_exitcodes"], f["other_pids"]) == ("1", "-9", "16799")
    lines = text.splitlines()
    assert lines[rep["line"] - 1].startswith("torch.distributed.elastic.multiprocessing.errors.ChildFailedError")
    assert set(lines[rep["end_line"] - 1]) == {"="}


# The same real 470-driver table the nvidia-smi parser tests read numbers from.
SMI_470 = T470


def test_nvidia_smi_table_470_in_a_log(tmp_path):
    """formats.md §3.4 driver <=530 layout with the ctime line above it."""
    text = "epoch 1 loss 2.0\n" + SMI_470 + "epoch 2 loss 1.9\n"
    (t,) = blocks(tmp_path, text, code="nvidia_smi_table")
    assert (t["line"], t["end_line"], t["severity"]) == (2, 21, "info")
    assert t["ts"] == dt.datetime(2024, 12, 13, 18, 25, 30, tzinfo=UTC)
    assert t["message"] == "NVIDIA-SMI 470.82.01 Driver Version: 470.82.01 CUDA Version: 11.4"
    assert t["fields"] == {"smi_version": "470.82.01", "driver_version": "470.82.01", "cuda_version": "11.4",
                           "gpus": "1", "processes": "1", "date": "Fri Dec 13 18:25:30 2024"}


def test_nvidia_smi_table_550_without_processes(tmp_path):
    """formats.md §3.4 driver 550+ rows (as printed there, no date line)."""
    text = (
        "loading model\n"
        "+-----------------------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 550.127.05             Driver Version: 550.127.05     CUDA Version: 12.4     |\n"
        "|-----------------------------------------+------------------------+----------------------+\n"
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n"
        "|   0  NVIDIA A40                     On  |   00000000:4F:00.0 Off |                    0 |\n"
        "|  0%   29C    P8             23W /  300W |       1MiB /  46068MiB |      0%      Default |\n"
        "|  No running processes found                                                             |\n"
        "training starts\n"
    )
    (t,) = blocks(tmp_path, text, code="nvidia_smi_table")
    assert (t["line"], t["end_line"], t["ts"]) == (2, 9, None)
    assert (t["fields"]["driver_version"], t["fields"]["cuda_version"], t["fields"]["gpus"]) == ("550.127.05", "12.4", "1")


def test_elastic_prefix_variants_from_real_reports(tmp_path):
    """`stderr: `-prefixed launcher lines (OBS hiyouga/LlamaFactory#163) keep their codes."""
    ev = blocks(tmp_path, _issue("llamafactory_163_stderr_prefix.log"))
    failed = [e for e in ev if e["code"] == "torchrun_child_failed"]
    assert [(e["line"], e["fields"]["exitcode"], e["fields"]["local_rank"]) for e in failed] == [(4, "1", "7")]
    tb = next(e for e in ev if e["code"] == "python_traceback")
    assert (tb["line"], tb["end_line"]) == (5, 15)


def test_block_split_by_chunk_boundary_is_held_back(tmp_path, monkeypatch):
    """A traceback that starts near a chunk's end is moved whole into the next chunk (lines.BLOCK_START)."""
    import forensics.parsers.lines as lines_mod

    assert lines_mod.BLOCK_START  # the openers parsers/blocks/ knows
    for opener in ("Traceback (most recent call last):", "Exception raised from x at y.cpp:1 (most recent call first):",
                   "| NVIDIA-SMI 535.129.03", "Root Cause (first observed failure):", "Root Cause:"):
        assert pl.Series([opener]).str.contains(lines_mod.BLOCK_START).item(), opener


def test_ipython_traceback(tmp_path):
    """Jupyter/IPython layout: `<Exc>   Traceback (most recent call last)` then `File ...:N, in f` frames."""
    text = (
        "---------------------------------------------------------------------------\n"
        "OutOfMemoryError                          Traceback (most recent call last)\n"
        "Cell In[5], line 3\n"
        "      1 x = torch.randn(8, 3, 224, 224, device='cuda')\n"
        "----> 3 y = model(x)\n"
        "\n"
        "File ~/venv/lib/python3.10/site-packages/torch/nn/modules/module.py:1501, in Module._call_impl(self, *args, **kwargs)\n"
        "-> 1501     return forward_call(*args, **kwargs)\n"
        "\n"
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 108.00 MiB. GPU 0 has a total capacty of 15.89 GiB of which 65.12 MiB is free. Process 2670 has 15.82 GiB memory in use. Of the allocated memory 15.36 GiB is allocated by PyTorch, and 168.02 MiB is reserved by PyTorch but unallocated.\n"
    )
    ev = blocks(tmp_path, text)
    tb = next(e for e in ev if e["code"] == "python_traceback")
    assert (tb["line"], tb["end_line"]) == (1, 10)
    assert tb["fields"]["form"] == "ipython" and tb["fields"]["exc_type"] == "OutOfMemoryError"
    assert (tb["fields"]["file"], tb["fields"]["line"], tb["fields"]["function"]) == (
        "~/venv/lib/python3.10/site-packages/torch/nn/modules/module.py", "1501", "Module._call_impl")
    oom = next(e for e in ev if e["code"] == "cuda_oom")
    assert (oom["line"], oom["fields"]["other_pids"], oom["fields"]["requested"]) == (10, "2670", "108.00 MiB")


def _recording(rel: str) -> str:
    from tests.conftest import ROOT

    return (ROOT / "tests" / "recordings" / "events" / rel).read_text(encoding="utf-8")


def _issue(name: str) -> str:
    from tests.conftest import ROOT

    return (ROOT / "tests" / "recordings" / "issues" / name).read_text(encoding="utf-8")

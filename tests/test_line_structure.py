"""Line structure of text logs: prefixes carried onto `\\r` segments, program stamps with a bare level, sub-group
ranks of ProcessGroupNCCL, Windows line ends and paths, tabs, multi-MB lines, and block events' times.

Each line is copied from the public issue thread or file cited next to it; where a test joins a real prefix
and real tqdm redraws on one physical line, it says so (a launcher or collector writes its prefix once per
physical line, before all the redraws on it).
"""

from __future__ import annotations

import datetime as dt

import polars as pl
from forensics.parsers import lines as L

from tests.helpers import frame, ingest_text
from tests.test_prefixes_collectors import COMPOSE_GEMMA, IPEX_810, JOURNAL_VLLM
from tests.test_prefixes_launchers import split

UTC = dt.timezone.utc


def at(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


# Redraws of one tqdm bar (horovod/horovod#492) and the HF Trainer dict printed after them (tests/test_lines.py).
BAR = "Train Epoch     #1:  25%|##4       | {n}/26691 [22:30<1:08:06,  4.92it/s, loss={loss}, accuracy=0.271]"
HF = "{'loss': 0.2051, 'grad_norm': nan, 'learning_rate': 9.774074342405685e-06, 'epoch': 0.53}"


def redraws(prefix: str) -> str:
    """One physical line: `prefix`, then two bar redraws and the HF dict, each after a `\\r`."""
    return f"{prefix}\r{BAR.format(n=6567, loss=6.78)}\r{BAR.format(n=6568, loss=6.77)}\r{HF}"


def losses(tmp_path, text: str) -> list[tuple]:
    m = frame(ingest_text(tmp_path, text), "metrics").filter(pl.col("name") == "loss").sort("line", "value")
    return m.select("line", "ts", "rank", "value").rows()


# --- 1. `\r` segments inherit the collectors' and launchers' prefixes ------------------------------------------


def test_segments_inherit_kubectl_stamp_and_rank_prefix(tmp_path):
    # vllm-project/vllm#6334's `kubectl logs --timestamps` prefix, then torchrun's `[rank0]:`.
    text = redraws("2024-07-11T12:28:23.200321639Z [rank0]:") + "\n"
    ts = at(2024, 7, 11, 12, 28, 23, 200321)
    assert losses(tmp_path, text) == [(1, ts, 0, 0.2051), (1, ts, 0, 6.77), (1, ts, 0, 6.78)]


def test_segments_inherit_the_rank_behind_a_compose_column(tmp_path):
    # The gemma3n-api compose log (code index) with one service's torchrun `--tee` line of redraws.
    text = "\n".join([*COMPOSE_GEMMA[:5], redraws("gemma3n-api-1  | [default1]:")]) + "\n"
    assert losses(tmp_path, text) == [(6, None, 1, 0.2051), (6, None, 1, 6.77), (6, None, 1, 6.78)]


def test_segments_inherit_the_journald_stamp(tmp_path):
    # The vLLM unit's journal (code index): `short` output has no year (the file's, just written, is used).
    text = "\n".join([JOURNAL_VLLM[0], redraws("Feb 22 06:35:31 jeebs-Z490-AORUS-MASTER env[2827]: ")]) + "\n"
    ts = at(dt.datetime.now(UTC).year, 2, 22, 6, 35, 31)
    assert losses(tmp_path, text) == [(2, ts, None, 0.2051), (2, ts, None, 6.77), (2, ts, None, 6.78)]


def test_segments_inherit_the_intel_mpi_rank_label(tmp_path):
    # intel/intel-extension-for-pytorch#810 (`mpirun -l`): rank 3's line of redraws among the labelled lines.
    text = "\n".join([*IPEX_810[:8], redraws("[3] ")]) + "\n"
    assert losses(tmp_path, text) == [(9, None, 3, 0.2051), (9, None, 3, 6.77), (9, None, 3, 6.78)]


def test_segments_inherit_srun_and_pdsh_labels_and_the_rank_after_them():
    # `srun --label` task ids (awslabs/awsome-distributed-ai#1039) and pdsh hosts (DeepSpeed's launcher docs).
    text = "\n".join([redraws(" 1: [default1]:"), redraws("worker-1: [rank9]:")]).encode()
    df, _ = L._frame(text, 1, L.ReadStats())
    got = df.filter(pl.col("seg") > 0).select("line", "text").rows()
    assert [t[:40] for _, t in got] == [
        " 1: [default1]:Train Epoch     #1:  25%|", " 1: [default1]:Train Epoch     #1:  25%|", " 1: [default1]:{'loss': 0.2051, 'grad_no",
        "worker-1: [rank9]:Train Epoch     #1:  2", "worker-1: [rank9]:Train Epoch     #1:  2", "worker-1: [rank9]:{'loss': 0.2051, 'grad",
    ]


def test_segments_of_an_unprefixed_line_get_nothing():
    # Near miss: a line without a prefix gives its segments none, and a bar whose `desc: ` has a host's shape
    # (`Epoch-1`) repeats it in every redraw itself: no segment gets it twice.
    bar2 = "Epoch-1:  10%|#  | 1/10\rEpoch-1:  20%|## | 2/10"
    df, _ = L._frame(redraws("").encode() + b"\n" + bar2.encode(), 1, L.ReadStats())
    assert df.select("seg", "text").rows()[1:3] == [(1, BAR.format(n=6567, loss=6.78)), (2, BAR.format(n=6568, loss=6.77))]
    assert df.filter(pl.col("line") == 2).get_column("text").to_list() == bar2.split("\r")


def test_a_line_counter_copied_onto_segments_is_not_an_mpi_label(tmp_path):
    # Near miss: a paste's line counters (hiyouga/LlamaFactory#7396's `[80746] [rank0]:` form) on three lines,
    # one of them a line of redraws. Its copies on the segments must not make the counter look like a label.
    text = "\n".join([
        "[80744] [rank0]: Traceback (most recent call last):",
        "[80745] [rank0]:   torch.distributed.barrier()",
        redraws("[80746] [rank0]:"),
    ]) + "\n"
    assert {r for _, _, r, _ in losses(tmp_path, text)} == {0}


# --- 2. a program's own zoned ISO stamp and a bare level word ----------------------------------------------------

# kubeflow/katib#1182 (the mxnet-mnist trial: Python logging `%(asctime)s %(levelname)-8s %(message)s`, ISO datefmt).
KATIB_1182 = [
    "2020-05-08T01:42:02Z INFO     Epoch[0] Train-accuracy=0.918777",
    "2020-05-08T01:42:02Z INFO     Epoch[0] Time cost=2.595",
]
# kubeflow/katib#2560 (a TrainJob trial, the same format around PyTorch's mnist line).
KATIB_2560 = [
    "2025-08-14T23:41:27Z INFO     Train Epoch: 1 [1920/60000 (3%)]    loss=2.2376",
    "2025-08-14T23:41:31Z INFO     Train Epoch: 1 [2560/60000 (4%)]    loss=2.1059",
]


def test_zoned_stamp_and_bare_level_are_the_records_prefix():
    assert split(*KATIB_1182) == [
        (None, at(2020, 5, 8, 1, 42, 2), "Epoch[0] Train-accuracy=0.918777"),
        (None, at(2020, 5, 8, 1, 42, 2), "Epoch[0] Time cost=2.595"),
    ]


def test_zoned_stamp_and_bare_level_before_metrics(tmp_path):
    assert losses(tmp_path, "\n".join(KATIB_2560) + "\n") == [
        (1, at(2025, 8, 14, 23, 41, 27), None, 2.2376), (2, at(2025, 8, 14, 23, 41, 31), None, 2.1059)]


def test_zone_less_stamp_and_bare_level_keep_being_cut():
    # Python logging's default asctime (`,123`) and a plain one, each with a bare level (code index log lines).
    assert split(
        "2024-01-15 10:31:15,456 - ERROR - Training failed: Invalid target column",
        "2025-11-05 15:30:08 - CRITICAL - NaN detected in loss computation",
    ) == [
        (None, at(2024, 1, 15, 10, 31, 15, 456000), "Training failed: Invalid target column"),
        (None, at(2025, 11, 5, 15, 30, 8), "NaN detected in loss computation"),
    ]


def test_collector_stamp_before_vllm_record_stays_the_collectors():
    # Near miss, gonka-ai/gonka discussion #817 (`docker logs -t` of vLLM): the level is vLLM's record prefix, whose
    # stamp is local time (21:50 the day before); the collector's UTC stamp is the line's time.
    got = split(
        "2026-02-27T05:50:45.969437878Z INFO 02-26 21:50:45 [async_llm_engine.py:224] Aborted request "
        "chatcmpl-8e0cadf6a2e64563a1e5a8f914c96fdf.")
    assert got == [(None, at(2026, 2, 27, 5, 50, 45, 969437), "Aborted request chatcmpl-8e0cadf6a2e64563a1e5a8f914c96fdf.")]


# --- 4. ProcessGroupNCCL's `[PG N Rank M]` of a sub-group -----------------------------------------------------------


def test_sub_group_rank_is_not_the_lines_rank(tmp_path):
    # deepseek-ai/DeepEP#106: PG 1 is a group the test made; its `Rank 5` is a rank in that group. The lines of
    # ROCm/ROCm#4021 (`[PG ID 1 PG GUID 1 Rank 2]`) keep the rank of their torchrun prefix.
    text = "\n".join([
        "[PG 1 Rank 5] NCCL watchdog thread terminated with exception: [Rank 5] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=7, OpType=_ALLGATHER_BASE, NumelIn=1024, NumelOut=16384, Timeout(ms)=600000) ran for "
        "600054 milliseconds before timing out.",
        "[rank2]:[E1109 16:13:20.222705810 ProcessGroupNCCL.cpp:1785] [PG ID 1 PG GUID 1 Rank 2] Exception (either an "
        "error or timeout) detected by watchdog at work: 500045, last enqueued NCCL work: 500047, last completed NCCL "
        "work: 500044.",
        "[E1109 16:13:20.230674458 ProcessGroupNCCL.cpp:1785] [PG ID 1 PG GUID 1 Rank 7] Exception (either an error or "
        "timeout) detected by watchdog at work: 500045, last enqueued NCCL work: 500047, last completed NCCL work: 500044.",
    ]) + "\n"
    ev = frame(ingest_text(tmp_path, text), "events").sort("line", "code")
    got = ev.select("line", "rank", "code", pl.col("fields").str.json_path_match("$.pg").alias("pg")).rows()
    assert got == [(1, None, "nccl_watchdog_timeout", "1"), (2, 2, "nccl_work_status", "1"), (3, None, "nccl_work_status", "1")]


def test_default_group_rank_is_the_lines_rank():
    # formats.md §2.4.1: `[PG 0 Rank 7]` (2.2/2.3) and `[PG ID 0 PG GUID 0(default_pg) Rank 1]` (2.4+) name global ranks.
    got = split(
        "[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 7] Timeout at NCCL work: 1, last enqueued NCCL work: 1, last "
        "completed NCCL work: 3452013982.",
        "[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either "
        "an error or timeout) detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807.",
    )
    assert [r for r, _, _ in got] == [7, 1]


# --- 5. Windows line ends and paths, tabs, multi-MB lines ---------------------------------------------------------

# ROCm/ROCm#6314 (PyTorch on Windows): backslash paths, and a lower-case drive letter in the first frame.
ROCM_6314 = [
    "Traceback (most recent call last):",
    '  File "c:\\Users\\krishkat\\...\\gruTorch.py", line 19, in <module>',
    "    gpu_pred = gru(data)",
    "               ^^^^^^^^^",
    '  File "C:\\Users\\krishkat\\AppData\\Local\\Programs\\Python\\Python312\\Lib\\site-packages\\torch\\nn\\modules\\module.py", '
    "line 1778, in _wrapped_call_impl",
    "    return self._call_impl(*args, **kwargs)",
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "C:\\Users\\krishkat\\AppData\\Local\\Programs\\Python\\Python312\\Lib\\site-packages\\torch\\nn\\modules\\module.py", '
    "line 1789, in _call_impl",
    "    return forward_call(*args, **kwargs)",
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "C:\\Users\\krishkat\\AppData\\Local\\Programs\\Python\\Python312\\Lib\\site-packages\\torch\\nn\\modules\\rnn.py", '
    "line 1438, in forward",
    "    result = _VF.gru(",
    "             ^^^^^^^^",
    "RuntimeError: miopenStatusUnknownError",
]


def test_windows_traceback_with_crlf_line_ends(tmp_path):
    run = ingest_text(tmp_path, "\r\n".join(ROCM_6314) + "\r\n")
    (tb,) = frame(run, "events").filter(pl.col("code") == "python_traceback").to_dicts()
    assert (tb["line"], tb["end_line"], tb["message"]) == (1, 14, "RuntimeError: miopenStatusUnknownError")
    fields = pl.Series([tb["fields"]]).str.json_decode().to_list()[0]
    assert (fields["file"], fields["line"], fields["function"], fields["frames"]) == (
        "C:\\Users\\krishkat\\AppData\\Local\\Programs\\Python\\Python312\\Lib\\site-packages\\torch\\nn\\modules\\rnn.py",
        "1438", "forward", "4")
    assert "\r" not in tb["text"]


def test_tab_after_a_zoned_stamp(tmp_path):
    # open-edge-platform/anomalib#1520 (CloudWatch export: the stamp in the host's zone, a tab, then the line).
    line = ("2023-12-06T19:27:45.002-04:00\tEpoch 13: 98%|█████████▊| 1226/1251 [17:49<00:21, 1.15it/s, loss=2.21, "
            "v_num=0, train_st_step=2.000, train_ae_step=0.102, train_stae_step=0.0189, train_loss_step=2.120, "
            "train_st_epoch=2.210, train_ae_epoch=0.117, train_stae_epoch=0.0233, train_loss_epoch=2.350]")
    m = frame(ingest_text(tmp_path, line + "\n"), "metrics")
    assert m.filter(pl.col("name").is_in(["loss", "train_loss_epoch"])).sort("name").select(
        "line", "ts", "step", "name", "value").rows() == [
        (1, at(2023, 12, 6, 23, 27, 45, 2000), 17489, "loss", 2.12),
        (1, at(2023, 12, 6, 23, 27, 45, 2000), 17489, "train_loss_epoch", 2.35),
    ]


def test_a_multi_mb_line_of_redraws_across_chunks(tmp_path, monkeypatch):
    # A tqdm bar written to a file (no tty): 40,000 redraws on one physical line (~3.3 MB), read in 1 MB chunks,
    # between two HF dicts. The file stays `parsed` and every line after the long one is read.
    monkeypatch.setattr(L, "CHUNK_BYTES", 1 << 20)
    bars = "".join("\r" + BAR.format(n=n, loss=6.78) for n in range(1, 40_001))
    text = f"{HF}\n{bars}\r{HF}\n{HF.replace('0.2051', '0.1999')}\n"
    run = ingest_text(tmp_path, text)
    m = frame(run, "metrics").filter(pl.col("name") == "loss")
    assert m.filter(pl.col("value") != 6.78).select("line", "value").rows() == [(1, 0.2051), (2, 0.2051), (3, 0.1999)]
    assert m.filter(pl.col("value") == 6.78).height == 40_000
    files = frame(run, "files").to_dicts()
    assert (files[0]["status"], files[0]["error"]) == ("parsed", None)


def test_a_multi_mb_line_without_breaks_is_cut_and_the_rest_read(tmp_path, monkeypatch):
    # A dumped tensor or base64 blob of 3 MB on one line, read in 1 MB chunks: cut for matching, the rest read.
    monkeypatch.setattr(L, "CHUNK_BYTES", 1 << 20)
    text = HF + "\n" + "0.125, " * (3 << 18) + "\n" + HF.replace("0.2051", "0.1999") + "\n"
    run = ingest_text(tmp_path, text)
    assert frame(run, "metrics").filter(pl.col("name") == "loss").select("line", "value").rows() == [(1, 0.2051), (3, 0.1999)]
    files = frame(run, "files").to_dicts()
    assert files[0]["status"] == "parsed" and "1 line(s) longer than 65536 characters" in files[0]["error"]


# --- 6. block events take the time of the record that announced them ---------------------------------------------

# A training pipeline's log kept in a public repository (code index, gogooku3-standalone notes): `logger.error(...,
# exc_info=True)`-style record, then the traceback (its first frames; the rest is hydra's).
GOGOKU = [
    "2025-09-08 12:19:17,134 - __main__ - INFO - Running command: python scripts/train_atft.py "
    "train.batch.train_batch_size=256 train.optimizer.lr=5e-05 train.trainer.max_epochs=1 "
    "train.trainer.precision=bf16-mixed train.trainer.check_val_every_n_epoch=1 train.trainer.enable_progress_bar=true",
    "2025-09-08 12:19:22,208 - __main__ - ERROR - Training failed: Error executing job with overrides: "
    "['train.batch.train_batch_size=256', 'train.optimizer.lr=5e-05', 'train.trainer.max_epochs=1', "
    "'train.trainer.precision=bf16-mixed', 'train.trainer.check_val_every_n_epoch=1', 'train.trainer.enable_progress_bar=true']",
    "Traceback (most recent call last):",
    '  File "/home/ubuntu/gogooku3-standalone/scripts/train_atft.py", line 5374, in <module>',
    "    train()",
    '  File "/home/ubuntu/.local/lib/python3.10/site-packages/hydra/main.py", line 94, in decorated_main',
    "    _run_hydra(",
    '  File "/home/ubuntu/gogooku3-standalone/scripts/train_atft.py", line 2136, in train',
    "    final_config = OmegaConf.create(",
    "UnboundLocalError: local variable 'OmegaConf' referenced before assignment",
]


def test_traceback_takes_the_stamp_of_the_error_record_above(tmp_path):
    ev = frame(ingest_text(tmp_path, "\n".join(GOGOKU) + "\n"), "events").filter(pl.col("code") == "python_traceback")
    assert ev.select("line", "end_line", "ts", "message").rows() == [
        (3, 10, at(2025, 9, 8, 12, 19, 22, 208000), "UnboundLocalError: local variable 'OmegaConf' referenced before assignment")]


def test_traceback_after_an_info_record_gets_no_stamp(tmp_path):
    # Near miss: the same traceback right after the INFO line (not the record that raised it) keeps no time.
    text = "\n".join([GOGOKU[0], *GOGOKU[2:]]) + "\n"
    ev = frame(ingest_text(tmp_path, text), "events").filter(pl.col("code") == "python_traceback")
    assert ev.select("line", "ts").rows() == [(2, None)]


def test_exception_line_inside_a_stamped_block_takes_its_time(tmp_path):
    # formats.md §2.1's OOM message (tests/test_lines.py) ending the traceback of the error record above it.
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 1 has a total capacity of "
           "4.00 GiB of which 2.35 GiB is free. Of the allocated memory 825.15 MiB is allocated by PyTorch, and 24.85 "
           "MiB is reserved by PyTorch but unallocated.")
    text = "\n".join([*GOGOKU[1:9], oom]) + "\n"
    ev = frame(ingest_text(tmp_path, text), "events").sort("line", "code")
    ts = at(2025, 9, 8, 12, 19, 22, 208000)
    assert ev.select("line", "ts", "code").rows() == [(2, ts, "python_traceback"), (9, ts, "cuda_oom")]


# --- 3. GitHub Actions logs as `gh run view --log` prints them --------------------------------------------------

# A CI triage note quoting `gh run view --log` (code index): job, step, then the runner's line; the
# continuation lines of the failing assertion have the columns and no stamp.
GH_RUN_LOG = [
    "integration (node 24)\tRun npm run test:integration\t2026-08-14T05:58:44.3721294Z ##[error]AssertionError: expected "
    "'error' to be 'blocked' // Object.is equality",
    'integration (node 24)\tRun npm run test:integration\tExpected: "blocked"',
    "integration (node 24)\tRun npm run test:integration\t2026-08-14T05:58:44.4144007Z ##[error]Process completed with "
    "exit code 1.",
]


def test_gh_run_log_columns_are_cut_and_the_runner_stamp_read():
    assert split(*GH_RUN_LOG) == [
        (None, at(2026, 8, 14, 5, 58, 44, 372129), "##[error]AssertionError: expected 'error' to be 'blocked' // Object.is equality"),
        (None, None, 'Expected: "blocked"'),
        (None, at(2026, 8, 14, 5, 58, 44, 414400), "##[error]Process completed with exit code 1."),
    ]


def test_tab_separated_rows_are_not_gh_columns():
    # Near miss: HF Trainer's notebook table pasted as text (tests/cases/grammars/hf_table.toml): tabs, no runner stamp.
    lines = ["Epoch\tTraining Loss\tValidation Loss\tWer", "1\t2.345600\t1.234567\t0.95"]
    assert [m for _, _, m in split(*lines)] == lines


def test_report_row_event_takes_the_reports_time(tmp_path):
    # lzhxmu/CPPO#6 (tests/recordings/issues): the `traceback : Signal 9 ...` row's event has no stamp of its own; the
    # report's `time` row (the agent host's local time, read as UTC) gives it, with the report's rank.
    from tests.conftest import ROOT

    text = (ROOT / "tests" / "recordings" / "issues" / "cppo_6_child_failed_sigkill.log").read_text(encoding="utf-8")
    ev = frame(ingest_text(tmp_path, text), "events").filter(pl.col("line") >= 10).sort("line")
    ts = at(2025, 5, 21, 15, 43, 3)
    assert ev.select("line", "ts", "rank", "code").rows() == [
        (10, ts, 0, "torchrun_child_failed_report"), (24, ts, 0, "torchrun_worker_signal")]

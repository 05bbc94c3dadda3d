"""Log collectors' and launchers' prefixes seen in real pasted logs: kubectl/docker time stamps, Cloud Logging and
CloudWatch pastes, journald, docker compose, Intel MPI `-l`, Open MPI 5, Lightning, loguru, Python logging, vLLM.

Every line is copied verbatim from the public issue thread or file cited next to it (tests/recordings/issues/SOURCES.md
lists the threads); "code index" marks a real log kept in a public repository's file.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from tests.helpers import frame, ingest_text
from tests.test_prefixes_launchers import split

UTC = dt.timezone.utc


def at(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


# --- collectors' receive time (kubectl logs --timestamps, docker logs -t, Cloud Logging, CloudWatch) -------

def test_kubectl_timestamps_before_torch_rank_prefix():
    # vllm-project/vllm#6334 (docker/k8s log with timestamps; the thread's copy has its indentation collapsed).
    got = split(
        '2024-07-11T12:28:23.200321639Z [rank0]: File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/'
        'models/phi3_small.py", line 361, in __init__',
        "2024-07-11T12:28:23.200325972Z [rank0]: self.model = Phi3SmallModel(config, cache_config, quant_config)",
    )
    assert got == [
        (0, at(2024, 7, 11, 12, 28, 23, 200321),
         'File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/models/phi3_small.py", line 361, in __init__'),
        (0, at(2024, 7, 11, 12, 28, 23, 200325), "self.model = Phi3SmallModel(config, cache_config, quant_config)"),
    ]


def test_kubectl_timestamps_before_hf_metric_lines_are_read(tmp_path):
    # A k8s fine-tuning job's log (code index: a Go test quoting `kubectl logs --timestamps` output).
    text = "\n".join([
        "2024-03-06T15:48:55.232199457Z {'loss': 0.063, 'learning_rate': 2e-05, 'epoch': 4.41}",
        "2024-03-06T15:49:20.085236223Z {'loss': 0.0683, 'learning_rate': 2e-05, 'epoch': 4.42}",
        "2024-03-06T15:49:44.949303974Z {'loss': 0.0627, 'learning_rate': 2e-05, 'epoch': 4.44}",
    ]) + "\n"
    m = frame(ingest_text(tmp_path, text), "metrics").filter(pl.col("name") == "loss")
    assert m.select("line", "ts", "rank", "value").rows() == [
        (1, at(2024, 3, 6, 15, 48, 55, 232199), None, 0.063),
        (2, at(2024, 3, 6, 15, 49, 20, 85236), None, 0.0683),
        (3, at(2024, 3, 6, 15, 49, 44, 949303), None, 0.0627),
    ]


def test_cloud_logging_severity_and_stamp():
    # vllm-project/vllm#15784 (GKE log copied from Cloud Logging: severity, RFC3339Nano stamp, then the line);
    # the ANSI colour codes around the vLLM worker tag, which lines.py strips, are left out.
    got = split(
        "ERROR 2025-03-30T23:51:21.303592681Z [rank0]: Traceback (most recent call last):",
        "INFO 2025-03-30T23:51:21.299840450Z (VllmWorkerProcess pid=630) ERROR 03-30 23:51:21 "
        "multiproc_worker_utils.py:243] KeyError: 'layers.32.self_attn.qkv_proj.k_scale'",
    )
    assert got == [
        (0, at(2025, 3, 30, 23, 51, 21, 303592), "Traceback (most recent call last):"),
        # The collector's UTC stamp is the line's time; vLLM's own (`03-30 23:51:21`, no year) is cut.
        (None, at(2025, 3, 30, 23, 51, 21, 299840), "KeyError: 'layers.32.self_attn.qkv_proj.k_scale'"),
    ]


def test_cloudwatch_table_paste():
    # Lightning-AI/litData#340 (SageMaker job log copied from the CloudWatch console: ` | ` cells).
    got = split(
        "  | 2024-08-23T22:22:50.870Z | [rank6]:[E ProcessGroupNCCL.cpp:563] [Rank 6] Watchdog caught collective",
        "2024-08-23T21:52:39.473Z | pytorch_lightning - INFO - RANK 0 - on_train_batch_end - EPOCH 1 BATCH 70/inf(0.00%): "
        "train_loss=0.08913",
    )
    assert got[0] == (6, at(2024, 8, 23, 22, 22, 50, 870000), "Watchdog caught collective")
    assert got[1][1:] == (at(2024, 8, 23, 21, 52, 39, 473000),
                          "pytorch_lightning - INFO - RANK 0 - on_train_batch_end - EPOCH 1 BATCH 70/inf(0.00%): train_loss=0.08913")


def test_a_programs_own_zoned_iso_stamp_keeps_its_record_prefix():
    # Near miss: `isoformat()` with a zone, then ` - LEVEL - `: the program's record prefix, read as a whole.
    assert split("2025-03-01T10:00:00.123456789+05:30 - INFO - x: step:  4  loss:  7.62585") == [
        (None, at(2025, 3, 1, 4, 30, 0, 123456), "step:  4  loss:  7.62585")]


# --- journald / syslog ---------------------------------------------------------------------------------------

# Code index (a vLLM systemd unit's `journalctl` output kept in an audit note, 2026): host, unit[pid], then the unit's lines.
JOURNAL_VLLM = [
    "Feb 22 06:35:27 jeebs-Z490-AORUS-MASTER env[2827]: [rank0]:[W222 06:35:27.321548260 ProcessGroupNCCL.cpp:1524] "
    "Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources. For more "
    "info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
    "Feb 22 06:35:28 jeebs-Z490-AORUS-MASTER env[1633]: (APIServer pid=1633) RuntimeError: Engine core initialization "
    "failed. See root cause above. Failed core proc(s): {}",
    "Feb 22 06:35:29 jeebs-Z490-AORUS-MASTER systemd[1]: vllm-assistant.service: Main process exited, code=exited, "
    "status=1/FAILURE",
    "Feb 22 06:35:35 jeebs-Z490-AORUS-MASTER env[3285]: (APIServer pid=3285) INFO 02-22 06:35:35 [model.py:1561] Using "
    "max model len 16384",
]


def test_journald_prefix_then_the_units_own_prefixes():
    got = split(*JOURNAL_VLLM)
    assert [(r, t) for r, t, _ in got] == [
        (0, at(2024, 2, 22, 6, 35, 27)), (None, at(2024, 2, 22, 6, 35, 28)),
        (None, at(2024, 2, 22, 6, 35, 29)), (None, at(2024, 2, 22, 6, 35, 35)),
    ]
    assert [m[:45] for _, _, m in got] == [
        "Warning: WARNING: destroy_process_group() was",
        "RuntimeError: Engine core initialization fail",
        "vllm-assistant.service: Main process exited, ",
        "Using max model len 16384",
    ]


def test_journal_kernel_xid_lines_keep_their_time(tmp_path):
    # `journalctl -k` (short, no year: the file's year is used) and `-o short-iso`: NVIDIA/open-gpu-kernel-modules
    # report pasted in the code index ("Aug 19 21:36:23 fedora kernel: ..."); a short-iso fixture of a triage tool.
    text = "\n".join([
        "Aug 19 21:36:23 fedora kernel: NVRM: Xid (PCI:0000:23:00): 120, GSP task exception: load access page fault "
        "(cause:0xd) @ pc:0x13636b2, partition:2#0, task:3, gfid: 0",
        "2026-08-15T14:32:10+0000 host kernel: NVRM: Xid (PCI:0000:01:00): 109, name=IL2Series.exe, channel "
        "0x00000028, errorString CTX SWITCH TIMEOUT, Info 0x1c022",
    ]) + "\n"
    run = ingest_text(tmp_path, text)
    year = dt.datetime.now(UTC).year  # the file was just written
    ev = frame(run, "events").select("line", "ts", "code", "message").rows()
    assert [(line, ts, code) for line, ts, code, _ in ev] == [
        (1, at(year, 8, 19, 21, 36, 23), "xid"), (2, at(2026, 8, 15, 14, 32, 10), "xid")]
    assert ev[0][3].startswith("NVRM: Xid (PCI:0000:23:00): 120, GSP task exception")


# --- docker compose --------------------------------------------------------------------------------------------

# Code index (a gemma3n API container's `docker compose up` output).
COMPOSE_GEMMA = [
    "gemma3n-api-1  |   warn(",
    "gemma3n-api-1  | Traceback (most recent call last):",
    'gemma3n-api-1  |   File "/app/download_model.py", line 10, in <module>',
    "gemma3n-api-1  |     from transformers import AutoProcessor, Gemma3nForConditionalGeneration",
    "gemma3n-api-1  | ImportError: cannot import name 'Gemma3nForConditionalGeneration' from 'transformers' "
    "(/usr/local/lib/python3.10/dist-packages/transformers/__init__.py)",
    "gemma3n-api-1 exited with code 1",
]


def test_compose_service_column_is_cut_and_the_traceback_read(tmp_path):
    run = ingest_text(tmp_path, "\n".join(COMPOSE_GEMMA) + "\n")
    assert frame(run, "events").select("line", "end_line", "rank", "code", "message").rows() == [
        (2, 5, None, "python_traceback", COMPOSE_GEMMA[4].removeprefix("gemma3n-api-1  | "))]


def test_compose_pads_names_of_several_services_to_one_column():
    # Code index (a Django/Postgres `docker compose up`): `db-1       | ` and `backend-1  | ` end in one column.
    got = split(
        "db-1       | 2024-08-09 06:01:48.826 UTC [1] LOG:  database system is ready to accept connections",
        "backend-1  | Performing system checks...",
        "backend-1  | System check identified no issues (0 silenced).",
        "backend-1  | Exception in thread django-main-thread:",
        "backend-1  | Traceback (most recent call last):",
    )
    assert [m for _, _, m in got] == [
        # Postgres's own `UTC [pid] LOG:` stays (no record prefix form of ours reads it).
        "UTC [1] LOG:  database system is ready to accept connections",
        "Performing system checks...", "System check identified no issues (0 silenced).",
        "Exception in thread django-main-thread:", "Traceback (most recent call last):",
    ]
    assert got[0][1] == at(2024, 8, 9, 6, 1, 48, 826000)


def test_compose_with_logging_default_format():
    # fumiama/Retrieval-based-Voice-Conversion-WebUI#65 (`container_name: voice-clone`): Python logging's
    # `LEVEL:name:` after the compose column.
    got = split(
        "voice-clone  | INFO:Micy:loaded pretrained assets/pretrained_v2/f0G40k.pth",
        "voice-clone  | INFO:Micy:<All keys matched successfully>",
        "voice-clone  | INFO:Micy:loaded pretrained assets/pretrained_v2/f0D40k.pth",
        "voice-clone  | INFO:faiss.loader:Loading faiss with AVX2 support.",
    )
    assert [m for _, _, m in got] == [
        "loaded pretrained assets/pretrained_v2/f0G40k.pth", "<All keys matched successfully>",
        "loaded pretrained assets/pretrained_v2/f0D40k.pth", "Loading faiss with AVX2 support.",
    ]


def test_table_rows_are_not_compose_columns():
    # Near miss: a Lightning-style summary has a new index on every row (Lightning-AI docs table form).
    lines = ["0 | model | GPT  | 85.0 M", "1 | loss  | CrossEntropyLoss | 0"]
    assert [m for _, _, m in split(*lines)] == lines


# --- MPI launchers: Intel MPI / MPICH `-l`, Open MPI 5 -------------------------------------------------------

# intel/intel-extension-for-pytorch#810 (`mpirun -n 8 -l python demo.py --device xpu`, Intel MPI).
IPEX_810 = [
    "[0] [rank0]:[W416 22:45:40.723224165 reducer.cpp:69] Warning: measureDifference between two events is not supported on XPU backend! (function operator())",
    "[2] [rank2]:[W416 22:45:40.723223113 reducer.cpp:69] Warning: measureDifference between two events is not supported on XPU backend! (function operator())",
    "[3] [rank3]:[W416 22:45:40.723229753 reducer.cpp:69] Warning: measureDifference between two events is not supported on XPU backend! (function operator())",
    "[4] [rank4]:[W416 22:45:40.723227604 reducer.cpp:69] Warning: measureDifference between two events is not supported on XPU backend! (function operator())",
    "[5] [rank5]:[W416 22:45:40.723257697 reducer.cpp:69] Warning: measureDifference between two events is not supported on XPU backend! (function operator())",
    "[7] [rank7]:[W416 22:45:40.726658140 reducer.cpp:69] Warning: measureDifference between two events is not supported on XPU backend! (function operator())",
    "[1] [rank1]:[W416 22:45:40.730492019 reducer.cpp:69] Warning: measureDifference between two events is not supported on XPU backend! (function operator())",
    "[6] [rank6]:[W416 22:45:40.731073464 reducer.cpp:69] Warning: measureDifference between two events is not supported on XPU backend! (function operator())",
    "[2] My guessed r",
]


def test_intel_mpi_rank_labels():
    got = split(*IPEX_810)
    assert [r for r, _, _ in got] == [0, 2, 3, 4, 5, 7, 1, 6, 2]
    assert got[0][1:] == (at(2024, 4, 16, 22, 45, 40, 723224),
                          "Warning: measureDifference between two events is not supported on XPU backend! (function operator())")
    # The label alone gives the rank (the MPI rank, a global one).
    assert got[8] == (2, None, "My guessed r")


def test_counters_before_lines_are_not_mpi_labels():
    # Near miss: a new number on every line (a paste's line counter) is no rank label; `[80746] [rank0]:` keeps rank 0.
    lines = ["[1612] 2024-03-06T15:51:49.223750867Z {'loss': 0.076, 'learning_rate': 2e-05, 'epoch': 4.52}",
             "[1613] {'loss': 0.0789, 'learning_rate': 2e-05, 'epoch': 4.48}"]
    assert split(*lines) == [(None, None, lines[0]), (None, None, lines[1])]


def test_open_mpi_5_tag_with_namespace():
    # openpmix/prrte#1405 (`prterun --output tag hostname`): `[nspace@job,rank]<stream>: ` with a space.
    assert split(
        "[prterun-f5n18-100629@1,0]<stdout>: f5n18",
        "[prterun-f5n18-100629@1,2]<stdout>: f5n18",
        "[prterun-f5n18-100629@1,1]<stdout>: f5n17",
    ) == [(0, None, "f5n18"), (2, None, "f5n18"), (1, None, "f5n17")]


def test_open_mpi_timestamp_output_with_a_space_padded_day():
    # open-mpi/ompi#7710 (the v4.0.2 form the reporter expected).
    assert split("Thu May  7 10:39:20 2020[1,1]<stdout>:Hello, World, I am 1 of 8") == [
        (1, at(2020, 5, 7, 10, 39, 20), "Hello, World, I am 1 of 8")]


# --- torchrun's local `[defaultN]:` against a global rank, Lightning's `[rank: N]` --------------------------

def test_default_prefix_is_a_local_rank_and_yields_to_a_global_one():
    # torch/distributed/elastic/multiprocessing/tail_log.py writes `[{role}{local_rank}]:`; the excepthook's
    # `[rankN]:` is the global rank (chitu#80 line shape, thu-pacman/chitu#80, rank 1 on the second node).
    line = ("[rank1]:[E327 09:31:09.976973235 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=3313, OpType=RECV, NumelIn=18, NumelOut=18, Timeout(ms)=600000) ran for 600086 "
            "milliseconds before timing out.")
    (alone,) = split(line)
    (behind_default,) = split("[default0]:" + line)
    assert alone[0] == behind_default[0] == 1
    assert split("[default3]:step 10") == [(3, None, "step 10")]


def test_lightning_rank_prefix():
    # StrongResearch/isc-demos#15 (Lightning under torchrun).
    assert split("[rank: 4] Global seed set to 42", "[rank: 2] Global seed set to 42") == [
        (4, None, "Global seed set to 42"), (2, None, "Global seed set to 42")]


# --- record prefixes: loguru, Python logging `asctime - name - level`, SageMaker debugger, vLLM -------------

def test_loguru_default_format():
    # tests/recordings/issues/cris_19_loguru_spawn_sigkill.log (loguru's `| LEVEL | module:function:line - `).
    line = ("2023-11-29 06:51:23.492 | ERROR    | __main__:<module>:224 - An error has been caught in function "
            "'<module>', process 'MainProcess' (524921), thread 'MainThread' (22521945637824):")
    assert split(line) == [(None, at(2023, 11, 29, 6, 51, 23, 492000), line.split(" - ", 1)[1])]


def test_logging_asctime_name_level_format_and_metrics(tmp_path):
    # mmdetection log pasted in the code index (`%(asctime)s - %(name)s - %(levelname)s - %(message)s`).
    lines = [
        "2022-06-03 06:33:26,389 - mmdet - INFO - workflow: [('train', 1)], max: 4 epochs",
        "2022-06-03 06:33:38,427 - mmdet - INFO - Epoch [1][50/7517]     lr: 1.000e-02, eta: 2:00:00, time: 0.240, "
        "data_time: 0.051, memory: 2404, loss_rpn_cls: 0.1461, loss_rpn_bbox: 0.0187, loss_cls: 0.3264, acc: 95.1289, "
        "loss_bbox: 0.1275, loss: 0.6188",
    ]
    assert split(lines[0]) == [(None, at(2022, 6, 3, 6, 33, 26, 389000), "workflow: [('train', 1)], max: 4 epochs")]
    m = frame(ingest_text(tmp_path, "\n".join(lines) + "\n"), "metrics").filter(pl.col("name").is_in(["loss", "lr"]))
    assert m.select("line", "ts", "step", "name", "value").rows() == [
        (2, at(2022, 6, 3, 6, 33, 38, 427000), 50, "lr", 0.01), (2, at(2022, 6, 3, 6, 33, 38, 427000), 50, "loss", 0.6188)]


def test_sagemaker_debugger_record_prefix():
    # awslabs/sagemaker-debugger#280 and aws-samples/amazon-sagemaker-script-mode#11.
    assert split(
        "[2020-06-20 21:49:37.529 algo-1:67 INFO utils.py:25] The end of training job file will not be written for jobs running under SageMaker.",
        "[2020-08-11 09:58:34.837 ip-10-0-227-174.eu-west-1.compute.internal:22 INFO json_config.py:90] Creating hook from "
        "json_config at /opt/ml/input/config/debughookconfig.json.",
    ) == [
        (None, at(2020, 6, 20, 21, 49, 37, 529000), "The end of training job file will not be written for jobs running under SageMaker."),
        (None, at(2020, 8, 11, 9, 58, 34, 837000), "Creating hook from json_config at /opt/ml/input/config/debughookconfig.json."),
    ]


def test_vllm_record_prefix_without_year():
    # The journald log above (vLLM 0.15) and vllm-project/vllm#15784 (older, no brackets); the year is the caller's.
    assert split(
        "(EngineCore_DP0 pid=3361) INFO 02-22 06:35:41 [parallel_state.py:1423] rank 0 in world size 1 is assigned as "
        "DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank N/A",
        "ERROR 03-30 23:51:21 multiproc_worker_utils.py:243] KeyError: 'layers.32.self_attn.qkv_proj.k_scale'",
    ) == [
        (None, at(2024, 2, 22, 6, 35, 41),
         "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank N/A"),
        (None, at(2024, 3, 30, 23, 51, 21), "KeyError: 'layers.32.self_attn.qkv_proj.k_scale'"),
    ]


# --- Windows line endings --------------------------------------------------------------------------------------

def test_crlf_lines_behind_collector_stamps(tmp_path):
    # The k8s job log above written with CRLF endings (a log saved on Windows): values and stamps unchanged.
    text = "\r\n".join([
        "2024-03-06T15:50:09.814279635Z {'loss': 0.0585, 'learning_rate': 2e-05, 'epoch': 4.45}",
        "2024-03-06T15:50:59.519041650Z {'loss': 0.0789, 'learning_rate': 2e-05, 'epoch': 4.48}",
    ]) + "\r\n"
    m = frame(ingest_text(tmp_path, text), "metrics").filter(pl.col("name") == "epoch")
    assert m.select("line", "ts", "value").rows() == [
        (1, at(2024, 3, 6, 15, 50, 9, 814279), 4.45), (2, at(2024, 3, 6, 15, 50, 59, 519041), 4.48)]


def test_srun_labels_before_torch_launcher_records():
    # awslabs/awsome-distributed-ai#1039 (`srun -l` over torchrun, two nodes): the task label is cut, not kept.
    got = split(
        "1: [2026-03-26 07:40:32,367] torch.distributed.launcher.api: [INFO]   rdzv_configs     : {'timeout': 900}",
        "1: [2026-03-26 07:40:32,367] torch.distributed.launcher.api: [INFO]   max_restarts     : 0",
        "0: [2026-03-26 07:40:32,595] torch.distributed.elastic.agent.server.api: [INFO]   restart_count=0",
        "0: [2026-03-26 07:40:32,595] torch.distributed.elastic.agent.server.api: [INFO] [default] Rendezvous complete for workers. Result:",
    )
    assert got == [
        (None, at(2026, 3, 26, 7, 40, 32, 367000), "rdzv_configs     : {'timeout': 900}"),
        (None, at(2026, 3, 26, 7, 40, 32, 367000), "max_restarts     : 0"),
        (None, at(2026, 3, 26, 7, 40, 32, 595000), "restart_count=0"),
        (None, at(2026, 3, 26, 7, 40, 32, 595000), "[default] Rendezvous complete for workers. Result:"),
    ]

"""Playbooks end to end (ingest + analyze) on real lines of several sources combined: which finding
outranks which (shm vs fd limit, Slurm stops, allocator cache flushes, NaN scalars, gloo barriers and NCCL
dump signals, accelerate's batch-size finder), and the near misses that stay quiet.

Single-thread incidents live in tests/recordings/incidents (INCIDENTS.toml); each line here names its source.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.conftest import ROOT
from tests.helpers import write_run

INCIDENTS = ROOT / "tests" / "recordings" / "incidents"
SAMPLES = ROOT / "sample_logs"

# Real lines (sources in the comments).
# ML-GSAI/SMDM#3: EMFILE while opening a DataLoader worker's shared-memory segment.
SHM_EMFILE = "RuntimeError: unable to open shared memory object </torch_710863_755204907_419> in read-write mode: Too many open files (24)"
# idiap/ESLAM#20: ENOSPC writing a segment into a full /dev/shm.
SHM_ENOSPC = "RuntimeError: unable to write to file </torch_31911_952036340_6686>: No space left on device (28)"
# nextflow-io/nextflow#5932: srun's report of a task the cgroup OOM killer ended.
SRUN_OOM = "srun: error: sdumont6156: task 0: Out Of Memory"
# ArjunaCluster/ArjunaUsers#48: srun's report of a task ended by SIGKILL.
SRUN_KILLED = "srun: error: c002: task 0: Killed"
# lyulyul/shine-cluster#4: a step cancelled without a reason (scancel / session closed).
STEP_CANCELLED = "slurmstepd-localhost: error: *** STEP 204.0 ON localhost CANCELLED AT 2021-02-13T16:38:01 ***"
# huggingface/peft#194 (the paste lost the stamp's `[`) and jzhang38/EasyContext#11: DeepSpeed ZeRO-3 flushes.
FLUSH = ("[2024-04-08 13:02:16,577] [WARNING] [stage3.py:2069:step] 27 pytorch allocator cache flushes since last step. this happens "
         "when there is high memory pressure and is detrimental to performance. if this is happening frequently consider adjusting "
         "settings to reduce memory consumption. If you are unable to make the cache flushes go away consider adding "
         "get_accelerator().empty_cache() calls in your training loop to ensure that all ranks flush their caches at the same time")
# tests/cases/signatures/nccl_dump_signal.toml (pytorch >= 2.4 ProcessGroupNCCL, OBS code index logs): a peer's timeout relayed to rank 6.
DUMP_SIGNAL = ("[rank6]:[E703 21:51:54.112142364 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 6] Received a dump "
               "signal due to a collective timeout from  rank 7 and we will try our best to dump the debug info. Last enqueued NCCL "
               "work: 56116, last completed NCCL work: 56115.This is most likely caused by incorrect usages of collectives, e.g., "
               "wrong sizes used across ranks, the order of collectives is not same for all ranks or the scheduled collective, for "
               "some reason, didn't run. Additionally, this can be caused by GIL deadlock or other reasons such as network errors or "
               "bugs in the communications library (e.g. NCCL), etc. ")


def run_of(tmp_path: Path, files: dict[str, str]) -> Analysis:
    return analyze(Context(ingest(write_run(tmp_path, files))))


def problems(a: Analysis) -> list:
    return [f for f in a.findings if f.severity > Severity.INFO]


def finding(a: Analysis, pid: str):
    return next(f for f in a.findings if f.id == pid)


def cited(f) -> set[str]:
    return {f"{e.file}:{e.line}" for e in f.evidence}


# --- shared memory vs open-file limit -----------------------------------------------------------------


def test_shm_full_and_fd_limit_are_ranked_as_two_causes_each_with_its_own_line(tmp_path):
    a = run_of(tmp_path, {"train.log": f"epoch 1\n{SHM_ENOSPC}\n{SHM_EMFILE}\n"})
    top = problems(a)[0]
    assert top.id == "host-memory-exhaustion" and top.root_cause
    causes = {c.cause.id: c for c in top.causes}
    assert set(causes) == {"small_shm", "fd_limit"}  # neither worker count nor dataset size: nothing says RAM ran out
    assert [(e.file, e.line) for e in causes["small_shm"].evidence] == [("train.log", 2)]
    assert [(e.file, e.line) for e in causes["fd_limit"].evidence] == [("train.log", 3)]
    assert top.summary.startswith("shared memory (/dev/shm) exhausted")


def test_fd_limit_alone_is_not_called_a_full_shm(tmp_path):
    a = run_of(tmp_path, {"train.log": SHM_EMFILE + "\n"})
    top = problems(a)[0]
    assert [c.cause.id for c in top.causes] == ["fd_limit"]
    assert "open-file limit" in top.summary and "/dev/shm" not in top.summary
    assert cited(top) == {"train.log:1"}


def test_too_many_open_files_from_the_loader_is_the_fd_limit_not_memory(tmp_path):
    # formats.md §2.3 [SRC torch/utils/data/dataloader.py]; yzhangcs/NeuralRecon#91: the open-file limit, not RAM or /dev/shm
    line = ("RuntimeError: Too many open files. Communication with the workers is no longer possible. Please increase the limit "
            "using `ulimit -n` in the shell or change the sharing strategy by calling "
            "`torch.multiprocessing.set_sharing_strategy('file_system')` at the beginning of your code")
    found = problems(run_of(tmp_path, {"train.log": line + "\n"}))
    assert [f.id for f in found] == ["unclassified-failure"]
    assert cited(found[0]) == {"train.log:1"}


# --- Slurm: an OOM status is host memory; cancellations and the task reports after them are not failures ----


def test_srun_out_of_memory_status_is_a_host_oom(tmp_path):
    a = run_of(tmp_path, {"slurm.out": f"step 10 loss 2.31\n{SRUN_OOM}\n"})
    top = problems(a)[0]
    assert (top.id, top.causes[0].cause.id, top.confidence) == ("host-memory-exhaustion", "too_many_workers", 0.9)
    assert cited(top) == {"slurm.out:2"}


def test_srun_bus_error_status_points_at_shm(tmp_path):
    # srun's task status list (Slurm's strsignal text), as matched by the slurm_task_failed signature
    top = problems(run_of(tmp_path, {"slurm.out": "srun: error: node17: task 3: Bus error\n"}))[0]
    assert (top.id, top.causes[0].cause.id) == ("host-memory-exhaustion", "small_shm")


def test_sigkill_after_a_scancel_is_the_schedulers_not_an_oom(tmp_path):
    alone = problems(run_of(tmp_path / "a", {"console.log": SRUN_KILLED + "\n"}))
    assert [f.id for f in alone] == ["host-memory-exhaustion"] and alone[0].confidence == 0.4
    after_cancel = run_of(tmp_path / "b", {"console.log": f"{STEP_CANCELLED}\n{SRUN_KILLED}\n"})
    assert problems(after_cancel) == []


def _hang_run(tmp_path: Path, cancelled_at: str, status: str) -> Path:
    """The recorded silent-hang ranks (every rank stops at step 150, 05:47:08) with a Slurm stop instead of torchrun's."""
    root = tmp_path / "run"
    root.mkdir(parents=True)
    for p in sorted((SAMPLES / "silent-hang" / "blocked-loader").glob("rank*.log")):
        shutil.copy(p, root / p.name)
    # Formats: slurmstepd's cancellation (Nextomics/NextDenovo#114) and srun's task report (desihub/desitarget#628).
    (root / "slurm-867816.out").write_text(
        f"slurmstepd: error: *** STEP 867816.0 ON c0700a-s1 CANCELLED AT {cancelled_at} DUE TO TIME LIMIT ***\n"
        f"srun: error: c0700a-s1: tasks 0-3: {status}\n", encoding="utf-8")
    return root


def test_time_limit_after_a_long_silence_is_a_hang_stamped_by_slurmstepd(tmp_path):
    a = analyze(Context(ingest(_hang_run(tmp_path, "2026-11-22T05:53:26", "Terminated"))))
    top = problems(a)[0]
    assert top.id == "silent-hang" and top.root_cause
    assert top.onset.step == 150
    assert "slurm-867816.out:1" in cited(top)
    assert "6 min" in top.summary and "CANCELLED AT 2026-11-22T05:53:26 DUE TO TIME LIMIT" in top.summary
    assert "host-memory-exhaustion" not in {f.id for f in problems(a)}


def test_time_limit_while_progress_goes_on_is_no_failure(tmp_path):
    # Cancelled a second after the last step: the limit was too short, nothing hung or crashed; the
    # SIGKILLed tasks are the scheduler's doing.
    a = analyze(Context(ingest(_hang_run(tmp_path, "2026-11-22T05:47:09", "Killed"))))
    assert problems(a) == []


# --- allocator cache flushes: memory pressure, never over a real OOM ---------------------------------------


def test_cache_flushes_alone_are_low_memory_pressure(tmp_path):
    a = run_of(tmp_path, {"train.log": f"{FLUSH}\n"})
    (f,) = problems(a)
    assert (f.id, f.severity, f.causes[0].cause.id) == ("allocator-fragmentation", Severity.LOW, "allocator_caching")
    assert f.facts["max_per_step"] == 27 and cited(f) == {"train.log:1"}


def test_cache_flushes_do_not_outrank_a_demand_oom(tmp_path):
    # CADS#4's OOM: 22.78 GiB requested, more than free plus reserved-but-unallocated: demand.
    oom = (INCIDENTS / "cads_4_oom_demand_above_free_plus_reserved" / "console.log").read_text(encoding="utf-8")
    a = run_of(tmp_path, {"console.log": f"{FLUSH}\n{FLUSH.replace('27 pytorch', '31 pytorch')}\n{oom}"})
    top = problems(a)[0]
    assert (top.id, top.causes[0].cause.id) == ("cuda-oom", "demand_above_capacity")
    assert top.root_cause and "console.log:3" in cited(top)
    assert "allocator-fragmentation" not in {f.id for f in a.findings}


def test_cache_flushes_rank_memory_pressure_first_for_slower_steps(tmp_path):
    # Megatron iteration lines (NVIDIA/Megatron-LM#756 format) whose step time rises, with ZeRO-3 flush warnings.
    lines = []
    for i in range(1, 41):
        ms = 1000.0 + 40.0 * i
        lines.append(f" iteration {i:8d}/     100 | consumed samples: {i * 128:12d} | elapsed time per iteration (ms): {ms:.1f} | "
                     f"learning rate: 8.600000E-06 | global batch size:   128 | lm loss: 1.825991E+00 | loss scale: 1.0 | "
                     f"grad norm: 1.426 | number of skipped iterations:   0 | number of nan iterations:   0 |")
        if i % 10 == 0:
            lines.append(FLUSH)
    a = run_of(tmp_path, {"train.log": "\n".join(lines) + "\n"})
    st = finding(a, "step-time-regression")
    assert st.causes[0].cause.id == "memory_pressure"
    assert [e.line for e in st.causes[0].evidence][:2] == [11, 22]
    assert finding(a, "allocator-fragmentation").severity == Severity.MEDIUM  # four reports


# --- NaN scalars: TensorBoard's warning and Megatron's rerun state machine --------------------------------


def test_tensorboard_nan_warning_without_any_loss_is_a_weak_nan_finding(tmp_path):
    # facebookresearch/fairseq#1529; a warning without a non-finite loss value stays low (wenet#1472)
    a = run_of(tmp_path, {"train.log": "2020-10-01 10:25:50 | WARNING | root | NaN or Inf found in input tensor.\n"})
    assert not problems(a)
    (f,) = a.findings
    assert (f.id, f.severity, f.confidence) == ("nan-loss", Severity.INFO, 0.4)
    assert cited(f) == {"train.log:1"}


def test_megatron_rerun_nan_result_is_a_nan_loss_but_a_spiky_loss_is_not(tmp_path):
    nan = "RuntimeError: Rank 2, node gpu-17, device 2, iteration 1200: Unexpected result nan (message='found NaN in local forward loss calculation')"
    (f,) = problems(run_of(tmp_path / "a", {"train.log": nan + "\n"}))
    assert (f.id, f.onset.step, f.onset.rank) == ("nan-loss", 1200, 2)
    # formats.md §1.2 rerun state machine, second form, with its `Spiky loss` message (a finite value)
    spiky = "Unexpected result 12.734 on rank 4 at iteration #77 invocation #1 (message='Spiky loss')"
    assert "nan-loss" not in {f.id for f in problems(run_of(tmp_path / "b", {"train.log": spiky + "\n"}))}


# --- distributed: gloo's monitored barrier and NCCL dump signals ----------------------------------------


def test_gloo_monitored_barrier_names_the_rank_that_never_came(tmp_path):
    # Recorded here (tests/recordings/events/torchrun_plain): rank 1 raised, rank 0's monitoredBarrier failed.
    a = analyze(Context(ingest(ROOT / "tests" / "recordings" / "events" / "torchrun_plain")))
    top = problems(a)[0]
    assert (top.id, top.causes[0].cause.id) == ("nccl-timeout", "peer_died_first")
    assert top.facts["barrier_absent_ranks"] == [1]
    assert "console.log:18" in cited(top)


def test_dump_signal_is_a_relayed_collective_timeout(tmp_path):
    top = problems(run_of(tmp_path, {"rank6.log": DUMP_SIGNAL + "\n"}))[0]
    assert (top.id, top.onset.rank) == ("nccl-timeout", 6)
    assert top.summary.startswith("collective timeout on rank 6")


# --- accelerate's batch-size finder: a caught OOM elsewhere must not lower it -------------------------------


def test_batch_finder_reaching_zero_stays_critical_after_caught_ooms(tmp_path):
    # fairseq's OOM skip (facebookresearch/fairseq#103 incident) and accelerate's finder giving up (ChatLM-mini-Chinese#40).
    skipped = (INCIDENTS / "fairseq_103_oom_skipping_batch_continues").iterdir().__next__().read_text(encoding="utf-8")
    a = run_of(tmp_path, {"train.log": skipped + "RuntimeError: No executable batch size found, reached zero\n"})
    top = problems(a)[0]
    assert (top.id, top.severity, top.causes[0].cause.id) == ("cuda-oom", Severity.CRITICAL, "demand_above_capacity")


def test_store_client_giving_up_is_read_but_its_retries_are_not(tmp_path):
    # Recorded here (tests/recordings/events/store_connect_refused.log, torch 2.13): no TCPStore server.
    root = write_run(tmp_path, {"store.log": (ROOT / "tests" / "recordings" / "events" / "store_connect_refused.log").read_text(encoding="utf-8")})
    top = problems(analyze(Context(ingest(root))))[0]
    assert top.id == "nccl-timeout" and top.onset.line == 1
    assert "store.log:1" in cited(top) and "store.log:2" not in cited(top)  # line 2: `- retrying (try=0, …)`


def test_tasks_killed_after_another_task_failed_are_its_consequence(tmp_path):
    # srun --kill-on-bad-exit: the first failure (facebookincubator/submitit#1708's report) makes srun SIGKILL the
    # remaining tasks (ArjunaCluster/ArjunaUsers#48's report form); the kill is not a host OOM.
    a = run_of(tmp_path, {"slurm.out": "srun: error: SERVER_NAME: tasks 2-3: Exited with exit code 1\n" + SRUN_KILLED + "\n"})
    assert "host-memory-exhaustion" not in {f.id for f in a.findings}


def _issue_run(tmp_path: Path, *names: str) -> Analysis:
    run = tmp_path / "run"
    run.mkdir()
    for name in names:
        shutil.copy(ROOT / "tests" / "recordings" / "issues" / name, run / name)
    return analyze(Context(ingest(run)))


def test_amdgpu_ring_timeout_is_a_gpu_fault_of_middling_confidence(tmp_path):
    # yshui/picom#1390: `[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, ...` then a GPU reset.
    a = _issue_run(tmp_path, "picom_1390_amdgpu_job_timedout.log")
    top = problems(a)[0]
    assert (top.id, top.causes[0].cause.id, top.confidence) == ("gpu-hardware-fault", "failing_gpu", 0.7)
    assert "ring gfx_0.0.0 timeout" in top.summary


def test_amdgpu_page_fault_is_read_as_the_programs_fault_not_the_hardwares(tmp_path):
    # ROCm/legacy-rocm-build#5051: HSA's `Memory access fault by GPU node-1` with the kernel's gfxhub page fault.
    a = _issue_run(tmp_path, "rocm_5051_hsa_fault_and_gfxhub.log")
    hw = finding(a, "gpu-hardware-fault")
    assert (hw.severity, hw.confidence) == (Severity.MEDIUM, 0.5)
    assert problems(a)[0].id == "device-assert"


def test_fullgraph_graph_break_error_stops_the_run(tmp_path):
    # The dynamo_graph_break form of signatures.toml (OBS pytorch/pytorch#125138, #146525): under fullgraph=True
    # a graph break is raised, and the run ends in it.
    tb = ("step 10 loss 2.3010\n"
          "Traceback (most recent call last):\n"
          '  File "train.py", line 88, in <module>\n'
          "    out = compiled(batch)\n"
          "torch._dynamo.exc.Unsupported: Failed to trace builtin operator\n")
    a = run_of(tmp_path, {"train.log": tb})
    top = problems(a)[0]
    assert (top.id, top.causes[0].cause.id, top.severity > Severity.LOW, top.confidence) == (
        "compile-recompilation", "graph_breaks", True, 0.9)
    assert "stopped at a graph break" in top.summary


def test_state_dict_size_mismatch_is_a_checkpoint_of_another_model(tmp_path):
    # mbrossar/ai-imu-dr#75: load_state_dict of a checkpoint trained with other layer sizes.
    a = _issue_run(tmp_path, "ai_imu_dr_75_state_dict_size_mismatch.log")
    top = problems(a)[0]
    assert (top.id, top.causes[0].cause.id) == ("checkpoint-failure", "model_mismatch")
    assert top.summary.startswith("checkpoint load failed")
    assert top.evidence[0].line == 1

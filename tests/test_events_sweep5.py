"""Sweep 5 of real error logs from public issue threads: HF/accelerate runtime errors, DDP unused parameters and
collective mismatches, torch.compile failures, native crashes, kernel OOM-killer lines, launcher and signal exits
(tests/recordings/issues, sources in SOURCES.md): codes, lines, ranks and fields of their events."""

from __future__ import annotations

import json

import polars as pl
from forensics.parsers.prefixes import split_prefixes

from tests.test_events_sweep_threads import codes
from tests.test_signatures import events_of
from tests.test_signatures_issues import ingest_issue, rows

# --- HF / accelerate runtime errors ------------------------------------------------------------


def test_cogvideo_775_unscale_fp16_inside_accelerate(tmp_path):
    ev = ingest_issue(tmp_path, "cogvideo_775_unscale_fp16.log")
    assert codes(ev) == [(1, "python_traceback"), (18, "gradscaler_misuse")]
    assert rows(ev, "gradscaler_misuse", "detail") == [(18, None, "Attempting to unscale FP16 gradients")]
    assert rows(ev, "python_traceback", "exc_type", "function") == [(1, None, "ValueError", "_unscale_grads_")]


def test_diffusers_131_traceback_glued_after_tqdm(tmp_path):
    ev = ingest_issue(tmp_path, "diffusers_131_tqdm_glued_unscale.log")
    assert codes(ev) == [(1, "python_traceback"), (14, "gradscaler_misuse")]
    assert ev.filter(pl.col("code") == "python_traceback").get_column("end_line").to_list() == [14]


def test_yolox_885_unused_parameters_numbered_wording(tmp_path):
    ev = ingest_issue(tmp_path, "yolox_885_unused_params_1_2.log")
    assert codes(ev) == [(1, "ddp_unused_parameters")]


def test_tensorflow_9489_cublas_handle_lines(tmp_path):
    ev = ingest_issue(tmp_path, "tensorflow_9489_cublas_handle.log")
    assert rows(ev, "cublas_error", "status") == [(i, None, "CUBLAS_STATUS_NOT_INITIALIZED") for i in (1, 2, 3)]


# --- DDP collectives -----------------------------------------------------------------------------


def test_speechbrain_2401_collective_mismatch_then_torchrun(tmp_path):
    ev = ingest_issue(tmp_path, "speechbrain_2401_collective_mismatch.log")
    assert codes(ev) == [(2, "collective_mismatch"), (3, "torchrun_child_failed")]
    assert rows(ev, "collective_mismatch", "op", "other_rank", "other_op", "seq") == [(2, 1, "ALLREDUCE", "0", "BROADCAST", "485")]
    diff = json.loads(ev.filter(pl.col("code") == "collective_mismatch").item(0, "fields"))["differences"]
    assert diff.startswith("Op type: ALLREDUCEvs BROADCAST")


def test_pytorch_148976_mismatch_inside_torchrun_report(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_148976_barrier_mismatch_report.log")
    assert rows(ev, "collective_mismatch", "op", "seq", "other_rank", "other_seq") == [(23, 1, "BARRIER", "1", "2", "0")]


# --- torch.compile ------------------------------------------------------------------------------


def test_thunder_2682_recompile_limit_block(tmp_path):
    ev = ingest_issue(tmp_path, "thunder_2682_recompile_limit.log")
    assert codes(ev) == [(1, "dynamo_recompile_limit"), (3, "dynamo_recompile_reason")]
    assert rows(ev, "dynamo_recompile_limit", "limit_name", "limit", "frame_id", "function", "location") == [
        (1, None, "recompile_limit", "8", "0", "foo", "/opt/pytorch/lightning-thunder/test_thunder_recompile.py:4")]
    # The `function:` line is part of the warning.
    assert ev.filter(pl.col("code") == "dynamo_recompile_limit").get_column("end_line").to_list() == [2]
    assert rows(ev, "dynamo_recompile_reason", "reason")[0][2].startswith("0/7: y == 7")


def test_pytorch_167504_recompile_limit_names_forward(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_167504_recompile_limit_type_id.log")
    assert codes(ev) == [(1, "dynamo_recompile_limit"), (3, "dynamo_recompile_reason")]
    assert rows(ev, "dynamo_recompile_limit", "function", "location") == [(1, None, "forward", "/data/users/shangdiy/pytorch/test.py:30")]
    assert "___check_type_id" in rows(ev, "dynamo_recompile_reason", "reason")[0][2]


def test_recompile_limit_without_function_line_keeps_one_line():
    ev = events_of("torch._dynamo hit config.cache_size_limit (8)", "some unrelated line: function: 'x' (y)")
    row = ev.filter(pl.col("code") == "dynamo_recompile_limit").row(0, named=True)
    # The next line does not start with `function: '...' (...)`: it is not taken.
    assert row["end_line"] == 1 and "function" not in json.loads(row["fields"])


def test_pytorch_163329_fail_on_recompile_limit_hit(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_163329_fail_on_recompile_one_graph.log")
    assert codes(ev) == [(9, "dynamo_recompile_limit")]
    assert rows(ev, "dynamo_recompile_limit", "limit_name", "mode", "form") == [(9, None, "recompile_limit", "one_graph", "exception")]
    assert ev.get_column("severity").to_list() == ["error"]


def test_infinity_31_backend_compiler_failed(tmp_path):
    ev = ingest_issue(tmp_path, "infinity_31_backend_compiler_failed.log")
    assert codes(ev) == [(5, "torch_compile_failed")]
    assert rows(ev, "torch_compile_failed", "exc", "backend") == [(5, None, "BackendCompilerFailed", "inductor")]


def test_compile_failure_forms_and_near_misses():
    ev = events_of(
        "torch._inductor.exc.InductorError: RuntimeError: Failed to find C compiler.",
        "torch._dynamo.exc.Unsupported: Failed to trace builtin operator",
        "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True. Excessive recompilations",
        "torch._dynamo.exc.BackendCompilerFailed: debug_wrapper raised RuntimeError: Triton Error [CUDA]: invalid argument",
    ).sort("line")
    assert ev.select("line", "code").rows() == [(1, "torch_compile_failed"), (2, "dynamo_graph_break"),
                                                (3, "dynamo_recompile_limit"), (4, "torch_compile_failed")]
    f = [json.loads(x) for x in ev.get_column("fields")]
    assert (f[0]["exc"], f[0]["inner"], f[0]["detail"]) == ("InductorError", "RuntimeError", "Failed to find C compiler.")
    assert f[1]["reason"] == "Failed to trace builtin operator"
    assert f[2]["mode"] == "fullgraph"
    assert (f[3]["exc"], f[3]["inner"]) == ("BackendCompilerFailed", "RuntimeError")
    # Source lines and the names alone are not failures.
    assert events_of(
        "    raise BackendCompilerFailed(self.compiler_fn, e) from e",
        "        with self.assertRaises(Unsupported):",
        "If recompilations are expected, consider increasing torch._dynamo.config.cache_size_limit",
    ).filter(pl.col("code").is_in(["torch_compile_failed", "dynamo_graph_break", "dynamo_recompile_limit"])).height == 0


# --- kernel OOM killer ---------------------------------------------------------------------------


def test_autovod_7_dmesg_t_sizes_with_digit_grouping(tmp_path):
    ev = ingest_issue(tmp_path, "autovod_7_dmesg_t_commas.log")
    assert codes(ev) == [(1, "process_killed"), (7, "host_oom_killed")]
    assert rows(ev, "host_oom_killed", "pid", "process", "total_vm", "anon_rss", "kernel_time") == [
        (7, None, "7899", "python", "26,184,840kB", "153,700,88kB", "Sun Mar 30 08:24:00 2025")]


def test_openbmc_1887_old_kernel_killed_process_line(tmp_path):
    ev = ingest_issue(tmp_path, "openbmc_1887_killed_process_old.log")
    assert codes(ev) == [(1, "host_oom_killed")]
    assert rows(ev, "host_oom_killed", "pid", "process", "total_vm", "anon_rss", "uptime_s", "form") == [
        (1, None, "935", "python", "113656kB", "102104kB", "4018.450000", "killed_line")]


def test_docker_1001_journal_kernel_lines_and_a_name_in_parentheses(tmp_path):
    ev = ingest_issue(tmp_path, "docker_1001_journal_oom.log")
    assert codes(ev) == [(1, "host_oom_killed"), (3, "host_oom_killed")]
    assert rows(ev, "host_oom_killed", "pid", "process", "anon_rss") == [
        (1, None, "15784", "python3", "4288kB"), (3, None, "15925", "(resolved)", "4064kB")]


def test_ert_7797_dmesg_iso_one_event_per_kill(tmp_path):
    ev = ingest_issue(tmp_path, "ert_7797_dmesg_iso_oom.log")
    # The `oom-kill:constraint=` summary and `oom_reaper` lines restate the kill: no event of their own.
    assert codes(ev) == [(2, "process_killed"), (7, "host_oom_killed")]
    assert rows(ev, "host_oom_killed", "pid", "process", "anon_rss") == [(7, None, "1440763", "perl", "60356340kB")]
    # `dmesg --time-format iso` stamps (comma before the fraction, with a zone) give the event's UTC time.
    ts = ev.filter(pl.col("code") == "host_oom_killed").item(0, "ts")
    assert (ts.hour, ts.minute, ts.second, ts.microsecond) == (12, 55, 41, 679700)
    df = split_prefixes(pl.DataFrame({"text": ["2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1 (x)",
                                               "2024-04-29T14:55:41,679700+02:00 - INFO - a program's own stamp"]}), 2024)
    assert df.get_column("msg").to_list()[0] == "Out of memory: Killed process 1 (x)"
    assert df.get_column("msg").to_list()[1] == "a program's own stamp"


def test_bigbang_494_killed_under_a_progress_bar(tmp_path):
    ev = ingest_issue(tmp_path, "bigbang_494_tqdm_killed_oom.log")
    assert codes(ev) == [(2, "process_killed"), (3, "host_oom_killed")]
    assert rows(ev, "host_oom_killed", "pid", "total_vm") == [(3, None, "10245", "3983576kB")]


def test_terrariumpi_155_old_kernel_pair_is_one_kill(tmp_path):
    """`Out of memory: Kill process N ... or sacrifice child` then `Killed process N ... total-vm`: one event."""
    ev = ingest_issue(tmp_path, "terrariumpi_155_old_kill_process_wrapped.log")
    assert codes(ev) == [(2, "host_oom_killed")]
    assert ev.get_column("end_line").to_list() == [3]
    assert rows(ev, "host_oom_killed", "pid", "process", "total_vm", "anon_rss", "uptime_s") == [
        (2, None, "6155", "python", "1054044kB", "832856k", "86120.080672")]


def test_killed_process_near_misses():
    assert events_of(
        "[ 4022.980000] oom_reaper: reaped process 935 (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
        "INFO: Killed process group of the data server",
        "The trainer Killed process 12 (python) total-vm:1kB, anon-rss:1kB",
    ).filter(pl.col("code") == "host_oom_killed").height == 0


# --- native crashes ------------------------------------------------------------------------------


def test_tnt_33_segfault_glued_after_tqdm(tmp_path):
    ev = ingest_issue(tmp_path, "tnt_33_tqdm_glued_segfault.log")
    assert rows(ev, "shell_signal_exit", "signal") == [(1, None, "Segmentation fault")]


def test_unet_193_zsh_lowercase_segfault(tmp_path):
    ev = ingest_issue(tmp_path, "unet_193_lowercase_segfault.log")
    assert codes(ev) == [(2, "shell_signal_exit")]
    assert rows(ev, "shell_signal_exit", "signal", "form") == [(2, None, "segmentation fault", "zsh")]


def test_zsh_job_form_keeps_pid_and_command():
    ev = events_of("[1]    5606 segmentation fault  python sig_segv.py", "zsh: bus error (core dumped)  python train.py")
    f = [json.loads(x) for x in ev.sort("line").get_column("fields")]
    assert (f[0]["pid"], f[0]["signal"], f[0]["command"]) == ("5606", "segmentation fault", "python sig_segv.py")
    assert (f[1]["signal"], f[1]["command"]) == ("bus error", "python train.py")
    # Prose that mentions a crash is not one.
    assert events_of("I get a segmentation fault when training", "fixed segmentation fault in loader",
                     "100%|██████| 3/3 [00:00<00:00] Segmentation fault handler installed").filter(
        pl.col("code") == "shell_signal_exit").height == 0


def test_paddle_fatal_error_summary_not_a_python_traceback(tmp_path):
    ev = ingest_issue(tmp_path, "pdfextract_74_paddle_segv.log")
    # `C++ Traceback (most recent call last):` heads Paddle's C++ frames, not a Python traceback.
    assert codes(ev) == [(9, "shell_signal_exit"), (13, "shell_signal_exit")]
    assert rows(ev, "shell_signal_exit", "signal", "form") == [(9, None, "Segmentation fault", "paddle"),
                                                               (13, None, "Segmentation fault", None)]
    ev = ingest_issue(tmp_path / "b", "paddleocr_11857_fatal_sigterm.log")
    assert rows(ev, "shell_signal_exit", "signal", "form") == [(8, None, "Termination signal", "paddle")]


# --- launchers, signals, timeouts ---------------------------------------------------------------


def test_deepspeed_sigkill_handler_keeps_the_command(tmp_path):
    ev = ingest_issue(tmp_path, "deepspeed_3232_sigkill_handler.log")
    row = ev.filter(pl.col("code") == "deepspeed_launcher_exit").row(0, named=True)
    f = json.loads(row["fields"])
    assert (f["exitcode"], f["local_rank"]) == ("-9", "0")
    assert f["cmd"].startswith("'/usr/bin/python3', '-u', 'main.py', '--local_rank=0'")
    assert row["message"].startswith("['/usr/bin/python3', '-u', 'main.py'") and row["message"].endswith("exits with return code = -9")
    assert row["ts"] is not None


def test_prefix_bracket_run_stops_at_a_python_list_only():
    df = split_prefixes(pl.DataFrame({"text": [
        "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['python', '-u', 'a.py'] exits with return code = 1",
        '[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ["python", "a.py"] exits with return code = 1',
        "[2023-04-14 13:11:27,885] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0",
        "[2023-04-14 13:11:27,885] [INFO] [config.py:1:print] [] empty bracket run",
    ]}), 2023)
    assert df.get_column("msg").to_list() == [
        "['python', '-u', 'a.py'] exits with return code = 1",
        '["python", "a.py"] exits with return code = 1',
        "step=10, skipped=0",
        "empty bracket run",
    ]
    assert df.get_column("rank").to_list() == [None, None, 0, None]


def test_rrhf_35_sighup_death_signal(tmp_path):
    ev = ingest_issue(tmp_path, "rrhf_35_sighup_death_signal.log")
    assert codes(ev) == [(1, "torchrun_death_signal"), (2, "torchrun_closing_worker"), (3, "torchrun_death_signal")]
    assert rows(ev, "torchrun_death_signal", "signal", "pid") == [(1, None, "1", None), (3, None, "1", "2920830")]


def test_instructglm_3_watchdog_without_record_prefix(tmp_path):
    ev = ingest_issue(tmp_path, "instructglm_3_bare_watchdog.log")
    assert rows(ev, "nccl_watchdog_timeout", "seq", "op", "timeout_ms", "elapsed_ms") == [
        (1, None, "49", "ALLREDUCE", "18000000", "18005607")]


def test_pytorch_68643_dataloader_timed_out(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_68643_dataloader_timed_out.log")
    assert codes(ev) == [(1, "python_traceback"), (3, "dataloader_timeout")]
    assert rows(ev, "dataloader_timeout", "timeout_s") == [(3, None, "5")]


# --- more kernel OOM forms, native crashes, NPU, accelerate -----------------------------------------


def test_doris_3525_memcg_sacrifice_child_merges_the_killed_child(tmp_path):
    """RHEL 7: `Kill process A ... or sacrifice child`, then `Killed process B (x), UID 0, total-vm:...` (a child)."""
    ev = ingest_issue(tmp_path, "doris_3525_memcg_sacrifice_child_uid.log")
    assert codes(ev) == [(1, "host_oom_killed")]
    assert ev.get_column("end_line").to_list() == [2]
    assert rows(ev, "host_oom_killed", "cgroup", "pid", "killed_pid", "killed_process", "total_vm", "anon_rss") == [
        (1, None, "Memory cgroup ", "24984", "18177", "palo_be", "70347780kB", "45563572kB")]


def test_reportportal_203_memcg_then_oom_killer_call_trace(tmp_path):
    ev = ingest_issue(tmp_path, "reportportal_203_memcg_dmesg.log")
    # `invoked oom-killer` and the kernel call trace are context of a kill, not kills.
    assert codes(ev) == [(1, "host_oom_killed")]
    assert rows(ev, "host_oom_killed", "pid", "process", "anon_rss", "uptime_s") == [
        (1, None, "63214", "uwsgi", "164992kB", "7063.247407")]


def test_pytorch_12857_illegal_instruction_after_repl(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_12857_repl_illegal_instruction.log")
    assert rows(ev, "shell_signal_exit", "signal") == [(4, None, "Illegal instruction")]


def test_pytorch_2617_macos_signal_number(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_2617_macos_illegal_instruction_4.log")
    assert rows(ev, "shell_signal_exit", "signal", "signal_number") == [(2, None, "Illegal instruction", "4")]
    assert events_of("Illegal instruction: see the docs", "Segmentation fault: 11 occurred twice").height == 0


def test_lightning_20231_oom_message_cut_at_gpu(tmp_path):
    ev = ingest_issue(tmp_path, "lightning_20231_oom_cut_then_tqdm.log")
    assert rows(ev, "cuda_oom", "requested", "form") == [(3, None, "13.85 GiB", "unparsed")]


def test_mathneuro_3_ipython_source_of_find_executable_batch_size_is_not_an_event(tmp_path):
    ev = ingest_issue(tmp_path, "mathneuro_3_find_batch_size_source.log")
    assert ev.filter(pl.col("code") == "accelerate_no_batch_size").height == 0


def test_touchnet_100_npu_bracket_oom(tmp_path):
    ev = ingest_issue(tmp_path, "touchnet_100_npu_oom.log")
    assert codes(ev) == [(1, "cuda_oom")]
    assert rows(ev, "cuda_oom", "device", "gpu", "requested", "capacity", "allocated", "free", "reserved",
                "reserved_unallocated", "form") == [
        (1, None, "NPU", "3", "5.03 GiB", "60.96 GiB", "49.47 GiB", "1.32 GiB", "57.55 GiB", "8273.92 MiB", "bracket")]


def test_fla_npu_149_oversize_request(tmp_path):
    ev = ingest_issue(tmp_path, "fla_npu_149_npu_oom_1eb.log")
    assert rows(ev, "cuda_oom", "device", "requested_over", "form") == [(1, None, "NPU", "1EB", "oversize")]


# --- DeepSpeed launcher and legacy NCCL teardown forms -------------------------------------------


def test_dsexamples_626_segfault_exit_keeps_local_rank(tmp_path):
    ev = ingest_issue(tmp_path, "dsexamples_626_glued_sigkill_11.log")
    assert codes(ev) == [(4, "torchrun_closing_worker"), (5, "torchrun_closing_worker"), (6, "deepspeed_launcher_exit")]
    assert rows(ev, "torchrun_closing_worker", "pid") == [(4, None, "94984"), (5, None, "94985")]
    assert rows(ev, "deepspeed_launcher_exit", "exitcode", "local_rank") == [(6, None, "-11", "1")]


def test_deepspeed_4890_pg_wrapper_detail_lines_are_not_mismatches(tmp_path):
    """TORCH_DISTRIBUTED_DEBUG=DETAIL logs every collective (`Running collective: ...`): no event."""
    ev = ingest_issue(tmp_path, "deepspeed_4890_pg_wrapper_detail_info.log")
    assert ev.height == 0


def test_must_7_and_doclayout_22_legacy_teardown_lines(tmp_path):
    ev = ingest_issue(tmp_path, "must_7_legacy_ops_failed_padded.log")
    assert codes(ev) == [(1, "nccl_ops_failed"), (2, "nccl_ops_failed")]
    ev = ingest_issue(tmp_path / "b", "doclayout_22_ops_failed_split.log")
    assert codes(ev) == [(1, "nccl_ops_failed"), (2, "nccl_process_teardown"), (3, "nccl_ops_failed")]


def test_navillm_34_watchdog_wrapped_at_100_columns(tmp_path):
    ev = ingest_issue(tmp_path, "navillm_34_wrapped_watchdog.log")
    assert rows(ev, "nccl_ops_failed") == [(1, 0)]
    # The timeout's fields survive the wrap (`NumelO` / `ut=2`): the continuation line is joined.
    assert rows(ev, "nccl_watchdog_timeout", "seq", "op", "numel_out", "timeout_ms", "elapsed_ms") == [
        (6, None, "1", "ALLGATHER", "2", "600000", "600168")]
    assert ev.filter(pl.col("code") == "nccl_watchdog_timeout").get_column("end_line").to_list() == [7]


def test_alpaca_207_flattened_paste_keeps_every_part(tmp_path):
    ev = ingest_issue(tmp_path, "alpaca_207_flattened_nccl_remote.log")
    assert sorted(ev.get_column("code").to_list()) == sorted([
        "nccl_error", "nccl_error_detail", "nccl_ib_completion_error", "nccl_ops_failed", "nccl_process_teardown",
        "terminate_called"])
    assert rows(ev, "nccl_error", "nccl_version") == [(1, None, "2.14.3")]
    assert rows(ev, "nccl_ib_completion_error", "peer", "error") == [(1, None, "11.214.147.122<39138>", "12")]


# --- floating point exceptions, bus errors, device mismatch -------------------------------------


def test_pytorch_44547_zsh_job_line_without_job_number(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_44547_zsh_fpe_pid.log")
    assert rows(ev, "shell_signal_exit", "pid", "signal", "form") == [(3, None, "20121", "floating point exception", "zsh")]


def test_mvsnet_53_and_ssta_9_floating_point_exception(tmp_path):
    ev = ingest_issue(tmp_path, "mvsnet_53_bash_fpe_no_space.log")
    assert rows(ev, "shell_signal_exit", "pid", "signal") == [(1, None, "1098", "Floating point exception")]
    ev = ingest_issue(tmp_path / "b", "ssta_9_bare_fpe.log")
    assert codes(ev) == [(8, "shell_signal_exit")]


def test_mmseg_1356_bold_markdown_exception_line(tmp_path):
    ev = ingest_issue(tmp_path, "mmseg_1356_bold_bus_error.log")
    assert codes(ev) == [(1, "dataloader_worker_bus_error"), (2, "python_traceback"), (11, "dataloader_worker_killed"),
                         (15, "python_traceback")]
    assert rows(ev, "dataloader_worker_killed", "pids", "signal") == [(11, None, "7579", "Bus error")]
    assert rows(ev, "python_traceback", "exc_type")[0] == (2, None, "RuntimeError")


def test_gdrnet_16_chinese_enumeration_marks(tmp_path):
    ev = ingest_issue(tmp_path, "gdrnet_16_chinese_list_bus_error.log")
    # The quoted `raise RuntimeError(...)` source line is not an event; the `、` / `。` marks do not hide the rest.
    assert codes(ev) == [(2, "dataloader_worker_bus_error"), (3, "dataloader_worker_killed"), (5, "dataloader_worker_exited")]
    assert rows(ev, "dataloader_worker_exited", "pids") == [(5, None, "3216")]


def test_alignment_handbook_209_device_mismatch_in_inline_code(tmp_path):
    ev = ingest_issue(tmp_path, "alignment_handbook_209_inline_backticks_device.log")
    assert rows(ev, "device_mismatch", "device_a", "device_b", "argument", "method") == [
        (1, None, "cpu", "cuda:0", "index", "wrapper_CUDA__index_select")]


# --- DDP unused parameters, Intel XPU ---------------------------------------------------------------


def test_fairchem_396_two_ranks_interleaved_on_one_line(tmp_path):
    ev = ingest_issue(tmp_path, "fairchem_396_interleaved_ranks_unused.log")
    assert rows(ev, "ddp_unused_parameters") == [(8, None)]
    assert rows(ev, "python_traceback", "exc_type", "function") == [(3, None, "RuntimeError", "<module>")]


def test_ddcap_35_one_unused_parameter_index(tmp_path):
    ev = ingest_issue(tmp_path, "ddcap_35_unused_index_list.log")
    assert codes(ev) == [(1, "ddp_unused_parameters"), (4, "ddp_unused_parameter_list")]
    assert rows(ev, "ddp_unused_parameter_list", "rank", "params") == [(4, 0, "0", "1")]


def test_physai_440_level_zero_out_of_device_memory(tmp_path):
    ev = ingest_issue(tmp_path, "physai_440_level_zero_oom.log")
    assert codes(ev) == [(1, "terminate_called"), (3, "cuda_oom"), (4, "fatal_python_error")]
    assert rows(ev, "cuda_oom", "device", "ur_code", "form") == [(3, None, "XPU", "39", "unified_runtime")]


def test_geti_1075_native_api_out_of_device_memory(tmp_path):
    ev = ingest_issue(tmp_path, "geti_1075_native_api_oom.log")
    assert rows(ev, "cuda_oom", "device", "status") == [(3, None, "XPU", "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY")]
    # Other Unified Runtime failures are not memory exhaustion.
    assert events_of("RuntimeError: Native API failed. Native API returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)").filter(
        pl.col("code") == "cuda_oom").height == 0


def test_xpuops_1324_xpu_sentence_form_without_free_figure(tmp_path):
    ev = ingest_issue(tmp_path, "xpuops_1324_xpu_sentence_oom.log")
    assert rows(ev, "cuda_oom", "device", "requested", "capacity", "allocated", "reserved_unallocated", "form") == [
        (4, None, "XPU", "512.00 MiB", "16.50 GiB", "16.50 GiB", "0 bytes", "sentence")]


# --- DDP marked ready twice (gradient checkpointing + LoRA) ---------------------------------------


def test_trl_921_ready_twice_names_the_lora_parameter(tmp_path):
    ev = ingest_issue(tmp_path, "trl_921_ready_twice_named.log")
    assert rows(ev, "ddp_marked_ready_twice", "param_index", "param_name") == [
        (3, None, "447", "base_model.model.model.layers.31.mlp.down_proj.lora_B.default.weight")]
    assert ev.filter(pl.col("code") == "ddp_marked_ready_twice").get_column("end_line").to_list() == [4]


def test_accelerate_3536_ready_twice_rank_prefixed_without_detail(tmp_path):
    ev = ingest_issue(tmp_path, "accelerate_3536_ready_twice_rank_prefixed.log")
    assert rows(ev, "ddp_marked_ready_twice", "param_index") == [(4, 1, None)]


def test_qlora_223_ready_twice_index_only(tmp_path):
    ev = ingest_issue(tmp_path, "qlora_223_ready_twice_index_only.log")
    assert rows(ev, "ddp_marked_ready_twice", "param_index", "param_name") == [(1, None, "559", None)]

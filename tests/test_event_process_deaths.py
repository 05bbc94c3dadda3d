"""Processes killed by the kernel OOM killer, native crashes and fatal signals in real pastes: codes, lines and fields of their events."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
from forensics.parsers.prefixes import split_prefixes

from tests.helpers import event_codes, event_rows, events_of, ingest_issue

UTC = dt.timezone.utc


def test_autovod_7_dmesg_t_sizes_with_digit_grouping(tmp_path):
    ev = ingest_issue(tmp_path, "autovod_7_dmesg_t_commas.log")
    assert event_codes(ev) == [(1, "process_killed"), (7, "host_oom_killed")]
    assert event_rows(ev, "host_oom_killed", "pid", "process", "total_vm", "anon_rss", "kernel_time") == [
        (7, None, "7899", "python", "26,184,840kB", "153,700,88kB", "Sun Mar 30 08:24:00 2025")]


def test_openbmc_1887_old_kernel_killed_process_line(tmp_path):
    ev = ingest_issue(tmp_path, "openbmc_1887_killed_process_old.log")
    assert event_codes(ev) == [(1, "host_oom_killed")]
    assert event_rows(ev, "host_oom_killed", "pid", "process", "total_vm", "anon_rss", "uptime_s", "form") == [
        (1, None, "935", "python", "113656kB", "102104kB", "4018.450000", "killed_line")]


def test_docker_1001_journal_kernel_lines_and_a_name_in_parentheses(tmp_path):
    ev = ingest_issue(tmp_path, "docker_1001_journal_oom.log")
    assert event_codes(ev) == [(1, "host_oom_killed"), (3, "host_oom_killed")]
    assert event_rows(ev, "host_oom_killed", "pid", "process", "anon_rss") == [
        (1, None, "15784", "python3", "4288kB"), (3, None, "15925", "(resolved)", "4064kB")]


def test_ert_7797_dmesg_iso_one_event_per_kill(tmp_path):
    ev = ingest_issue(tmp_path, "ert_7797_dmesg_iso_oom.log")
    # The `oom-kill:constraint=` summary and `oom_reaper` lines restate the kill: no event of their own.
    assert event_codes(ev) == [(2, "process_killed"), (7, "host_oom_killed")]
    assert event_rows(ev, "host_oom_killed", "pid", "process", "anon_rss") == [(7, None, "1440763", "perl", "60356340kB")]
    # `dmesg --time-format iso` stamps (comma before the fraction, with a zone) give the event's UTC time.
    ts = ev.filter(pl.col("code") == "host_oom_killed").item(0, "ts")
    assert (ts.hour, ts.minute, ts.second, ts.microsecond) == (12, 55, 41, 679700)
    df = split_prefixes(pl.DataFrame({"text": ["2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1 (x)",
                                               "2024-04-29T14:55:41,679700+02:00 - INFO - a program's own stamp"]}), 2024)
    assert df.get_column("msg").to_list()[0] == "Out of memory: Killed process 1 (x)"
    assert df.get_column("msg").to_list()[1] == "a program's own stamp"


def test_bigbang_494_killed_under_a_progress_bar(tmp_path):
    ev = ingest_issue(tmp_path, "bigbang_494_tqdm_killed_oom.log")
    assert event_codes(ev) == [(2, "process_killed"), (3, "host_oom_killed")]
    assert event_rows(ev, "host_oom_killed", "pid", "total_vm") == [(3, None, "10245", "3983576kB")]


def test_terrariumpi_155_old_kernel_pair_is_one_kill(tmp_path):
    """`Out of memory: Kill process N ... or sacrifice child` then `Killed process N ... total-vm`: one event."""
    ev = ingest_issue(tmp_path, "terrariumpi_155_old_kill_process_wrapped.log")
    assert event_codes(ev) == [(2, "host_oom_killed")]
    assert ev.get_column("end_line").to_list() == [3]
    assert event_rows(ev, "host_oom_killed", "pid", "process", "total_vm", "anon_rss", "uptime_s") == [
        (2, None, "6155", "python", "1054044kB", "832856k", "86120.080672")]


def test_killed_process_near_misses():
    assert events_of(
        "[ 4022.980000] oom_reaper: reaped process 935 (python), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
        "INFO: Killed process group of the data server",
        "The trainer Killed process 12 (python) total-vm:1kB, anon-rss:1kB",
    ).filter(pl.col("code") == "host_oom_killed").height == 0


def test_tnt_33_segfault_glued_after_tqdm(tmp_path):
    ev = ingest_issue(tmp_path, "tnt_33_tqdm_glued_segfault.log")
    assert event_rows(ev, "shell_signal_exit", "signal") == [(1, None, "Segmentation fault")]


def test_unet_193_zsh_lowercase_segfault(tmp_path):
    ev = ingest_issue(tmp_path, "unet_193_lowercase_segfault.log")
    assert event_codes(ev) == [(2, "shell_signal_exit")]
    assert event_rows(ev, "shell_signal_exit", "signal", "form") == [(2, None, "segmentation fault", "zsh")]


def test_zsh_job_form_keeps_pid_and_command():
    ev = events_of("[1]    5606 segmentation fault  python sig_segv.py", "zsh: bus error (core dumped)  python train.py")
    f = [json.loads(x) for x in ev.sort("line").get_column("fields")]
    assert (f[0]["pid"], f[0]["signal"], f[0]["command"]) == ("5606", "segmentation fault", "python sig_segv.py")
    assert (f[1]["signal"], f[1]["command"]) == ("bus error", "python train.py")
    # Prose that mentions a crash is not one.
    assert events_of("I get a segmentation fault when training", "fixed segmentation fault in loader",
                     "100%|██████| 3/3 [00:00<00:00] Segmentation fault handler installed").filter(
        pl.col("code") == "shell_signal_exit").height == 0


def test_rrhf_35_sighup_death_signal(tmp_path):
    ev = ingest_issue(tmp_path, "rrhf_35_sighup_death_signal.log")
    assert event_codes(ev) == [(1, "torchrun_death_signal"), (2, "torchrun_closing_worker"), (3, "torchrun_death_signal")]
    assert event_rows(ev, "torchrun_death_signal", "signal", "pid") == [(1, None, "1", None), (3, None, "1", "2920830")]


def test_doris_3525_memcg_sacrifice_child_merges_the_killed_child(tmp_path):
    """RHEL 7: `Kill process A ... or sacrifice child`, then `Killed process B (x), UID 0, total-vm:...` (a child)."""
    ev = ingest_issue(tmp_path, "doris_3525_memcg_sacrifice_child_uid.log")
    assert event_codes(ev) == [(1, "host_oom_killed")]
    assert ev.get_column("end_line").to_list() == [2]
    assert event_rows(ev, "host_oom_killed", "cgroup", "pid", "killed_pid", "killed_process", "total_vm", "anon_rss") == [
        (1, None, "Memory cgroup ", "24984", "18177", "palo_be", "70347780kB", "45563572kB")]


def test_reportportal_203_memcg_then_oom_killer_call_trace(tmp_path):
    ev = ingest_issue(tmp_path, "reportportal_203_memcg_dmesg.log")
    # `invoked oom-killer` and the kernel call trace are context of a kill, not kills.
    assert event_codes(ev) == [(1, "host_oom_killed")]
    assert event_rows(ev, "host_oom_killed", "pid", "process", "anon_rss", "uptime_s") == [
        (1, None, "63214", "uwsgi", "164992kB", "7063.247407")]


def test_pytorch_12857_illegal_instruction_after_repl(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_12857_repl_illegal_instruction.log")
    assert event_rows(ev, "shell_signal_exit", "signal") == [(4, None, "Illegal instruction")]


def test_pytorch_2617_macos_signal_number(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_2617_macos_illegal_instruction_4.log")
    assert event_rows(ev, "shell_signal_exit", "signal", "signal_number") == [(2, None, "Illegal instruction", "4")]
    assert events_of("Illegal instruction: see the docs", "Segmentation fault: 11 occurred twice").height == 0


def test_pytorch_44547_zsh_job_line_without_job_number(tmp_path):
    ev = ingest_issue(tmp_path, "pytorch_44547_zsh_fpe_pid.log")
    assert event_rows(ev, "shell_signal_exit", "pid", "signal", "form") == [(3, None, "20121", "floating point exception", "zsh")]


def test_mvsnet_53_and_ssta_9_floating_point_exception(tmp_path):
    ev = ingest_issue(tmp_path, "mvsnet_53_bash_fpe_no_space.log")
    assert event_rows(ev, "shell_signal_exit", "pid", "signal") == [(1, None, "1098", "Floating point exception")]
    ev = ingest_issue(tmp_path / "b", "ssta_9_bare_fpe.log")
    assert event_codes(ev) == [(8, "shell_signal_exit")]

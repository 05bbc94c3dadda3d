"""Python tracebacks and stack dumps in real pastes (glued, prefixed, cut, loguru, Paddle, faulthandler and py-spy): where they start and end and what they raised."""

from __future__ import annotations

import json

import polars as pl

from tests.helpers import RECORDED, event_codes, event_rows, frame, ingest_issue, ingest_text, log_events


def test_pdsh_ip_prefixed_traceback(tmp_path):
    ev = ingest_issue(tmp_path, "deepspeed_769_pdsh_ip_prefix.log")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"]) == (3, 9)
    assert json.loads(tb["fields"])["function"] == "initialize_megatron"


def test_diffusers_131_traceback_glued_after_tqdm(tmp_path):
    ev = ingest_issue(tmp_path, "diffusers_131_tqdm_glued_unscale.log")
    assert event_codes(ev) == [(1, "python_traceback"), (14, "gradscaler_misuse")]
    assert ev.filter(pl.col("code") == "python_traceback").get_column("end_line").to_list() == [14]


def test_paddle_fatal_error_summary_not_a_python_traceback(tmp_path):
    ev = ingest_issue(tmp_path, "pdfextract_74_paddle_segv.log")
    # `C++ Traceback (most recent call last):` heads Paddle's C++ frames, not a Python traceback.
    # Line 4, `No stack trace in paddle, may be caused by external reasons.`, is Paddle's own word that no Paddle frame
    # is involved (driver-runtime-mismatch's paddle_external_fault, tests/test_paddle_fatal_signal.py).
    assert event_codes(ev) == [(4, "paddle_external_fault"), (9, "shell_signal_exit"), (13, "shell_signal_exit")]
    assert event_rows(ev, "shell_signal_exit", "signal", "form") == [(9, None, "Segmentation fault", "paddle"),
                                                               (13, None, "Segmentation fault", None)]
    ev = ingest_issue(tmp_path / "b", "paddleocr_11857_fatal_sigterm.log")
    assert event_rows(ev, "shell_signal_exit", "signal", "form") == [(8, None, "Termination signal", "paddle")]


def test_mmseg_1356_bold_markdown_exception_line(tmp_path):
    ev = ingest_issue(tmp_path, "mmseg_1356_bold_bus_error.log")
    assert event_codes(ev) == [(1, "dataloader_worker_bus_error"), (2, "python_traceback"), (11, "dataloader_worker_killed"),
                         (15, "python_traceback")]
    assert event_rows(ev, "dataloader_worker_killed", "pids", "signal") == [(11, None, "7579", "Bus error")]
    assert event_rows(ev, "python_traceback", "exc_type")[0] == (2, None, "RuntimeError")


def test_gdrnet_16_chinese_enumeration_marks(tmp_path):
    ev = ingest_issue(tmp_path, "gdrnet_16_chinese_list_bus_error.log")
    # The quoted `raise RuntimeError(...)` source line is not an event; the `、` / `。` marks do not hide the rest.
    assert event_codes(ev) == [(2, "dataloader_worker_bus_error"), (3, "dataloader_worker_killed"), (5, "dataloader_worker_exited")]
    assert event_rows(ev, "dataloader_worker_exited", "pids") == [(5, None, "3216")]


def test_cris_19_loguru_traceback_cut_by_the_paste(tmp_path):
    """loguru/better_exceptions layout: blank lines after the opener and between `> File` frames."""
    ev = ingest_issue(tmp_path, "cris_19_loguru_spawn_sigkill.log")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    f = json.loads(tb["fields"])
    assert (tb["line"], tb["end_line"], f["frames"], f["function"], f["truncated"]) == (2, 14, "2", "main", "true")


def test_recorded_loguru_catch_traceback(tmp_path):
    """tests/recordings/loguru_record.sh: logger.catch around a real torch IndexError."""
    run = ingest_text(tmp_path, (RECORDED / "loguru_traceback.log").read_text(encoding="utf-8"))
    ev = frame(run, "events").sort("line", "code")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    f = json.loads(tb["fields"])
    assert (tb["line"], tb["end_line"], tb["message"]) == (3, 48, "IndexError: index out of range in self")
    assert (f["frames"], f["function"], f["exc_type"]) == ("7", "embedding", "IndexError")
    assert ev.filter(pl.col("code") == "embedding_index_out_of_range").get_column("line").to_list() == [48]


def test_plain_traceback_followed_by_a_blank_line_and_a_log_record_is_unchanged(tmp_path):
    """Near miss for the loguru rule: a normal traceback's exception line stays the message; the
    blank line and an error-looking record after it are not pulled into the block."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 3, in <module>\n'
        "    main()\n"
        "ValueError: bad config\n"
        "\n"
        "RuntimeError: something printed later\n"
    )
    ev = frame(ingest_text(tmp_path, text), "events")
    tb = ev.filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"], tb["message"]) == (1, 4, "ValueError: bad config")


def test_vllm_7896_ray_dedup_suffix_is_not_part_of_a_frame(tmp_path):
    """Ray appends ` [repeated 6x across cluster]` to deduplicated lines, traceback frames included."""
    ev = ingest_issue(tmp_path, "vllm_7896_ray_repeated_suffix.log")
    assert event_rows(ev, "nccl_error", "reason") == [(3, None, "unhandled cuda error")]
    # The paste starts inside pid 11305's traceback (lines 1-3); pid 11934's has its head (line 5 on).
    head_cut, tb = ev.filter(pl.col("code") == "python_traceback").sort("line").rows(named=True)
    assert (head_cut["line"], head_cut["end_line"], json.loads(head_cut["fields"])["head_truncated"]) == (1, 3, "true")
    f = json.loads(tb["fields"])
    assert (tb["line"], tb["end_line"], f["function"], f["line"], f["truncated"]) == (5, 7, "execute_method", "374", "true")


def test_faulthandler_and_py_spy_dumps(tmp_path):
    text = ("Timeout (0:10:00)!\n"
            "Thread 0x00007f3a5c9ff700 (most recent call first):\n"
            '  File "/usr/lib/python3.10/threading.py", line 320 in wait\n'
            'Thread 2893 (idle): "MainThread"\n'
            "    wait (threading.py:320)\n"
            "A Timeout (seconds) setting of 30 was used\n")
    ev = log_events(tmp_path, text)
    fh = ev.filter(code="faulthandler_timeout")
    assert fh["line"].to_list() == [1] and json.loads(fh["fields"][0])["after"] == "0:10:00"
    spy = ev.filter(code="py_spy_dump")
    assert spy["line"].to_list() == [4] and json.loads(spy["fields"][0]) == {"tid": "2893", "state": "idle", "thread": "MainThread"}


def test_traceback_under_a_foreign_header_with_frames_the_paste_de_indented(tmp_path):
    """Sacred prints `Traceback (most recent calls WITHOUT Sacred internals):` and pastes often lose the frames'
    indentation: the frame line (whole, with `, in <function>`) and the source line under it still lead to the
    exception line, which is the run's final error (mboudiaf/TIM#4)."""
    text = ("ERROR - FSL training - Failed after 0:04:19!\n"
            "Traceback (most recent calls WITHOUT Sacred internals):\n"
            'File "/code/TIM-master/src/main.py", line 118, in main\n'
            "if (epoch) % trainer.meta_val_interval == 0:\n"
            "AttributeError: 'Trainer' object has no attribute 'meta_val_interval'\n")
    tb = frame(ingest_text(tmp_path, text), "events").filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"]) == (3, 5)
    assert json.loads(tb["fields"])["exc_type"] == "AttributeError"


def test_prose_before_an_exception_name_is_not_a_de_indented_frame(tmp_path):
    """Near miss: a `File "…", line N` mention without `, in <function>` and prose lines are no traceback."""
    text = ('File "config.yaml", line 3 has a typo\n'
            "the value below was printed by the script\n"
            "ValueError: is the name of the class we test\n"
            "and the script went on\n")  # not the log's last line: a lone exception line there ends the run
    ev = frame(ingest_text(tmp_path, text), "events")
    assert ev.filter(pl.col("code") == "python_traceback").height == 0


def test_qualified_exception_line_alone_at_the_end_of_a_log(tmp_path):
    """A paste that keeps only the final exception line, with its module path, as the log's last line still shows
    how the process ended (msr-fiddle/pipedream#76: `torch.distributed.elastic…ChildFailedError:` after a UCX dump)."""
    text = ("[8d6bf97c3bf4:3039 :0:3095] Caught signal 7 (Bus error: nonexistent physical address)\n"
            " 9 0x000000000011f133 clone()  ???:0\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n\n")
    tb = frame(ingest_text(tmp_path, text), "events").filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"]) == (3, 3)
    assert json.loads(tb["fields"])["exc_type"] == "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"


def test_exception_line_alone_as_the_last_line_of_a_log(tmp_path):
    """The one-line paste of a final error (issue 13: `AssertionError` about a label) ends the run."""
    text = "epoch 1 step 10 loss 2.3\nAssertionError: label 12 >= num_classes 10\n"
    tb = frame(ingest_text(tmp_path, text), "events").filter(pl.col("code") == "python_traceback").row(0, named=True)
    assert (tb["line"], tb["end_line"]) == (2, 2) and json.loads(tb["fields"])["exc_type"] == "AssertionError"


def test_exception_line_alone_is_no_traceback_unless_last(tmp_path):
    """Near misses: an exception line a log goes on after (logged, then training resumed), and a warning class
    as the last line."""
    went_on = ("requests.exceptions.ConnectionError: connection reset by peer\n"
               "step 10 loss 2.31\n")
    warning = "step 10 loss 2.31\nFutureWarning: the default of reduction will change\n"
    for text in (went_on, warning):
        ev = frame(ingest_text(tmp_path, text), "events")
        assert ev.filter(pl.col("code") == "python_traceback").height == 0, text

"""Progress bars on stderr: shown on a terminal (bytes of the run, rate, ETA; then playbooks), never on a pipe,
with --quiet, or while a JSON report goes to stdout; stdout is the same with or without them."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from tests.conftest import SAMPLES

RUN = SAMPLES / "cuda-oom" / "oom-then-timeouts"


def _cli(args: list[str], tmp_path, stderr_tty: bool) -> tuple[str, str]:
    """Run `forensics ARGS` with stdout on a pipe and stderr on a pseudo-terminal (or a pipe); (stdout, stderr)."""
    env = dict(os.environ, FORENSICS_PROGRESS_DELAY="0", COLUMNS="120", XDG_CACHE_HOME=str(tmp_path / "cache"))
    cmd = [sys.executable, "-m", "forensics", *args]
    if not stderr_tty:
        res = subprocess.run(cmd, capture_output=True, env=env, timeout=300)
        return res.stdout.decode(), res.stderr.decode()
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a new pty has 0 columns
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=follower, env=env)
    os.close(follower)
    err = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        err += chunk
    out = proc.stdout.read()
    proc.wait(timeout=300)
    os.close(leader)
    return out.decode(), err.decode(errors="replace")


def test_ingest_on_a_terminal_shows_bytes_rate_and_eta(tmp_path):
    out, err = _cli(["ingest", str(RUN), "-o", str(tmp_path / "t")], tmp_path, stderr_tty=True)
    assert "parsing:" in err and "B/s" in err and "<" in err  # tqdm: `parsing: 100%|...| 12.0k/12.0k [00:00<00:00, 1.2MB/s]`
    assert "parsing" not in out and "files;" in out  # the bar never reaches stdout


def test_analyze_on_a_terminal_shows_parsing_then_playbooks(tmp_path):
    out, err = _cli(["analyze", str(RUN), "--no-cache"], tmp_path, stderr_tty=True)
    assert "parsing:" in err and "analysing:" in err and "playbook/s" in err
    plain_out, _ = _cli(["analyze", str(RUN), "--no-cache"], tmp_path, stderr_tty=False)
    assert out == plain_out and "cuda-oom" in out


@pytest.mark.parametrize("args", [
    ["ingest", "--quiet"],  # asked to be quiet
    ["analyze", "--format", "json", "--no-cache"],  # a machine reads stdout
])
def test_no_bar_when_quiet_or_json_to_stdout(tmp_path, args):
    cmd = [args[0], str(RUN), *args[1:]] + (["-o", str(tmp_path / "t")] if args[0] == "ingest" else [])
    _, err = _cli(cmd, tmp_path, stderr_tty=True)
    assert "parsing" not in err and "analysing" not in err and "\r" not in err


def test_no_bar_when_stderr_is_not_a_terminal(tmp_path):
    _, err = _cli(["analyze", str(RUN), "--no-cache"], tmp_path, stderr_tty=False)
    assert "parsing" not in err and "analysing" not in err and "\r" not in err

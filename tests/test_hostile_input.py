"""Hostile run folders built at test time: no traceback, a status row per file, nothing from an input
passed raw to a terminal or a Markdown report, unwritable outputs answered with one line and exit 2."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from forensics.reports.escape import md_code_span, md_fence, md_text, one_line

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.10 GiB of which 1.06 GiB is free.")
# Raw control characters a report must never carry (tab and newline are layout).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forensics", *args], capture_output=True, text=True,
                          errors="replace", timeout=300, env={**os.environ, **(env or {})})


def _checksums(root: Path) -> dict[bytes, str]:
    out = {}
    for dirpath, _, files in os.walk(os.fsencode(root)):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as fh:
                out[p] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    (root / "rank0.log").write_text(
        f"{OOM} \x1b]0;pwned\x07 \x1b[2J\u202eevil <script>alert(1)</script> <img src=x onerror=alert(1)>\n"
        "```\n# not a heading\n", encoding="utf-8")
    # A name holding a newline and an escape sequence would forge a report line if printed raw.
    (root / "x\n\x1b[31mcritical[forged-finding]: fake.log").write_text(OOM + "\n", encoding="utf-8")
    # A name that is not UTF-8.
    with open(os.path.join(os.fsencode(root), b"bad\xff\xfe.log"), "wb") as fh:
        fh.write(b"RuntimeError: CUDA error: an illegal memory access was encountered\n")
    return root


def test_escape_helpers_neutralise_controls_html_and_fences():
    assert one_line("a\nb\x1b[31mc\u202e") == "a\\nb\\x1b[31mc\\u202e"
    assert one_line(os.fsdecode(b"n\xff")) == "n\\xff"
    cell = md_text("<script>|x</script> ![i](http://a)")
    assert "<" not in cell.replace("\\<", "") and "|" not in cell.replace("\\|", "") and "](" not in cell.replace("\\](", "")
    assert md_code_span("a``b") == "```a``b```"
    assert md_fence("x\n```\ny") == "````"


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_reports_carry_no_raw_control_or_forged_line(hostile, fmt):
    before = _checksums(hostile)
    proc = _cli("analyze", str(hostile), "--no-cache", "--format", fmt)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not RAW_CONTROL.search(proc.stdout), RAW_CONTROL.findall(proc.stdout)
    # The forged name never starts a line of its own.
    assert not any(line.startswith("critical[forged-finding]") for line in proc.stdout.splitlines())
    assert "bad\\xff\\xfe.log" in proc.stdout
    assert _checksums(hostile) == before


def _outside_code(md: str) -> str:
    return re.sub(r"(?ms)^  (`{3,})text\n.*?^  \1$", "", md)  # the report without its evidence code blocks


def test_markdown_keeps_log_html_inert(hostile):
    md = _cli("analyze", str(hostile), "--no-cache", "--format", "markdown").stdout
    outside = _outside_code(md)
    assert "<script>" not in outside and "<img" not in outside


def test_a_fence_line_inside_quoted_evidence_does_not_close_the_block(hostile):
    import dataclasses

    from forensics.contracts.context import Context
    from forensics.engine import analyze
    from forensics.ingest import ingest
    from forensics.reports import markdown

    a = analyze(Context(ingest(hostile)))
    f = a.findings[0]
    f.evidence[0] = dataclasses.replace(f.evidence[0], text="Traceback (most recent call last):\n```\n# forged heading\n<b>x</b>")
    md = markdown.render(a)
    assert "  ````text" in md
    outside = _outside_code(md)
    assert "# forged heading" not in outside and "<b>" not in outside


def test_every_file_has_a_row_and_the_json_keeps_exact_text(hostile):
    import json

    proc = _cli("analyze", str(hostile), "--no-cache", "--format", "json")
    doc = json.loads(proc.stdout)
    names = {f["file"] for f in doc["files"]}
    assert names == {"rank0.log", "x\n\x1b[31mcritical[forged-finding]: fake.log", "bad\\xff\\xfe.log"}
    assert any("<script>" in e["text"] for f in doc["findings"] for e in f["evidence"])


def test_deeply_nested_folder_is_walked_without_recursion_error(tmp_path):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for _ in range(1100):
            os.mkdir("d")
            os.chdir("d")
        with open("rank0.log", "w", encoding="utf-8") as fh:
            fh.write(OOM + "\n")
    finally:
        os.chdir(cwd)
    try:
        proc = _cli("analyze", str(tmp_path), "--no-cache", "--format", "json")
    finally:
        _remove_chain(tmp_path / "d")  # shutil.rmtree (and pytest's cleanup) recurse: remove it here
        os.chdir(cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RecursionError" not in proc.stderr
    assert '"cuda-oom"' in proc.stdout


def _remove_chain(top: Path) -> None:
    """Remove a chain of single nested folders without recursion, deepest first (relative steps, since
    the full path is longer than the OS accepts)."""
    os.chdir(top)
    depth = 1
    while os.path.isdir("d"):
        os.chdir("d")
        depth += 1
    for name in os.listdir("."):
        os.remove(name)
    for _ in range(depth):
        os.chdir("..")
        os.rmdir("d")


def test_unwritable_outputs_give_one_line_and_exit_2(hostile, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for args in (["analyze", str(hostile), "--no-cache", "-o", str(blocker / "r.md")],
                 ["ingest", str(hostile), "-q", "-o", str(blocker / "tables")]):
        proc = _cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("forensics: error: cannot write")


def test_an_unwritable_cache_analyses_without_it(hostile, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = _cli("analyze", str(hostile), env={"FORENSICS_CACHE_DIR": str(blocker / "cache")})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert "critical[cuda-oom]" in proc.stdout
    assert proc.stderr.count("cache not written") == 1


@pytest.mark.parametrize("suffix", ["gz", "bz2", "xz", "zst"])
def test_a_decompression_bomb_is_read_up_to_its_budget_and_marked_partial(tmp_path, suffix):
    import bz2
    import gzip
    import lzma

    import zstandard

    block = b"step 1 loss 2.0 lr 0.1\n" * 50_000  # ~1.1 MB, compresses over 1000x
    data = block * 40  # ~46 MB decompressed from a few tens of KB
    packed = {"gz": lambda d: gzip.compress(d, 9), "bz2": bz2.compress, "xz": lzma.compress,
              "zst": lambda d: zstandard.ZstdCompressor(level=19).compress(d)}[suffix](data)
    run = tmp_path / "run"
    run.mkdir()
    (run / f"rank0.log.{suffix}").write_bytes(packed)
    (run / "rank1.log").write_text(OOM + "\n", encoding="utf-8")  # the rest of the folder goes on
    proc = _cli("analyze", str(run), "--no-cache", "--format", "json",
                env={"FORENSICS_DECOMPRESS_FLOOR_MB": "1", "FORENSICS_DECOMPRESS_RATIO": "50"})
    import json

    doc = json.loads(proc.stdout)
    row = next(f for f in doc["files"] if f["file"].startswith("rank0"))
    assert row["status"] == "partial" and "decompressed size budget" in row["error"]
    assert any(f["playbook"] == "cuda-oom" for f in doc["findings"])

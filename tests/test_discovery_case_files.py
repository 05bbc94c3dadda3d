"""A sample case's expect.toml sits beside the run it describes: discovery leaves it out of the run's files."""

from __future__ import annotations

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from forensics.reports import jsonout
from tests.conftest import SAMPLES
from tests.helpers import frame, write_run

OOM = "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.06 GiB is free.\n"


def test_expect_toml_at_the_top_is_not_a_file_of_the_run(tmp_path):
    # Its description quotes the failure: read as a log, it would be evidence twice.
    expect = f'description = "{OOM.strip()}"\nfires = ["cuda-oom"]\n'
    run = write_run(tmp_path, {"rank0.log": OOM, "expect.toml": expect, "sub/expect.toml": expect})
    files = frame(ingest(run), "files").get_column("file").to_list()
    assert sorted(files) == ["rank0.log", "sub/expect.toml"]  # only the run folder's own expect.toml is left out


def test_a_case_reports_the_same_with_or_without_its_expect_toml(tmp_path):
    case = SAMPLES / "cuda-oom" / "oom-then-timeouts"
    copy = write_run(tmp_path, {p.name: p.read_bytes() for p in case.iterdir() if p.name != "expect.toml"}, name="oom-then-timeouts")
    with_expect = jsonout.render(analyze(Context(ingest(case))))
    without = jsonout.render(analyze(Context(ingest(copy))))
    assert with_expect.replace(str(case), "RUN") == without.replace(str(copy), "RUN")
    assert '"expect.toml"' not in with_expect

"""The command line: exit codes, output formats, the JSON contract, colour, selection errors, the catalog."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest
from click.testing import CliRunner

from forensics.cli import main
from tests.helpers import write_run

OOM_LINE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
            "4.00 GiB of which 2.35 GiB is free. Of the allocated memory 825.15 MiB is allocated by PyTorch, and 24.85 MiB "
            "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FORENSICS_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def oom_run(tmp_path):
    return write_run(tmp_path, {"train.log": "step 1 loss 2.0\nstep 2 loss 1.9\n" + OOM_LINE + "\n"}, "oom")


@pytest.fixture
def healthy_run(tmp_path):
    return write_run(tmp_path, {"train.log": "".join(f"step {i} loss {2 - i / 100:.3f} lr 1e-4\n" for i in range(50))}, "healthy")


def _schema() -> dict:
    return json.loads(resources.files("forensics").joinpath("report.schema.json").read_text())


def test_json_output_follows_the_shipped_schema(oom_run):
    res = CliRunner().invoke(main, ["analyze", str(oom_run), "--format", "json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    jsonschema.validate(report, _schema())
    top = report["findings"][0]
    assert top["playbook"] == "cuda-oom" and top["rank"] == 1 and top["root_cause"] is True
    assert top["evidence"][0] == {"file": "train.log", "line": 3, "text": OOM_LINE, "rank": None, "step": 2, "time": None}
    assert top["onset"]["line"] == 3 and top["onset"]["step"] == 2
    assert report["files"][0]["status"] == "parsed"


def test_fail_on_sets_the_exit_status(oom_run, healthy_run):
    runner = CliRunner()
    assert runner.invoke(main, ["analyze", str(oom_run), "--fail-on", "high"]).exit_code == 1
    assert runner.invoke(main, ["analyze", str(healthy_run), "--fail-on", "low"]).exit_code == 0
    assert runner.invoke(main, ["analyze", str(oom_run)]).exit_code == 0


def test_usage_errors_exit_2(oom_run):
    runner = CliRunner()
    res = runner.invoke(main, ["analyze", str(oom_run), "--select", "no-such-playbook"])
    assert res.exit_code == 2 and "unknown playbook" in res.output
    res = runner.invoke(main, ["analyze", str(oom_run), "--set", "cuda-oom.bogus=1"])
    assert res.exit_code == 2 and "no threshold" in res.output
    assert runner.invoke(main, ["analyze", "/no/such/folder"]).exit_code == 2


def test_text_output_quotes_evidence_and_has_no_colour_off_tty(oom_run):
    res = CliRunner().invoke(main, ["analyze", str(oom_run)], env={"NO_COLOR": "1"})
    assert "critical[cuda-oom]" in res.output
    assert "--> train.log:3" in res.output
    assert "\x1b[" not in res.output
    assert "= verify:" in res.output and "= fix:" in res.output


def test_markdown_and_output_file(oom_run, tmp_path):
    out = tmp_path / "report.md"
    res = CliRunner().invoke(main, ["analyze", str(oom_run), "--format", "markdown", "-o", str(out)])
    assert res.exit_code == 0 and res.output == ""
    text = out.read_text()
    assert text.startswith("# forensics report") and "`cuda-oom`" in text and "`train.log:3`" in text


def test_select_and_ignore(oom_run):
    runner = CliRunner()
    res = json.loads(runner.invoke(main, ["analyze", str(oom_run), "--format", "json", "--ignore", "cuda-oom"]).output)
    assert "cuda-oom" not in {f["playbook"] for f in res["findings"]}
    res = json.loads(runner.invoke(main, ["analyze", str(oom_run), "--format", "json", "--select", "memory"]).output)
    assert set(res["playbooks"]["ran"]) <= {"cuda-oom", "allocator-fragmentation", "host-memory-exhaustion", "memory-leak"}


def test_config_file_thresholds(oom_run, tmp_path):
    cfg = tmp_path / "forensics.toml"
    cfg.write_text('select = ["memory"]\n[thresholds.allocator-fragmentation]\nreserved_share = 0.001\n')
    res = json.loads(CliRunner().invoke(main, ["analyze", str(oom_run), "--format", "json", "--config", str(cfg)]).output)
    assert "allocator-fragmentation" in {f["playbook"] for f in res["findings"]}


def test_ingest_writes_parquet_and_analyze_reuses_it(oom_run, tmp_path):
    out = tmp_path / "tables"
    res = CliRunner().invoke(main, ["ingest", str(oom_run), "-o", str(out)])
    assert res.exit_code == 0 and "parsed" in res.output and "train.log" in res.output
    assert (out / "events.parquet").is_file() and (out / "manifest.json").is_file()
    from forensics import cache

    assert cache.load(oom_run, out) is not None
    (oom_run / "train.log").write_text("step 1 loss 2.0\n")  # a changed input invalidates the cache
    assert cache.load(oom_run, out) is None


def test_playbooks_list_and_show():
    runner = CliRunner()
    listing = runner.invoke(main, ["playbooks", "list"]).output
    assert "cuda-oom" in listing and "nccl-timeout" in listing
    doc = runner.invoke(main, ["playbooks", "show", "allocator-fragmentation"]).output
    for section in ("## Symptom", "## Why it matters", "## Evidence", "## Known false positives", "## Thresholds", "reserved_share"):
        assert section in doc
    assert runner.invoke(main, ["playbooks", "show", "nope"]).exit_code == 2


def test_python_dash_m_works():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "forensics", "--version"], capture_output=True, text=True, check=True)
    assert "forensics" in out.stdout


def test_ingest_writes_parquet_and_counts_what_it_wrote(tmp_path):
    import pyarrow.parquet as pq

    from tests.conftest import ROOT

    out = tmp_path / "tables"
    res = CliRunner().invoke(main, ["ingest", str(ROOT / "sample_logs" / "cuda-oom" / "h100"), "-o", str(out), "-q"])
    assert res.exit_code == 0, res.output
    rows = {name: pq.read_table(out / f"{name}.parquet").num_rows for name in ("events", "metrics", "gpu")}
    assert rows["metrics"] > 0 and rows["gpu"] == 98
    assert f"events {rows['events']}, metrics {rows['metrics']}, gpu {rows['gpu']}," in res.output

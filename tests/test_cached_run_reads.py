"""A run read back from its Parquet cache is analysed from lazy queries, with the same report as the parsed run."""

from __future__ import annotations

import gc
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forensics import cache
from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from forensics.reports import jsonout

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
CASES = ["loss-spike/corrupt-batch", "nan-loss/hf", "silent-hang/stackdump", "silent-hang/nearmiss"]


def _copy(case: str, tmp: Path) -> Path:
    run = tmp / "run"
    shutil.copytree(SAMPLES / case, run)
    return run


@pytest.mark.parametrize("case", CASES)
def test_cached_run_gives_the_parsed_runs_report_without_holding_its_metrics(case, tmp_path):
    run = _copy(case, tmp_path)
    parsed = ingest(run)
    cache.save(parsed, tmp_path / "cache")
    loaded = cache.load(run, tmp_path / "cache")
    assert isinstance(loaded, cache.CachedRun)
    want = jsonout.render(analyze(Context(parsed)))
    got = jsonout.render(analyze(Context(loaded)))
    assert got == want
    assert '"playbook"' in want or case.endswith("nearmiss")
    # The detectors queried the metrics file; none of them read the whole table into memory.
    assert "metrics" not in loaded.tables
    assert loaded.num_rows("metrics") == parsed.num_rows("metrics") > 0


def test_cache_with_a_foreign_table_schema_is_parsed_again(tmp_path):
    run = _copy("loss-spike/corrupt-batch", tmp_path)
    cache.save(ingest(run), tmp_path / "cache")
    assert cache.load(run, tmp_path / "cache") is not None
    pq.write_table(pa.table({"file": ["x"], "value": [1.0]}), tmp_path / "cache" / "metrics.parquet")
    assert cache.load(run, tmp_path / "cache") is None


def test_shared_series_spill_folder_goes_with_the_context(tmp_path):
    from forensics.playbooks import metric_series as M

    ctx = Context(ingest(_copy("loss-spike/corrupt-batch", tmp_path)))
    s = M.series(ctx, M.LOSS)
    assert s.height > 10
    folder = ctx._memo["spill_dir"]
    assert any(folder.iterdir())
    del ctx
    gc.collect()
    assert not folder.exists()

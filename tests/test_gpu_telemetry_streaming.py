"""GPU telemetry is converted chunk by chunk (and spilled past the sink budget): the tables equal a whole-file parse."""

from __future__ import annotations

import shutil

import pyarrow as pa
from forensics.parsers import lines, nvsmi_xml, spool

from forensics import ingest as I

NANOGPT = "nanogpt_pr643_8gpu_query_csv_noheader_nounits_timeseries.csv"
A100_XML = "a100_sxm4_80gb_x4_mig_q_x_v12.xml"


def _tables(root, monkeypatch, patches: dict | None = None) -> dict[str, pa.Table]:
    with monkeypatch.context() as m:
        for (module, name), value in (patches or {}).items():
            m.setattr(module, name, value)
        run = I.ingest(root)
        return {name: run.table(name) for name in ("gpu", "gpu_procs", "files")}


def test_query_csv_in_small_chunks_and_spilled_equals_one_chunk(tmp_path, corpus, monkeypatch):
    root = tmp_path / "run"
    root.mkdir()
    shutil.copy(corpus / "nvidia_smi" / NANOGPT, root / NANOGPT)
    whole = _tables(root, monkeypatch)
    chunked = _tables(root, monkeypatch, {(lines, "CHUNK_BYTES"): 4096, (spool, "SINK_BYTES"): 0})
    assert whole["gpu"].num_rows > 1000 and whole["gpu"].column("utilization_gpu_pct").null_count < whole["gpu"].num_rows
    for name in whole:
        assert chunked[name].equals(whole[name]), name


def test_xml_documents_in_batches_equal_one_batch(tmp_path, corpus, monkeypatch):
    root = tmp_path / "run"
    root.mkdir()
    doc = (corpus / "nvidia_smi" / A100_XML).read_text()
    (root / "smi.xml").write_text(doc * 5)  # `nvidia-smi -q -x -l 1` appends one document per sample
    whole = _tables(root, monkeypatch)
    batched = _tables(root, monkeypatch, {(nvsmi_xml, "BATCH_ROWS"): 1, (spool, "SINK_BYTES"): 0})
    assert sorted(set(whole["gpu"].column("seq").to_pylist())) == [0, 1, 2, 3, 4]
    for name in whole:
        assert batched[name].equals(whole[name]), name

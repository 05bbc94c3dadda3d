"""Capture files with `# $ command` sections: each section goes to its own parser; seq runs on."""

from __future__ import annotations

from forensics.ingest import ingest
from tests.helpers import frame, write_run

RULE = "#" * 80


def _section(title: str, command: str, body: str) -> str:
    return f"{RULE}\n# {title}\n# $ {command}\n{RULE}\n{body}\n\n"


def test_sections_by_command(tmp_path):
    text = (
        "collected_at:   2026-07-14T08:12:38Z\n\n"
        + _section("capabilities :: list (-L)", "nvidia-smi -L", "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)")
        # noheader,nounits: only the command line says what the columns are.
        + _section("apps", "nvidia-smi --query-compute-apps timestamp,gpu_name,pid,process_name,used_memory --format=csv,noheader,nounits",
                   "2025/09/07 22:37:17.908, NVIDIA GeForce RTX 3090, 1106871, /app/llama-server, 23342")
        + _section("dcgm", "dcgmi dmon -e 1002,1004", "#Entity   SMACT        TENSO\nID\nGPU 0     0.930        0.412\nGPU 0     0.910        0.400")
        + _section("gpu", "nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits", "0, 97\n1, 12")
    )
    run = ingest(write_run(tmp_path, {"capture.txt": text}))
    f = frame(run, "files").row(0, named=True)
    assert (f["kind"], f["status"]) == ("nvsmi_capture", "parsed")
    assert "1 section(s) without samples" in f["error"]
    procs = frame(run, "gpu_procs")
    assert procs.select("line", "seq", "pid", "process", "used_memory_mib", "source").rows() == [
        (13, 0, 1106871, "/app/llama-server", 23342.0, "query_compute_apps")]
    gpu = frame(run, "gpu").sort("line")
    assert gpu.select("line", "seq", "source", "gpu", "sm_active_ratio", "utilization_gpu_pct").rows() == [
        (21, 1, "dcgm_dmon", 0, 0.93, None), (22, 2, "dcgm_dmon", 0, 0.91, None),
        (28, 3, "query_gpu", 0, None, 97.0), (29, 3, "query_gpu", 1, None, 12.0)]

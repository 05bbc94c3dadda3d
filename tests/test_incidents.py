"""Real incidents (logs pasted in public GitHub issues) through ingest + analyze: the root cause a skilled
engineer names, the first cause where the thread makes it clear, and silence on near misses.

Each `[[incident]]` of tests/recordings/incidents/INCIDENTS.toml is a run folder under that directory
(`name`), or a list of `files` reused from another recordings folder (copied into a temporary run).
Keys: `root` (playbook id of the first finding above info), `first_cause` (its first-ranked cause id),
`fires` / `not_fire` (playbook ids above info), `quiet` (no finding above info at all), `max_severity`
(no finding above it: an OOM the program caught and recovered from), `onset_rank`, `evidence` (`file:line`
that the root finding quotes).
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.conftest import ROOT

INCIDENTS = ROOT / "tests" / "recordings" / "incidents"
# INCIDENTS.toml, plus the frozen held-out batches (held_out_*.toml: real pastes collected before the fixes
# they drove and measured on arrival; `arrival` records what the tool said then).
BATCHES = [INCIDENTS / "INCIDENTS.toml", *sorted(INCIDENTS.glob("held_out_*.toml"))]
CASES = [c for b in BATCHES for c in tomllib.loads(b.read_text(encoding="utf-8"))["incident"]]
# Held-out cases the rules still miss, each with the general class of log it belongs to: a strict xfail,
# so a fix that starts passing one must move it out of this list.
STILL_MISSED: dict[str, str] = {
    "bros_11_lr_reaches_zero_epoch_5_of_50": "metric-shape: want lr-schedule-anomaly, got none",
    "caffe_mobilenet_v3_1_loss_ln1000_pinned": "metric-shape: want loss-stagnation, got none",
    "chainer_4424_cifar_loss_2_30_acc_0_1_table": "metric-shape: want loss-stagnation, got none",
    "chatglm6b_191_loading_shards_killed_host_ram": "crash: want host-memory-exhaustion, got none",
    "cntk_2607_cuda_failure_2_after_epoch16": "crash: want cuda-oom, got none",
    "convnets_tf2_2_mobilenet_loss_2_30_acc_10": "short-paste: want loss-stagnation, got none",
    "deeplab_v2_22_tf_resource_exhausted_spacetobatch": "crash: want cuda-oom, got none",
    "deepspeechrec_48_keras_checkpoint_keyerror_val_acc": "unknown-final-error: want unclassified-failure, got none",
    "dreamerv3_203_chinese_killed_replay_buffer": "crash: want host-memory-exhaustion, got none",
    "efficient_pytorch_21_lmdb_data_avg_dominates": "timing: want dataloader-bottleneck, got none",
    "fairseq_41_fconv_gnorm_explodes_then_loss": "short-paste: want gradient-explosion, got clipping-saturation",
    "fairseq_512_fp16_loss_scale_halving_to_min": "metric-shape: want fp16-overflow, got none",
    "hedwig_70_killed_after_vectors_loaded": "crash: want host-memory-exhaustion, got none",
    "kingdra_2_bash_killed_after_epoch": "crash: want host-memory-exhaustion, got none",
    "lasagne_525_mnist_cnn_val_acc_10_64_prose": "metric-shape: want loss-stagnation, got none",
    "latent_diffusion_17_terminate_cuda_init_error_worker": "crash: want cuda-context-corruption, got none",
    "lcnn_17_keyerror_losses_in_validate": "unknown-final-error: want unclassified-failure, got none",
    "mmdetection_929_cascade_data_time_80pct": "timing: want dataloader-bottleneck, got none",
    "nas_bench_201_15_imagenet_data_196s_of_203s": "timing: want dataloader-bottleneck, got none",
    "paddleocr_2083_reader_cost_dominates_batch_cost": "timing: want dataloader-bottleneck, got none",
    "pytorch_2293_lr0_loss_2_33_error_90pct": "metric-shape: want loss-stagnation, got none",
    "pytorch_33296_ctrl_c_stuck_in_dataloader_get": "hang: want silent-hang, got none",
    "pytorch_53894_worker_segfault_regression_gdb": "crash: want unclassified-failure, got none",
    "pytorch_examples_164_imagenet_data_dominates_time": "timing: want dataloader-bottleneck, got none",
    "pytorch_unet_258_spatial_nll_assert_after_runtimeerror": "crash: want bad-input-data, got device-assert",
    "remora_226_resume_weights_only_unpickling": "crash: want checkpoint-failure, got none",
    "snorkel_870_bilstm_loss_ln2_binary": "short-paste: want loss-stagnation, got none",
    "tffrcnn_68_tf_bfc_stats_resource_exhausted": "crash: want cuda-oom, got none",
    "trace_5_llama3_lora_loss_identical_each_epoch": "short-paste: want lora-silent-zero, got none",
}


def run_folder(case: dict, tmp_path: Path) -> Path:
    """The incident's run folder (its own, or a temporary one holding the reused files)."""
    if "files" not in case:
        return INCIDENTS / case["name"]
    root = tmp_path / case["name"]
    root.mkdir()
    for rel in case["files"]:
        shutil.copy(INCIDENTS / rel, root / Path(rel).name)
    return root


def analysis(case: dict, tmp_path: Path) -> Analysis:
    return analyze(Context(ingest(run_folder(case, tmp_path))))


def describe(a: Analysis) -> list[tuple]:
    return [(f.id, f.severity.label, [c.cause.id for c in f.causes][:2], f.summary[:100]) for f in a.findings]


def _param(case: dict):
    reason = STILL_MISSED.get(case["name"])
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(case, id=case["name"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_incident(case: dict, tmp_path: Path):
    a = analysis(case, tmp_path)
    assert not a.errored, a.errored
    problems = [f for f in a.findings if f.severity > Severity.INFO]
    fired = {f.id for f in problems}
    if case.get("quiet"):
        assert not problems, describe(a)
    if "max_severity" in case:
        assert all(f.severity <= Severity.parse(case["max_severity"]) for f in a.findings), describe(a)
    for pid in case.get("not_fire", []):
        assert pid not in fired, describe(a)
    for pid in case.get("fires", []):
        assert pid in fired, describe(a)
    if "root" in case:
        assert problems and problems[0].id == case["root"], describe(a)
        top = problems[0]
        assert top.root_cause
        if "first_cause" in case:
            assert top.causes and top.causes[0].cause.id == case["first_cause"], [(c.cause.id, c.likelihood) for c in top.causes]
        if "onset_rank" in case:
            assert top.onset.rank == case["onset_rank"], top.onset
        for ref in case.get("evidence", []):
            assert ref in {f"{e.file}:{e.line}" for e in top.evidence}, (ref, [(e.file, e.line) for e in top.evidence])


def test_every_incident_has_a_source_and_a_verdict():
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names))
    for c in CASES:
        assert c["url"].startswith("https://github.com/"), c["name"]
        # Every incident says what must (or must not) be found; a root and silence exclude each other.
        assert "root" in c or c.get("quiet") or c.get("max_severity") or c.get("not_fire"), c["name"]
        assert not ("root" in c and c.get("quiet")), c["name"]
        if "files" not in c:
            assert (INCIDENTS / c["name"]).is_dir(), c["name"]
    folders = {p.name for p in INCIDENTS.iterdir() if p.is_dir()}
    # Frozen held-out batches (held_out_*.toml beside INCIDENTS.toml) own their folders too.
    frozen = {c["name"] for b in INCIDENTS.glob("held_out_*.toml") for c in tomllib.loads(b.read_text(encoding="utf-8"))["incident"]}
    assert folders <= set(names) | frozen, folders - set(names) - frozen

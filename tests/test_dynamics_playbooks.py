"""The training-dynamics playbooks on small metric tables with known answers (positives and near misses).

End-to-end checks on the recorded runs live in the sample folders' expect files (test_samples.py);
these pin the numbers each detector reports and the edge cases the recordings do not cover.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import polars as pl
import pytest
from forensics.playbooks.base import get

from forensics.contracts.context import Context
from forensics.contracts.tables import conform
from forensics.ingest import Run


def ctx_of(series: dict[str, list], ranks: int = 1, start: int = 1, every: int = 1, events: pl.DataFrame | None = None) -> Context:
    """A context whose metrics table holds `series` (name -> values, one value per logged step).

    Each logged step is one line holding all metrics of that step, as a plain loop prints them;
    a value may be a list (one per rank).
    """
    rows = []
    n = max(len(v) for v in series.values())
    line = 0
    for i in range(n):
        for r in range(ranks):
            line += 1
            for name, vals in series.items():
                if i >= len(vals) or vals[i] is None:
                    continue
                v = vals[i][r] if isinstance(vals[i], list | tuple) else vals[i]
                rows.append({"file": "train.log", "line": line, "rank": r if ranks > 1 else None, "step": start + i * every,
                             "name": name, "value": float(v), "source": "generic"})
    run = Run(root=Path("."))
    run.tables["metrics"] = conform("metrics", pl.DataFrame(rows).to_arrow())
    if events is not None:
        run.tables["events"] = conform("events", events.to_arrow())
    return Context(run)


def detect(pid: str, ctx: Context, module_fn: str | None = None, **overrides):
    """Run every detector of a playbook with its default thresholds (plus overrides); the detections."""
    pb = get(pid)
    th = {k: t.default for k, t in pb.thresholds.items()} | overrides
    out = []
    for fn, _tables in pb.detectors:
        if module_fn and fn.__module__.rsplit(".", 1)[-1] != module_fn:
            continue
        got = fn(ctx, th)
        if got is not None:
            out.extend(got if isinstance(got, list) else [got])
    return out


def one(pid: str, ctx: Context, **kw):
    got = detect(pid, ctx, **kw)
    assert len(got) == 1, got
    return got[0]


def noisy(n: int, level: float, rel: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + rng.gauss(0, rel)) for _ in range(n)]


# ------------------------------------------------------------------ gradient-explosion


def test_gradient_explosion_onset_peak_and_lr_cause():
    g = noisy(40, 2.0, 0.1, 1) + [25.0, 300.0, 4000.0, 9e4, math.inf, math.nan]
    lr = [1e-3 * (i + 1) for i in range(len(g))]  # still warming up
    d = one("gradient-explosion", ctx_of({"grad_norm": g, "lr": lr}))
    assert d.onset.step == 41 and d.onset.line == 41
    assert d.facts["peak"] == 9e4 and d.facts["first_nonfinite_step"] == 45
    assert max(d.causes, key=d.causes.get) == "lr_too_high"
    assert "from step 41 then inf at step 45" in d.summary and "still rising" in d.summary


def test_gradient_explosion_quiet_on_single_spike_zero_norms_and_bad_batch_nan():
    spike = noisy(60, 2.0, 0.1, 2)
    spike[30] = 60.0  # one isolated spike: loss-spike territory
    assert detect("gradient-explosion", ctx_of({"grad_norm": spike})) == []
    assert detect("gradient-explosion", ctx_of({"grad_norm": [0.0] * 50})) == []  # 0/0 is no ratio
    nan_batch = noisy(40, 2.0, 0.1, 3) + [math.nan] * 10  # NaN out of nowhere
    assert detect("gradient-explosion", ctx_of({"grad_norm": nan_batch})) == []


# ------------------------------------------------------------------ nan-loss


def test_nan_loss_bad_batch_without_buildup():
    loss = noisy(50, 1.0, 0.05, 4) + [math.nan] * 5
    d = one("nan-loss", ctx_of({"loss": loss, "grad_norm": noisy(55, 2.0, 0.05, 5)}))
    assert (d.onset.step, d.facts["nonfinite_points"], d.facts["signal"]) == (51, 5, "loss")
    assert max(d.causes, key=d.causes.get) == "bad_batch"
    assert d.severity is None  # an incident: the playbook's own (high) severity
    assert "no build-up" in d.summary


def test_nan_loss_divergence_and_single_nan_is_medium():
    loss = [1.0] * 30 + [2.0, 5.0, 20.0, 100.0, math.inf]
    d = one("nan-loss", ctx_of({"loss": loss}))
    assert d.onset.step == 35 and max(d.causes, key=d.causes.get) == "divergence"
    single = one("nan-loss", ctx_of({"loss": [1.0] * 20 + [math.nan] + [1.0] * 5}))
    assert single.severity is not None and single.severity.label == "medium"


def test_nan_loss_masked_by_hf_and_inf_grad_norm_is_not_nan():
    # HF logging_nan_inf_filter: loss logged as 0, grad_norm nan.
    d = one("nan-loss", ctx_of({"loss": [1.0] * 20 + [0.0] * 5, "grad_norm": [1.0] * 20 + [math.nan] * 5}))
    assert d.onset.step == 21 and d.facts["signal"] == "grad_norm"
    assert "masked: 0" in d.summary
    # An fp16 step skipped by the scaler logs inf grad norms: not a NaN loss.
    assert detect("nan-loss", ctx_of({"loss": [1.0] * 25, "grad_norm": [math.inf] * 3 + [1.0] * 22})) == []


# ------------------------------------------------------------------ loss-spike


def test_loss_spike_recovered_isolated_and_strong():
    loss = noisy(60, 1.0, 0.02, 6)
    loss[40] = 4.0
    d = one("loss-spike", ctx_of({"loss": loss}))
    assert d.onset.step == 41 and d.facts["recovered"] and d.facts["ratio"] == pytest.approx(4.0, rel=0.05)
    assert max(d.causes, key=d.causes.get) == "bad_batch" and d.severity is None


def test_loss_spike_noise_and_weak_recovered_spike_are_not_problems():
    assert detect("loss-spike", ctx_of({"loss": noisy(200, 1.0, 0.2, 7)})) in ([],) or all(
        d.severity is not None and d.severity.label == "info" for d in detect("loss-spike", ctx_of({"loss": noisy(200, 1.0, 0.2, 7)})))
    loss = noisy(60, 1.0, 0.05, 8)
    loss[40] = 1.5  # ~7 sigma but recovered and isolated: info only
    got = detect("loss-spike", ctx_of({"loss": loss}))
    assert got and got[0].severity.label == "info"


# ------------------------------------------------------------------ fp16-overflow / loss-scale-runaway


def test_fp16_overflow_collapse_after_calibration():
    scale = [2.0**32 / 2**i for i in range(16)] + [32768.0] * 80 + [32768.0 / 2**i for i in range(1, 16)] + [1.0] * 20
    d = one("fp16-overflow", ctx_of({"loss_scale": scale}))
    assert d.onset.step == 97 and d.facts["calibration_points"] == 17  # 16 halvings and the jump to 32768
    assert "32,768 -> 1" in d.summary


def test_fp16_overflow_sawtooth_and_calibration_are_quiet():
    saw = [2.0**32 / 2**i for i in range(16)]
    for _ in range(6):
        saw += [32768.0] * 20 + [65536.0]  # doubles after a clean interval, the probe overflows
    assert detect("fp16-overflow", ctx_of({"loss_scale": saw})) == []


def test_loss_scale_runaway_and_healthy_growth():
    run = [65536.0 * 2 ** (i // 10) for i in range(300)]
    d = one("loss-scale-runaway", ctx_of({"loss_scale": run, "grad_norm": [0.0] * 300}))
    assert d.facts["doublings"] == 29 and d.onset.step == 1
    assert max(d.causes, key=d.causes.get) == "zero_grads"
    healthy = [2.0 ** min(i // 10, 17) for i in range(200)] + [65536.0, 131072.0] * 20
    assert detect("loss-scale-runaway", ctx_of({"loss_scale": healthy})) == []


# ------------------------------------------------------------------ loss-stagnation / lora / vanishing / clipping


def test_loss_stagnation_at_ln_vocab_with_zero_lr():
    lnv = math.log(256000)
    d = one("loss-stagnation", ctx_of({"loss": [lnv + 0.002 * ((-1) ** i) for i in range(20)], "lr": [0.0] * 20}, every=3, start=3))
    assert d.facts["vocab"] == 256000 and d.onset.step == 3
    assert "≈ ln(256,000) = 12.45" in d.summary and "lr = 0" in d.summary
    assert max(d.causes, key=d.causes.get) == "lr_zero"


def test_loss_stagnation_converged_plateau_is_quiet_but_stuck_is_not():
    converged = [4.0 * math.exp(-i / 10) + 1.0 for i in range(100)]
    assert detect("loss-stagnation", ctx_of({"loss": converged, "lr": [1e-3] * 100})) == []
    stuck = noisy(60, 2.7, 0.1, 10)
    d = one("loss-stagnation", ctx_of({"loss": stuck, "lr": [1e-2] * 60}))
    assert d.facts["vocab"] is None and "no progress" in d.summary


def test_lora_silent_zero_weights_never_move_and_nearmiss():
    d = one("lora-silent-zero", ctx_of({"lora_b_norm": [0.0] * 20, "lora_b_grad_norm": [0.8] * 20, "lr": [2e-3] * 20, "loss": [7.3] * 20}))
    assert d.onset.step == 1 and max(d.causes, key=d.causes.get) == "not_trainable"
    assert "gradients flow but the adapters never move" in d.summary
    grows = [0.0] + [0.1 * i for i in range(1, 20)]
    assert detect("lora-silent-zero", ctx_of({"lora_b_norm": grows, "lr": [2e-3] * 20})) == []


def test_vanishing_gradient_layer_ratio_and_converged_model():
    d = one("vanishing-gradient", ctx_of({"grad_norm_first_layer": [1e-20] * 10, "grad_norm_last_layer": [0.03] * 10, "loss": [2.5] * 10}),
            module_fn="vanishing_gradient")
    assert d.onset.step == 1 and d.facts["smallest"] == "grad_norm_first_layer"
    converged = ctx_of({"grad_norm": [1e-7] * 20, "loss": [2.0] + [0.01] * 19})
    assert detect("vanishing-gradient", converged) == []
    exact_zero = ctx_of({"grad_norm": [0.0] * 20, "loss": [2.0] * 20})
    assert detect("vanishing-gradient", exact_zero) == []


def test_clipping_saturation_from_clip_meter_and_clip_value():
    d = one("clipping-saturation", ctx_of({"clip_pct": [100.0] * 10, "grad_norm": [1.5] * 10}, start=10, every=10))
    assert d.facts["clipped_share"] == 1.0 and d.onset.step == 10
    d = one("clipping-saturation", ctx_of({"grad_norm": noisy(30, 1.5, 0.1, 10), "max_grad_norm": [0.01] * 30}))
    assert d.facts["clip_value"] == 0.01 and "= 0.01" in d.summary
    assert detect("clipping-saturation", ctx_of({"clip_pct": [10.0, 20.0, 0, 0, 0, 0, 0, 0]})) == []


# ------------------------------------------------------------------ schedule, optimizer state, logits


def test_lr_staircase_and_zero_lr_left_to_stagnation():
    stair = [0.1 * (1 - 1e-4 * (i // 7)) for i in range(42)]
    d = one("lr-schedule-anomaly", ctx_of({"lr": stair}, start=0, every=10))
    assert d.facts["anomalies"] == ["staircase"] and d.onset.step == 70
    assert max(d.causes, key=d.causes.get) == "stepped_per_epoch"
    assert detect("lr-schedule-anomaly", ctx_of({"lr": [0.0] * 30})) == []


def test_optimizer_state_collapse_and_smooth_warmup():
    v = [1e-3 * (1 - 0.9 ** (i + 1)) for i in range(30)] + [3e-9] + [1e-4] * 10
    d = one("optimizer-state-drift", ctx_of({"exp_avg_sq_mean": v}))
    assert d.onset.step == 31 and max(d.causes, key=d.causes.get) == "corrupted_state_after_resume"
    assert detect("optimizer-state-drift", ctx_of({"exp_avg_sq_mean": v[:30]})) == []


def test_logit_saturation_sustained_vs_transient():
    d = one("logit-saturation", ctx_of({"logits_abs_max": [2.0] * 5 + [12.0 + i for i in range(20)]}))
    assert d.onset.step == 6 and d.facts["peak"] == 31.0
    transient = [2.0] * 5 + [11.0, 12.0, 11.5] + [5.0] * 20
    assert detect("logit-saturation", ctx_of({"logits_abs_max": transient})) == []


# ------------------------------------------------------------------ ranks


def test_sampler_duplication_identical_losses_only():
    same = noisy(20, 1.0, 0.3, 11)
    d = one("sampler-duplication", ctx_of({"loss": [[v, v] for v in same]}, ranks=2))
    assert d.facts["identical_steps"] == 20 and d.ranks == [0, 1]
    other = noisy(20, 1.0, 0.3, 12)
    assert detect("sampler-duplication", ctx_of({"loss": [[a, b] for a, b in zip(same, other, strict=True)],
                                                  "grad_norm": [[1.0, 1.0]] * 20}, ranks=2)) == []


def test_gradient_desync_from_param_norms_and_in_sync_run():
    pn = [[6.6 + 0.01 * i, 6.6 + 0.02 * i] for i in range(30)]
    d = one("gradient-desync", ctx_of({"param_norm": pn}, ranks=2), module_fn="gradient_desync_metrics")
    assert d.onset.step == 2 and d.facts["series"] == "param_norm"
    assert detect("gradient-desync", ctx_of({"grad_norm": [[1.2, 1.2]] * 30}, ranks=2), module_fn="gradient_desync_metrics") == []


def test_rank_straggler_compute_time_not_wait_time():
    compute = [[2.0 + 0.1 * (i % 3), 42.0 + (i % 2)] for i in range(20)]
    comm = [[40.0, 0.5]] * 20  # the fast rank waits: never a straggler signal
    d = one("rank-straggler", ctx_of({"compute_ms": compute, "comm_ms": comm}, ranks=2), module_fn="rank_straggler_metrics")
    assert d.facts["rank"] == 1 and d.onset.rank == 1 and d.facts["ratio"] > 10
    assert detect("rank-straggler", ctx_of({"comm_ms": comm}, ranks=2), module_fn="rank_straggler_metrics") == []


# ------------------------------------------------------------------ performance, memory, data


def test_step_time_rise_and_short_noisy_steps():
    rise = [50.0 + 1.2 * i + (200.0 if i % 37 == 0 else 0.0) for i in range(120)]
    d = one("step-time-regression", ctx_of({"step_time_ms": rise}), module_fn="step_time_regression_metrics")
    assert d.facts["kind"] == "rise" and max(d.causes, key=d.causes.get) == "growing_work"
    jitter = [0.7] * 100
    for i in range(0, 100, 4):
        jitter[i] = 13.5
    assert detect("step-time-regression", ctx_of({"step_time_ms": jitter}), module_fn="step_time_regression_metrics") == []


def test_dataloader_share_from_data_and_step_time():
    d = one("dataloader-bottleneck", ctx_of({"data_time_ms": [120.0] * 10, "step_time_ms": [160.0] * 10}),
            module_fn="dataloader_bottleneck_metrics")
    assert d.facts["data_share"] == pytest.approx(0.75) and d.onset.step == 2  # the first point is left out
    assert detect("dataloader-bottleneck", ctx_of({"data_time_ms": [1.0] * 10, "step_time_ms": [40.0] * 10}),
                  module_fn="dataloader_bottleneck_metrics") == []


def test_memory_leak_linear_and_plateau():
    d = one("memory-leak", ctx_of({"rss_mib": [350.0 + 2.5 * i for i in range(60)]}, every=5), module_fn="memory_leak_metrics")
    assert d.facts["slope_per_step"] == pytest.approx(0.5) and d.facts["r2"] == pytest.approx(1.0)
    plateau = [300.0 + 40 * (1 - math.exp(-i / 3)) for i in range(60)]
    assert detect("memory-leak", ctx_of({"rss_mib": plateau}), module_fn="memory_leak_metrics") == []


def test_class_imbalance_ratio_and_mild_skew():
    d = one("class-imbalance", ctx_of({"label_count_0": [748, 1491], "label_count_1": [45, 90], "label_count_2": [7, 19]}, start=25, every=25))
    assert d.facts["ratio"] == pytest.approx(1491 / 19) and d.onset.step == 25
    assert detect("class-imbalance", ctx_of({"label_count_0": [300], "label_count_1": [200], "label_count_2": [100]})) == []


# ------------------------------------------------------------------ through the text-log parser


def test_fp16_overflow_from_deepspeed_messages(tmp_path):
    """DeepSpeed's own overflow lines (formats.md §1.3), parsed from text: no loss-scale metric needed."""
    from tests.helpers import ingest_text

    lines = []
    for i in range(1, 41):
        lines.append(f"[2023-04-28 06:{10 + i // 60:02d}:{i % 60:02d},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={i * 10}, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]")
    scale = 65536
    for k in range(16):
        lines.append(f"[2023-04-28 06:20:{k:02d},648] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
                     f"Attempted loss scale: {scale}, reducing to {max(scale // 2, 1)}")
        scale = max(scale // 2, 1)
    ctx = Context(ingest_text(tmp_path, "\n".join(lines) + "\n"))
    d = one("fp16-overflow", ctx)
    # The metric parser turns the messages into loss_scale rows as well; either way the onset is the first message.
    assert d.facts["source"] in ("loss scale", "overflow messages") and d.onset.line == 41
    assert d.facts["calibration_points"] == 0 and "16 overflows" in d.summary


def test_nan_loss_and_explosion_from_plain_loop_text(tmp_path):
    """A plain loop's `step N loss X lr Y grad_norm Z` lines with inf/nan values, parsed from text."""
    from tests.helpers import ingest_text

    lines = [f"step {i} loss {2.0 + 0.01 * (i % 3):.4f} lr 1.000e-03 grad_norm {1.0 + 0.05 * (i % 4):.4f}" for i in range(1, 41)]
    lines += [f"step {40 + k} loss {10.0 ** k:.4f} lr 1.000e-03 grad_norm {20.0 ** k:.4f}" for k in range(1, 5)]
    lines += ["step 45 loss inf lr 1.000e-03 grad_norm inf", "step 46 loss nan lr 1.000e-03 grad_norm nan",
              "step 47 loss nan lr 1.000e-03 grad_norm nan", "Loss is nan, stopping training"]
    ctx = Context(ingest_text(tmp_path, "\n".join(lines) + "\n"))
    ge = one("gradient-explosion", ctx)
    assert ge.onset.step == 41 and ge.facts["first_nonfinite_step"] == 45
    nan = one("nan-loss", ctx)
    assert nan.onset.step == 45 and nan.facts["signal"] == "loss" and max(nan.causes, key=nan.causes.get) == "divergence"

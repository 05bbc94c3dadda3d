"""One-record metric shapes of real pastes: a loss of exactly 0 beside a perfect evaluation, a NaN grad norm with a
zeroed loss from the first logged step, the loader's first-batch wait coming back (no step time logged), an outer
tqdm bar over epochs whose postfix holds the loss at epoch 0; each with the near misses that must stay quiet.

Each log is a real shape (URL beside it); the numbers of a near miss are changed to the healthy case.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_timing_and_gradient_skip_rules import found, ids

# https://github.com/sthalles/deeplab_v3/issues/21 (foreground labelled 255, the ignore label): one summary line.
DEEPLAB = "Average train loss: {t}        Global Validation Avg Loss: {v}      MIoU: {m} \n"


def test_zero_loss_with_a_perfect_evaluation_from_the_start_is_loss_stagnation(tmp_path: Path):
    got = found(tmp_path, DEEPLAB.format(t=0.0, v=0.0, m=1.0))
    assert got and got[0] == ("loss-stagnation", "medium", ["labels_masked"]), got


def test_zero_loss_with_an_imperfect_evaluation_is_quiet(tmp_path: Path):
    # A training loss printed as 0.0 beside a validation that still errs: no proof the targets are gone.
    assert "loss-stagnation" not in ids(tmp_path, DEEPLAB.format(t=0.0, v=0.3121, m=0.7734))


def test_a_loss_that_learned_down_to_zero_is_quiet(tmp_path: Path):
    # Any logged loss above 0 before it: the run learned (or memorised) its set.
    text = DEEPLAB.format(t=0.6931, v=0.6012, m=0.5120) + DEEPLAB.format(t=0.0, v=0.0, m=1.0)
    assert "loss-stagnation" not in ids(tmp_path, text)


# https://github.com/tflearn/tflearn/issues/1065: val_acc 1.0 with a finite loss is a (suspiciously) good run, no finding.
TFLEARN = "| Adam | epoch: 004 | loss: 0.07474 - acc: 0.9941 | val_loss: 0.00234 - val_acc: 1.0000 -- iter: 4045/4045\n"


def test_a_perfect_validation_score_with_a_nonzero_loss_is_quiet(tmp_path: Path):
    assert "loss-stagnation" not in ids(tmp_path, TFLEARN)


# https://github.com/2U1/Qwen-VL-Series-Finetune/issues/10: HF dicts, grad_norm NaN from the first logged step.
HF = "{{'loss': {l}, 'grad_norm': {g}, 'learning_rate': 1.4925373134328357e-08, 'epoch': {e}}}\n"


def test_nan_grad_norm_from_the_first_step_then_a_zero_loss_is_a_nan_loss(tmp_path: Path):
    got = found(tmp_path, HF.format(l=1.0446, g="nan", e=0.0) + HF.format(l=0.0, g="nan", e=0.01))
    assert got and got[0][0] == "nan-loss", got


def test_nan_grad_norm_from_the_first_step_with_finite_losses_is_quiet(tmp_path: Path):
    # Two NaN grad norms beside real losses: under the three-in-a-row of a masked loss, and no zeroed loss.
    assert "nan-loss" not in ids(tmp_path, HF.format(l=1.0446, g="nan", e=0.0) + HF.format(l=1.0312, g="nan", e=0.01))


# mozilla/TTS speaker encoder (mozilla/TTS#407; the print format of TTS/speaker_encoder/train.py).
TTS = "   | > Step:{s}  Loss:0.71234  AvgLoss:0.73012  GradNorm:0.51234  StepTime:{t}  LoaderTime:{d}  AvGLoaderTime:{a}  LR:0.000100\n"
ELIDED = "> Step:{s} [...] LoaderTime:{d} [...]\n"


def test_the_first_batch_wait_coming_back_is_a_dataloader_bottleneck(tmp_path: Path):
    text = "".join(ELIDED.format(s=s, d=d) for s, d in zip(range(1, 6), [124.64, 1.34, 0.00, 0.00, 120.21], strict=True))
    got = found(tmp_path, text)
    assert got and got[0][:2] == ("dataloader-bottleneck", "medium"), got


def test_a_slow_first_batch_that_never_returns_is_quiet(tmp_path: Path):
    # Worker start-up (a long first batch) then a prefetched stream: warm-up, not a bottleneck.
    text = "".join(ELIDED.format(s=s, d=d) for s, d in zip(range(1, 7), [31.20, 0.02, 0.01, 0.00, 0.02, 0.01], strict=True))
    assert "dataloader-bottleneck" not in ids(tmp_path, text)


def test_short_recurring_waits_under_ten_seconds_are_quiet(tmp_path: Path):
    text = "".join(ELIDED.format(s=s, d=d) for s, d in zip(range(1, 7), [4.10, 0.02, 0.01, 3.90, 0.02, 0.01], strict=True))
    assert "dataloader-bottleneck" not in ids(tmp_path, text)


def test_loader_time_beside_a_longer_step_time_is_quiet(tmp_path: Path):
    # The full line: the share rules read LoaderTime against StepTime, and AvGLoaderTime is the meter's average.
    text = "".join(TTS.format(s=s, t=2.41, d=0.03, a=0.04) for s in range(10, 110, 10))
    assert "dataloader-bottleneck" not in ids(tmp_path, text)


def test_loader_time_dominating_the_step_time_is_a_dataloader_bottleneck(tmp_path: Path):
    text = "".join(TTS.format(s=s, t=0.45, d=3.12, a=3.05) for s in range(10, 110, 10))
    got = found(tmp_path, text)
    assert got and got[0][0] == "dataloader-bottleneck", got


# https://github.com/Haiyang-W/DSVT/issues/31 (OpenPCDet trainer): the outer `epochs` bar stays at 0/24 during epoch 0
# while the loop sets its postfix every step; a tensorboardX warning was glued into the line.
DSVT = ("epochs:   0%| | 0/24 [00:25<?, ?it/s, loss_hm={v}, loss_loc={v}, loss={v}, lr=2e-5, d_time=0.00(0.02), f_time=0.68(0.70), "
        "b_tWARNING:tensorboardX.x2num:NaN or Inf found in input tensor.               | 33/19761 [00:23<3:55:35,  1.40it/s, total_it=33]\n"
        "WARNING:tensorboardX.x2num:NaN or Inf found in input tensor.\n")


def test_outer_epoch_bar_postfix_nan_at_epoch_zero_is_a_nan_loss(tmp_path: Path):
    got = found(tmp_path, DSVT.format(v="nan"))
    assert got and got[0][:2] == ("nan-loss", "high"), got


def test_outer_epoch_bar_postfix_finite_at_epoch_zero_is_quiet(tmp_path: Path):
    # A finite loss in the postfix: the TensorBoard warning was about another scalar.
    assert ids(tmp_path, DSVT.format(v="1.8423")) == []


# bigscience-workshop/bigscience tr11-176B-ml chronicles.md (2022-04-28, one slow GPU): Megatron-DeepSpeed records.
MEGATRON = (" iteration {i}/  115311 | consumed samples:     71455664 | elapsed time per iteration (ms): {t} | learning rate: 4.475E-05 | "
            "global batch size:  2048 | lm loss: 2.117073E+00 | grad norm: 0.150 | number of skipped iterations:   0 | "
            "number of nan iterations:   0 |\n")


def megatron(times: list[float]) -> str:
    return "".join(MEGATRON.format(i=42780 + k, t=t) for k, t in enumerate(times))


def test_a_steady_run_stepping_down_five_percent_is_a_low_step_time_regression(tmp_path: Path):
    got = found(tmp_path, megatron([105160.0, 105170.0, 106250.0, 110170.0, 111140.0]))
    assert got and got[0] == ("step-time-regression", "low", ["straggler", "throttling"]), got


def test_a_noisy_run_of_the_same_size_is_quiet(tmp_path: Path):
    # epfLLM/Megatron-LLM#11: 126995.3, 125553.7, 127804.5, 130554.9, 127859.5 ms, a +-2% wobble.
    assert "step-time-regression" not in ids(tmp_path, megatron([126995.3, 125553.7, 127804.5, 130554.9, 127859.5]))


def test_one_slow_record_at_the_end_is_quiet(tmp_path: Path):
    # A checkpoint or evaluation inside the last interval: one slow point, not a new pace.
    assert "step-time-regression" not in ids(tmp_path, megatron([105160.0, 105170.0, 105190.0, 105150.0, 112140.0]))

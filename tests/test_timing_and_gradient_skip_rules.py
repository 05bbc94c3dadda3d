"""Short real pastes: timing-only lines, clock-printed intervals, NaN-gradient skips, a NaN grad norm with a zeroed
loss, LoRA-up weight dumps; each with the near misses that must stay quiet (or below medium).

Each log is a real shape (URL beside it), shortened; the numbers of a near miss are changed to the healthy case.
"""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def found(tmp: Path, text: str) -> list[tuple[str, str, list[str]]]:
    """(playbook, severity, first causes) of every finding above info for a one-file run, in report order."""
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [(f.playbook.id, f.severity.name.lower(), [c.cause.id for c in f.causes][:2])
            for f in a.findings if f.severity.name.lower() != "info"]


def ids(tmp: Path, text: str) -> list[str]:
    return [f[0] for f in found(tmp, text)]


# https://github.com/guoqincode/Open-AnimateAnyone/issues/101: timing-only lines, a data stall every few steps.
def timing(data: list[float], step: list[float]) -> str:
    return "".join(f"load_data_time: {d}, train_step_time: {s}\n" for d, s in zip(data, step, strict=True))


STEPS = [0.665, 0.652, 0.640, 0.686, 0.664, 0.639]


def test_periodic_data_stall_above_the_step_time_is_a_dataloader_bottleneck(tmp_path):
    # The data time exceeds the step time at the stall: that step time excludes the wait (share = d / (d + s)).
    got = found(tmp_path, timing([0.0001, 0.0001, 0.0001, 19.6173, 0.0002, 0.0002], STEPS))
    assert got and got[0][:2] == ("dataloader-bottleneck", "medium"), got


def test_timing_lines_with_a_negligible_data_time_are_quiet(tmp_path):
    assert "dataloader-bottleneck" not in ids(tmp_path, timing([0.0001, 0.0001, 0.0002, 0.0003, 0.0002, 0.0002], STEPS))


# mmengine `time:` (the whole iteration) and `data_time:` (https://github.com/open-mmlab/mmpose/pull/2501).
MM = ("2023/07/22 14:35:{s:02d} - mmengine - INFO - Epoch(train)   [1][{i:4d}/4682]  lr: 5.0e-05  eta: 2 days, 12:20:00  "
      "time: {t}  data_time: {d}  memory: 2769  loss: 0.002122  loss_kpt: 0.002122  acc_pose: 0.12\n")


def mm(times: list[tuple[float, float]]) -> str:
    return "".join(MM.format(s=i, i=350 + 50 * i, t=t, d=d) for i, (t, d) in enumerate(times))


def test_data_a_third_of_the_step_is_a_low_note_not_an_alarm(tmp_path):
    got = found(tmp_path, mm([(0.2156, 0.0704), (0.2188, 0.0700), (0.2140, 0.0687), (0.2293, 0.0841), (0.2131, 0.0678), (0.2161, 0.0680)]))
    assert ("dataloader-bottleneck", "low") in [g[:2] for g in got], got


def test_data_most_of_the_step_stays_medium(tmp_path):
    got = found(tmp_path, mm([(0.90, 0.70), (0.91, 0.72), (0.89, 0.69), (0.92, 0.71), (0.90, 0.70), (0.93, 0.72)]))
    assert ("dataloader-bottleneck", "medium") in [g[:2] for g in got], got


# https://github.com/xingyizhou/CenterNet/issues/604: the progress bar's Data/Net meters deep into an epoch.
CENTERNET = ("ctdet/coco_dla |##########                      | train: [54][4784/14785]|Tot: 1:20:53 |ETA: 6:14:23 "
             "|loss 1.7448 |hm_loss 1.3093 |wh_loss 2.2258 |off_loss 0.2129 |Data 3.556s({d}s) |Net 1.014s\n")


def test_progress_bar_data_average_half_the_batch_time_is_a_bottleneck(tmp_path):
    assert ids(tmp_path, CENTERNET.format(d="0.517"))[:1] == ["dataloader-bottleneck"]


def test_progress_bar_small_data_average_is_quiet(tmp_path):
    assert "dataloader-bottleneck" not in ids(tmp_path, CENTERNET.format(d="0.021"))


# Stack Overflow 50899548 (PyTorch LSTM epochs getting slower): `time delta` printed as h:mm:ss.ffffff per 10 epochs.
def deltas(seconds: list[float]) -> str:
    return "".join(f"epoch: {10 * i:3d},     loss: 0.2,   time delta: 0:00:{s:09.6f}\n" for i, s in enumerate(seconds))


def test_clock_printed_interval_rising_steadily_is_a_step_time_regression(tmp_path):
    got = found(tmp_path, deltas([0.005673, 0.208632, 0.494301, 0.784275, 1.074783, 1.372082, 1.659371, 1.958451, 2.262113]))
    assert got and got[0][0] == "step-time-regression", got


def test_short_series_with_a_slow_first_interval_is_quiet(tmp_path):
    assert "step-time-regression" not in ids(tmp_path, deltas([2.1, 0.61, 0.60, 0.62, 0.59, 0.61, 0.60, 0.62, 0.61]))


def test_short_series_with_thirty_percent_noise_is_quiet(tmp_path):
    assert "step-time-regression" not in ids(tmp_path, deltas([0.6, 0.45, 0.78, 0.52, 0.74, 0.47, 0.77, 0.50, 0.76]))


def test_a_cumulative_clock_is_no_step_time(tmp_path):
    # `Elapsed Time: h:mm:ss` grows by construction: it must not read as slower and slower steps.
    text = "".join(f"epoch: {i}, loss: 0.2, Elapsed Time: 0:{2 * i:02d}:00\n" for i in range(1, 10))
    assert "step-time-regression" not in ids(tmp_path, text)


# https://github.com/hiyouga/LlamaFactory/issues/4202: HF dicts, a NaN grad norm, then the loss reads exactly 0.
HF = "{{'loss': {l}, 'grad_norm': {g}, 'learning_rate': 4.9997e-05, 'epoch': {e}}}\n"


def test_nan_grad_norm_then_a_zero_loss_is_a_nan_loss(tmp_path):
    text = HF.format(l=3.5967, g=7.328238010406494, e=0.01) + HF.format(l=63.3672, g="nan", e=0.02) + HF.format(l=0.0, g="nan", e=0.02)
    got = found(tmp_path, text)
    assert got and got[0][0] == "nan-loss", got


def test_one_nan_grad_norm_with_a_finite_loss_is_quiet(tmp_path):
    text = HF.format(l=3.5967, g=7.3, e=0.01) + HF.format(l=3.41, g="nan", e=0.02) + HF.format(l=3.38, g=6.9, e=0.03)
    assert "nan-loss" not in ids(tmp_path, text)


# https://github.com/espnet/espnet/issues/3170: ESPnet2 skips every update for a NaN grad norm, the CTC loss finite.
SKIP = "[user] 2021-04-23 19:22:5{i},420 (trainer:581) WARNING: The grad norm is {v}. Skipping updating the model.\n"
ESPNET = ("[user] 2021-04-23 19:22:56,245 (trainer:636) INFO: 2epoch:train:12009-12640batch: iter_time=3.163e-04, forward_time=0.110, "
          "loss=65.129, loss_att=124.079, loss_ctc=144.685, acc=0.065, backward_time=0.086, optim0_lr0=1.485e-05, train_time=0.624\n")


def test_nan_gradient_skips_with_a_finite_ctc_loss_are_bad_input_data(tmp_path):
    got = found(tmp_path, "".join(SKIP.format(i=i, v="nan") for i in range(5)) + ESPNET)
    assert got and got[0][0] == "bad-input-data" and got[0][2][0] == "infeasible_samples", got


def test_one_or_two_nan_gradient_skips_are_quiet(tmp_path):
    assert "bad-input-data" not in ids(tmp_path, "".join(SKIP.format(i=i, v="nan") for i in range(2)) + ESPNET)


def test_inf_gradient_skips_are_overflow_not_bad_data(tmp_path):
    assert "bad-input-data" not in ids(tmp_path, "".join(SKIP.format(i=i, v="inf") for i in range(5)) + ESPNET)


# kohya-ss/sd-scripts#91 and the sd-scripts README (`networks/check_lora_weights.py` output).
DUMP = "number of LoRA-up modules: 264\n" + "".join(
    f"lora_te_text_model_encoder_layers_{i}_mlp_fc{j}.lora_up.weight,{{v{j}}}\n" for i in range(3) for j in (1, 2))


def test_lora_up_dump_all_zero_is_lora_silent_zero(tmp_path):
    got = found(tmp_path, DUMP.format(v1="0.0", v2="0.0"))
    assert got and got[0][0] == "lora-silent-zero", got


def test_lora_up_dump_with_some_zero_modules_is_quiet(tmp_path):
    # The README: with clip_skip=2 some text-encoder modules stay 0.0 legitimately while the rest train.
    assert "lora-silent-zero" not in ids(tmp_path, DUMP.format(v1="0.0", v2="0.0028684409335255623"))

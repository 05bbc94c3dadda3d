"""Metric playbooks deciding from a handful of points when the signal is blatant, and the near misses that stay quiet.

Each log is a real shape (URL beside it), shortened; the numbers of a near miss are changed to the healthy case.
"""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def findings(tmp: Path, text: str) -> dict[str, str]:
    """playbook -> severity of every finding above info for a one-file run."""
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return {f.playbook.id: f.severity.name.lower() for f in a.findings if f.severity.name.lower() != "info"}


def first(tmp: Path, text: str) -> str | None:
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    top = [f for f in a.findings if f.severity.name.lower() != "info"]
    return top[0].playbook.id if top else None


# https://github.com/dragen1860/TensorFlow-2.x-Tutorials (convnets) shape: `Epoch: [k/N], Loss: .., Accuracy: ..`
CHANCE_10 = "".join(f"Epoch: [{i}/100], Loss: {loss}, Accuracy: {acc}\n" for i, (loss, acc) in
                    enumerate([(2.3297, 10.17), (2.3075, 10.07), (2.3041, 10.19), (2.3037, 10.09)], 1))


def test_loss_at_ln10_with_accuracy_at_one_tenth_is_stagnation(tmp_path):
    assert first(tmp_path, CHANCE_10) == "loss-stagnation"


def test_loss_passing_through_ln10_while_accuracy_rises_is_quiet(tmp_path):
    # A healthy CIFAR-10 start: epoch 1 near chance, then learning.
    text = "".join(f"Epoch: [{i}/100], Loss: {loss}, Accuracy: {acc}\n" for i, (loss, acc) in
                   enumerate([(2.3050, 10.4), (1.9100, 30.2), (1.6200, 41.0), (1.4100, 49.5)], 1))
    assert "loss-stagnation" not in findings(tmp_path, text)


def test_loss_falling_onto_ln10_with_accuracy_near_one_tenth_is_quiet(tmp_path):
    # A sequence model whose token accuracy passes 0.1 while its loss falls from 4.4 through 2.30 (real shape:
    # the TF transformer tutorial, tensorflow/tensorflow#28405): the last points sit at ln(10) on the way down.
    text = "".join(f"Epoch {e} Batch {b} Loss {loss} Accuracy {acc}\n" for e, b, loss, acc in
                   [(1, 0, 4.4382, 0.0), (1, 500, 3.4579, 0.0389), (2, 0, 2.6457, 0.1018), (2, 500, 2.3402, 0.1217),
                    (2, 1000, 2.2758, 0.1303)])
    assert "loss-stagnation" not in findings(tmp_path, text)


def test_loss_at_ln10_with_accuracy_far_from_chance_is_quiet(tmp_path):
    # The loss alone near 2.30 is no chance level when the accuracy says the model predicts well above 1/K.
    text = "".join(f"Epoch: [{i}/100], Loss: {loss}, Accuracy: 62.5\n" for i, loss in enumerate([2.31, 2.30, 2.305, 2.302], 1))
    assert "loss-stagnation" not in findings(tmp_path, text)


def test_binary_loss_pinned_at_ln2_from_the_first_point(tmp_path):
    # https://github.com/snorkel-team/snorkel/issues/870 shape: `batch step: N loss: X` at 0.69-0.72.
    vals = [0.7063, 0.7176, 0.6901, 0.7032, 0.7460, 0.7171, 0.7121, 0.7001, 0.7168, 0.6941, 0.7056]
    text = "".join(f"2018-02-12 19:10:{10 + i},867:INFO: batch step: {i + 5} loss: {v}\n" for i, v in enumerate(vals))
    assert first(tmp_path, text) == "loss-stagnation"


def test_binary_loss_falling_below_ln2_is_quiet(tmp_path):
    vals = [0.6950, 0.6810, 0.6500, 0.6020, 0.5510, 0.5120, 0.4800, 0.4410]
    text = "".join(f"2018-02-12 19:10:{10 + i},867:INFO: batch step: {i + 5} loss: {v}\n" for i, v in enumerate(vals))
    assert "loss-stagnation" not in findings(tmp_path, text)


def test_flat_loss_at_no_class_count_is_quiet(tmp_path):
    # Flat at 1.5 (ln 4.48): no common class count, no accuracy to name K -> not a chance level.
    vals = [1.52, 1.49, 1.51, 1.50, 1.50, 1.49]
    text = "".join(f"step {i} loss {v}\n" for i, v in enumerate(vals))
    assert "loss-stagnation" not in findings(tmp_path, text)


# https://github.com/facebookresearch/fairseq/issues/41 shape: old fairseq-py progress lines.
FS = "| epoch 001  {u} / 331737 loss={loss} (9.0), wps=18515, wpb=31259, bsz=861, lr=1.25, clip=100%, gnorm={g}\n"


def test_grad_norm_jumping_four_orders_of_magnitude_in_a_short_series(tmp_path):
    text = "".join(FS.format(u=1000 * i, loss=loss, g=g) for i, (loss, g) in
                   enumerate([(9.57, 2.054), (8.61, 1.7149), (7.50, 2.7501), (6.87, 100615.8788), (10405.01, 1.5e12), (4.7e9, "inf")], 1))
    got = findings(tmp_path, text)
    assert got.get("gradient-explosion") == "high"
    assert first(tmp_path / "again", text) == "gradient-explosion"


def test_grad_norm_wobbling_threefold_in_a_short_series_is_quiet(tmp_path):
    text = "".join(FS.format(u=1000 * i, loss=loss, g=g) for i, (loss, g) in
                   enumerate([(9.57, 2.054), (8.61, 1.7149), (7.50, 6.2), (6.87, 2.4), (6.5, 5.9)], 1))
    assert "gradient-explosion" not in findings(tmp_path, text)


# https://github.com/mikecovlee/... (trace#5) shape: tqdm description `Epoch e, Step s, Loss: x`.
def _epochs(first: list[float], second: list[float]) -> str:
    out = []
    n = 0
    for e, losses in ((1, first), (2, second)):
        for s, v in enumerate(losses):
            n += 1
            out.append(f"Epoch {e}, Step {s}, Loss: {v:.4f}:   {n}%|▏         | {n}/144 [00:0{n % 10}<02:35,  1.09s/it]\n")
    return "".join(out)


def test_losses_replaying_the_previous_epoch_exactly(tmp_path):
    ep = [0.9741, 1.3742, 1.2390, 0.9670, 1.0386, 1.1681]
    assert first(tmp_path, _epochs(ep, ep)) == "lora-silent-zero"


def test_losses_that_repeat_a_value_by_chance_are_no_replay(tmp_path):
    ep1 = [0.9741, 1.3742, 1.2390, 0.9670, 1.0386, 1.1681]
    ep2 = [0.9741, 1.3011, 1.1802, 0.9670, 0.9911, 1.0507]  # two coincidences, not a run
    assert "lora-silent-zero" not in findings(tmp_path, _epochs(ep1, ep2))


# https://github.com/PaddlePaddle/PaddleOCR/issues/2083 shape: Paddle `reader_cost: x s, batch_cost: y s`.
PADDLE = ("[2021/02/23 22:5{i}:00] root INFO: epoch: [5/500], iter: {it}, lr: 0.001000, loss: 4.88, acc: 0.59, "
          "reader_cost: {r} s, batch_cost: {b} s, samples: 960, ips: 16.05\n")


def test_reader_cost_dominating_batch_cost_on_a_few_points(tmp_path):
    text = "".join(PADDLE.format(i=i, it=11550 + 10 * i, r=r, b=b) for i, (r, b) in
                   enumerate([(5.33854, 5.97875), (3.18704, 3.77421), (2.21899, 2.78157), (3.84420, 4.39655)]))
    assert first(tmp_path, text) == "dataloader-bottleneck"


def test_reader_cost_high_only_at_the_first_logged_point_is_warmup(tmp_path):
    text = "".join(PADDLE.format(i=i, it=10 + 10 * i, r=r, b=b) for i, (r, b) in
                   enumerate([(5.33854, 5.97875), (0.0021, 0.7742), (0.0019, 0.7816), (0.0020, 0.7965)]))
    assert "dataloader-bottleneck" not in findings(tmp_path, text)


# https://github.com/AlfredXiangWu/LightCNN/issues/16 (healthy): the epoch's batch 0 waits, the rest do not.
IMAGENET = "Epoch: [{e}][{b}/3907]\tTime {t} ({ta})\tData {d} ({da})\tLoss 6.1796 (6.3176)\tPrec@1 0.000 (0.348)\n"


def test_imagenet_meters_with_only_the_epochs_first_batch_waiting_are_quiet(tmp_path):
    text = "".join(IMAGENET.format(e=5, b=b, t=t, ta=ta, d=d, da=da) for b, t, ta, d, da in
                   [(0, 0.543, 0.543, 0.466, 0.466), (100, 0.182, 0.186, 0.000, 0.005), (200, 0.182, 0.185, 0.000, 0.003),
                    (300, 0.186, 0.185, 0.000, 0.002)])
    assert "dataloader-bottleneck" not in findings(tmp_path, text)


def test_imagenet_running_averages_dominated_by_data_time(tmp_path):
    # https://github.com/D-X-Y/NAS-Bench-201/issues/15 shape: batch 0 and batch 200 of an epoch.
    text = "".join(IMAGENET.format(e=0, b=b, t=t, ta=ta, d=d, da=da) for b, t, ta, d, da in
                   [(0, 203.582, 203.582, 196.425, 196.425), (200, 0.550, 12.315, 0.001, 11.761)])
    assert first(tmp_path, text) == "dataloader-bottleneck"


# https://github.com/pytorch/fairseq/issues/512 shape: epoch summary, then halvings down to the floor mid-run.
def test_loss_scale_halved_again_and_again_deep_into_training(tmp_path):
    text = ("| epoch 027 | loss 6.343 | nll_loss 4.984 | ppl 31.65 | wps 164346 | ups 0.4 | wpb 364096 | bsz 11907 | "
            "num_updates 10198 | lr 0.000626286 | gnorm 0.390 | clip 0% | oom 0 | loss_scale 0.500 | wall 23080 | train_wall 21383\n"
            + "".join(f"| WARNING: overflow detected, setting loss scale to: {0.5 / 2 ** k}\n" for k in range(1, 9)))
    assert first(tmp_path, text) == "fp16-overflow"


def test_a_few_overflows_at_start_up_are_calibration(tmp_path):
    text = "".join(f"| WARNING: overflow detected, setting loss scale to: {128.0 / 2 ** k}\n" for k in range(1, 4)) + "".join(
        f"| epoch 001:  {i * 100} / 5000 loss=9.{i}, nll_loss=8.{i}, ppl=512, wps=16000, ups=1, wpb=16000, bsz=500, num_updates={i * 100}, "
        f"lr=0.0005, gnorm=1.2, clip=0%, oom=0, loss_scale=16\n" for i in range(1, 6))
    assert "fp16-overflow" not in findings(tmp_path, text)


# https://github.com/clovaai/bros/issues/11 shape: `TRAIN [epoch: k/50] || train_loss: .. || lr: .. || time: .. secs.`
BROS = "TRAIN [epoch: {e}/{t}] || train_loss: {loss} || lr: {lr} || time: 197.6 secs.\n"


def test_lr_decayed_to_zero_a_tenth_into_the_run(tmp_path):
    text = "".join(BROS.format(e=e, t=50, loss=460 / (e + 1), lr=lr) for e, lr in enumerate(["4e-05", "3e-05", "2e-05", "1e-05", "0.0"]))
    assert first(tmp_path, text) == "lr-schedule-anomaly"


def test_lr_decayed_to_zero_at_the_last_epoch_is_quiet(tmp_path):
    text = "".join(BROS.format(e=e, t=5, loss=460 / (e + 1), lr=lr) for e, lr in enumerate(["4e-05", "3e-05", "2e-05", "1e-05", "0.0"]))
    assert "lr-schedule-anomaly" not in findings(tmp_path, text)


def test_loss_falling_through_ln10_on_its_way_down_is_quiet(tmp_path):
    # A healthy fine-tune whose last points happen to sit near 2.30 (sample_logs/tokenizer-mismatch-nearmiss shape).
    vals = [3.307, 3.002, 2.733, 2.612, 2.512, 2.416, 2.402, 2.314, 2.323, 2.297]
    text = "".join(f"step {5 * (i + 1)} loss {v}\n" for i, v in enumerate(vals))
    assert "loss-stagnation" not in findings(tmp_path, text)

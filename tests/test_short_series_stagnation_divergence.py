"""Short-series rules: a loss and accuracy repeating exactly, top-1/top-5 at chance, divergence after the minimum
with a rising grad norm, a NaN GAN loss in a progress-bar postfix; and the near misses that stay quiet.

Each log is a real shape (URL beside it), shortened; the numbers of a near miss are changed to the healthy case.
"""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def findings(tmp: Path, text: str) -> list[str]:
    """Playbooks of the findings above info, in rank order, for a one-file run."""
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f.playbook.id for f in a.findings if f.severity.name.lower() != "info"]


def keras(records: list[tuple[float, float]]) -> str:
    # https://github.com/keras-team/keras/issues/4784 (Keras 1 epoch lines).
    return "".join(f"Epoch {i}/100\n10131566/10131566 [==============================] - 340s - loss: {loss:.4f} - acc: {acc:.4f}\n"
                   for i, (loss, acc) in enumerate(records, 1))


def test_loss_and_accuracy_repeating_exactly_is_stagnation(tmp_path):
    assert findings(tmp_path, keras([(4.4380, 0.7247)] * 6))[:1] == ["loss-stagnation"]


def test_four_repeats_are_not_enough(tmp_path):
    # The losses sit off Keras' saturated-softmax line (16.118 × (1 − acc) ≈ 4.44 at this accuracy), which is a
    # stagnation proof of its own (tests/test_saturated_softmax_and_entity_counts.py): only the repeat count is tested.
    assert "loss-stagnation" not in findings(tmp_path, keras([(1.4391, 0.7244)] + [(1.4380, 0.7247)] * 4))


def test_constant_loss_with_moving_accuracy_is_quiet(tmp_path):
    assert "loss-stagnation" not in findings(tmp_path, keras([(0.6931, a) for a in (0.51, 0.55, 0.58, 0.61, 0.63, 0.66)]))


def test_memorised_training_set_repeating_is_quiet(tmp_path):
    assert "loss-stagnation" not in findings(tmp_path, keras([(0.0001, 1.0)] * 8))


def test_constant_normalised_loss_with_moving_grad_norm_is_quiet(tmp_path):
    # https://github.com/JeffWang987/OpenOccupancy/issues/22 (mmdet lines; loss terms divided by their detached value).
    text = "".join(f"2023-04-21 22:56:43,536 - mmdet - INFO - Epoch [1][{50 * i}/28130]\tlr: 3.000e-04, time: 2.615, "
                   f"data_time: 0.090, loss_depth: 1.0000, loss: 9.0000, acc: 61.2000, grad_norm: {g}\n"
                   for i, g in enumerate((9.1886, 10.1773, 8.77, 9.95, 11.2, 9.4), 1))
    assert "loss-stagnation" not in findings(tmp_path, text)


def cxxnet(rounds: list[tuple[float, float]], batches: int = 300) -> str:
    # https://github.com/dmlc/cxxnet/issues/245 (CIFAR-10 rounds) and #84 (ImageNet rounds).
    return "".join(f"round {r:8d}:[{batches:8d}] {300 * (r + 1)} sec elapsed[{r + 1}]\ttrain-error:{1 - t1:.6g}\t"
                   f"train-rec@1:{t1:.6g}\ttrain-rec@5:{t5:.6g}\n" for r, (t1, t5) in enumerate(rounds))


def test_cifar10_top1_and_top5_at_chance_over_rounds_is_stagnation(tmp_path):
    assert findings(tmp_path, cxxnet([(0.101263, 0.497522), (0.100923, 0.4998), (0.0977861, 0.498302)]))[:1] == ["loss-stagnation"]


def test_old_cxxnet_round_lines_at_imagenet_chance_are_stagnation(tmp_path):
    # https://github.com/dmlc/cxxnet/issues/3 (`[N] test-error:.. train-rec@1:..`, no round head).
    text = ("[1] test-error:0.998998 test-rec@1:0.001002 test-rec@5:0.005008 train-error:0.999028\ttrain-rec@1:0.000972\ttrain-rec@5:0.004782\n"
            "[2] test-error:0.998998 test-rec@1:0.001002 test-rec@5:0.005008 train-error:0.999058\ttrain-rec@1:0.000942\ttrain-rec@5:0.004806\n"
            "[3] test-error:0.999018 test-rec@1:0.000982 test-rec@5:0.004988 train-error:0.999038\ttrain-rec@1:0.000962\ttrain-rec@5:0.004808\n")
    assert findings(tmp_path, text)[:1] == ["loss-stagnation"]


def test_rounds_that_learn_are_quiet(tmp_path):
    assert "loss-stagnation" not in findings(tmp_path, cxxnet([(0.101, 0.497), (0.35, 0.86), (0.52, 0.94)]))


def imagenet(points: list[tuple[int, float, float]]) -> str:
    # The PyTorch ImageNet example's meters (pytorch/examples imagenet/main.py ProgressMeter), percentages; the
    # loss falls from ln(1000) as a healthy start's does (a flat loss is the window rule's, tested elsewhere).
    return "".join(f"Epoch: [0][{b:4d}/5005]\tTime  0.154 ( 0.160)\tData  0.001 ( 0.002)\tLoss {6.93 - 0.4 * j:.4e} (6.9)\t"
                   f"Acc@1 {a1:6.2f} ({a1:6.2f})\tAcc@5 {a5:6.2f} ({a5:6.2f})\n" for j, (b, a1, a5) in enumerate(points))


def test_healthy_imagenet_start_leaving_chance_is_quiet(tmp_path):
    pts = [(b, a1, a5) for b, a1, a5 in [(100, 0.10, 0.50), (300, 0.20, 0.98), (600, 0.9, 3.6), (1000, 2.1, 7.5), (1500, 3.4, 11.0), (2500, 5.0, 15.2)]]
    assert "loss-stagnation" not in findings(tmp_path, imagenet(pts))


def test_first_hundreds_of_batches_at_chance_are_quiet(tmp_path):
    pts = [(b, 0.10, 0.49) for b in range(10, 400, 80)]
    assert "loss-stagnation" not in findings(tmp_path, imagenet(pts))


def test_imagenet_meters_at_chance_for_thousands_of_batches_are_stagnation(tmp_path):
    pts = [(b, 0.10, 0.50) for b in range(100, 3100, 500)]
    a = analyze(Context(ingest(write_run(tmp_path, {"train.log": imagenet(pts)}))))
    assert a.findings[0].playbook.id == "loss-stagnation" and "uniform guess" in a.findings[0].summary


def trajectory(points: list[tuple[int, float, float]], lr: list[float] | None = None) -> str:
    # https://github.com/paiml/entrenar/issues/274 (`step=N loss=X gnorm=Y` with hand notes).
    out = ""
    for j, (s, loss, g) in enumerate(points):
        extra = f"  lr={lr[j]:.1e}" if lr else ""
        out += f"step={s:<4d} loss={loss:<6.2f} gnorm={g}{extra}\n"
    return out


def test_loss_climbing_back_from_its_minimum_with_rising_grad_norm_is_explosion(tmp_path):
    pts = [(1, 11.2, 30.1), (100, 6.1, 12.0), (200, 2.9, 6.3), (300, 2.1, 5.9), (400, 7.4, 18.0), (500, 8.8, 25.2), (600, 10.9, 41.0)]
    assert findings(tmp_path, trajectory(pts))[:1] == ["gradient-explosion"]


def test_three_x_wobble_that_recovers_is_quiet(tmp_path):
    pts = [(1, 11.2, 30.1), (100, 6.1, 12.0), (200, 2.9, 6.3), (300, 2.1, 5.9), (400, 6.3, 18.0), (500, 3.0, 9.2), (600, 2.2, 6.0)]
    assert "gradient-explosion" not in findings(tmp_path, trajectory(pts))


def test_loss_rising_at_a_warm_restart_of_the_lr_is_quiet(tmp_path):
    pts = [(1, 11.2, 30.1), (100, 6.1, 12.0), (200, 2.9, 6.3), (300, 2.1, 5.9), (400, 7.4, 18.0), (500, 8.8, 25.2), (600, 10.4, 41.0)]
    lr = [1e-4, 8e-5, 4e-5, 1e-5, 1e-4, 9e-5, 8e-5]
    assert "gradient-explosion" not in findings(tmp_path, trajectory(pts, lr))


def test_early_noise_of_a_loss_that_never_fell_is_quiet(tmp_path):
    pts = [(1, 11.2, 30.1), (10, 10.9, 12.0), (20, 11.0, 60.3), (30, 11.6, 75.9), (40, 11.4, 80.0)]
    assert "gradient-explosion" not in findings(tmp_path, trajectory(pts))


def test_loss_rising_while_the_grad_norm_stays_is_not_explosion(tmp_path):
    pts = [(1, 11.2, 30.1), (100, 6.1, 12.0), (200, 2.9, 6.3), (300, 2.1, 5.9), (400, 7.4, 6.0), (500, 8.8, 6.2), (600, 10.4, 6.1)]
    assert "gradient-explosion" not in findings(tmp_path, trajectory(pts))


def test_nan_gan_loss_in_a_progress_postfix_is_nan_loss(tmp_path):
    # https://github.com/marcoppasini/musika/issues/22 (`set_postfix(DR=.., DF=.., G=.., GP=..)`).
    text = "Epoch 12/250: 100%|████████| 9375/9375 [07:09<00:00, 21.80it/s, DR=0.41, DF=nan, G=1.93, GP=3.2, LR=0.0001, TIME=0.0611]\n"
    assert findings(tmp_path, text)[:1] == ["nan-loss"]


def test_nan_errg_in_a_dcgan_postfix_is_nan_loss(tmp_path):
    # The PyTorch DCGAN example's names (`errD`, `errG`) set as a tqdm postfix.
    text = "Epoch 3: 100%|██████████| 1583/1583 [05:11<00:00,  5.08it/s, errD=0.512, errG=nan]\n"
    assert findings(tmp_path, text)[:1] == ["nan-loss"]


def test_nan_grad_norm_in_a_progress_postfix_is_no_nan_loss(tmp_path):
    # An fp16 overflow skip logs a non-finite grad norm once; the loss stays finite.
    text = "Epoch 3: 100%|██████████| 1583/1583 [05:11<00:00,  5.08it/s, loss=2.31, grad_norm=nan, lr=0.0001]\n"
    assert "nan-loss" not in findings(tmp_path, text)

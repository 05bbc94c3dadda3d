"""Per-epoch metric shapes: fastai's fit results table, one accuracy line per epoch, a few late Caffe iterations at
ln(K), and metrics no correct loss can print (perplexity below 1); each with the near misses that stay quiet.

Each log is a real shape (URL beside it), shortened; the numbers of a near miss are changed to the healthy case.
"""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import tables, write_run


def findings(tmp: Path, text: str) -> list[str]:
    """Playbooks of the findings above info, in rank order, for a one-file run."""
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [f.playbook.id for f in a.findings if f.severity.name.lower() != "info"]


def rows(tmp: Path, text: str) -> list[tuple]:
    (m,) = tables(tmp, {"train.log": text}, "metrics")
    return m.sort("line", maintain_order=True).select("line", "step", "name", "value").rows()


# --- fastai fit results tables ---------------------------------------------------------------------------------------

# fastai v2 in a terminal (header of fastai/fastai#2512, timeseriesAI/tsai#204): 0-based epochs, a `time` column.
FASTAI_V2 = """epoch     train_loss  valid_loss  accuracy  time
0         1.102223    0.367693    0.916667  00:00
1         0.688286    0.281458    0.916667  00:01
2         0.508243    0.329499    0.916667  01:05
"""
# fastai v1 (n-waves/ulmfit-multilingual training logs): 1-based epochs, no `time`.
FASTAI_V1 = """Training lm from random weights
epoch     train_loss  valid_loss  accuracy
1         3.269541    3.451855    0.387471
2         3.161740    3.423016    0.386158
3         3.187431    3.419638    0.388626
4         3.115763    3.357066    0.393877
5         2.996527    3.291787    0.402488
6         3.021759    3.202183    0.410873
"""


def test_fastai_v2_table_rows_are_read_with_epoch_time(tmp_path):
    got = rows(tmp_path, FASTAI_V2)
    assert (2, 0, "loss", 1.102223) in got and (2, 0, "eval_loss", 0.367693) in got and (2, 0, "accuracy", 0.916667) in got
    assert (4, 2, "epoch_time_ms", 65000.0) in got and (3, 1, "epoch_time_ms", 1000.0) in got


def test_fastai_v1_table_is_read_and_a_learning_run_is_quiet(tmp_path):
    got = rows(tmp_path, FASTAI_V1)
    assert [r[3] for r in got if r[2] == "loss"] == [3.269541, 3.16174, 3.187431, 3.115763, 2.996527, 3.021759]
    assert findings(tmp_path / "q", FASTAI_V1) == []


def test_fastai_table_with_a_note_between_rows_keeps_its_header(tmp_path):
    # A SaveModelCallback line between the rows (a fastai fine-tuning log with roc_auc/average_precision metrics).
    text = ("epoch     train_loss  valid_loss  roc_auc_score  average_precision_score  time    \n"
            "0         0.571278    1.090870    0.156250       0.255556                 00:23     \n"
            "Better model found at epoch 0 with valid_loss value: 1.0908700227737427.\n"
            "1         0.377181    1.590721    0.406250       0.488095                 00:22     \n")
    got = rows(tmp_path, text)
    assert (4, 1, "loss", 0.377181) in got and (4, 1, "roc_auc_score", 0.40625) in got


def test_markdown_collapsed_fastai_table_with_nan_is_nan_loss(tmp_path):
    # fastai/fastai#941 pasted outside a code block: spaces collapsed, `_loss valid_` taken as italics.
    text = "epoch train loss valid loss accuracy_thresh f2_opt\n0 nan nan 0.997788 0.000000\n"
    got = rows(tmp_path, text)
    assert [(r[1], r[2]) for r in got] == [(0, "epoch"), (0, "loss"), (0, "eval_loss"), (0, "accuracy_thresh"), (0, "f2_opt")]
    assert findings(tmp_path / "f", text)[:1] == ["nan-loss"]


def test_single_spaced_lines_that_are_no_fit_table_give_no_rows(tmp_path):
    # Prose that names the losses, and a row whose cell count is not the header's.
    assert rows(tmp_path, "the train loss and valid loss both went down\n0 0.5 0.6\n") == []
    assert rows(tmp_path / "b", "epoch train loss valid loss accuracy\n0 0.5 0.6\n") == []


# --- one accuracy line per epoch -------------------------------------------------------------------------------------

def mlx(accs: list[float]) -> str:
    # ml-explore/mlx#188: the MLX docs' MLP-on-MNIST example prints one test accuracy per epoch.
    return "".join(f"Epoch {i}: Test accuracy {a:.3f}\n" for i, a in enumerate(accs))


def test_accuracy_identical_from_the_first_epoch_is_stagnation(tmp_path):
    assert findings(tmp_path, mlx([0.113] * 10)) == ["loss-stagnation"]


def test_accuracy_that_rises_or_settles_late_is_quiet(tmp_path):
    assert findings(tmp_path / "a", mlx([0.851, 0.887, 0.902, 0.914, 0.919, 0.923, 0.924, 0.932, 0.933, 0.933])) == []
    # Converged: the same value over the last epochs, not from the first.
    assert findings(tmp_path / "b", mlx([0.901, 0.962, 0.975, 0.975, 0.975, 0.975, 0.975, 0.975])) == []
    # Too few evaluations, and a memorised set at its ceiling.
    assert findings(tmp_path / "c", mlx([0.113] * 4)) == []
    assert findings(tmp_path / "d", mlx([1.0] * 8)) == []


def test_flat_accuracy_beside_a_logged_loss_is_left_to_the_loss_rules(tmp_path):
    # The PyTorch MNIST example's per-epoch test line logs its loss too: a falling loss with a flat accuracy is no finding here.
    text = "".join(f"Test set: Average loss: {loss:.4f}, Accuracy: 1135/10000 (11%)\nEpoch {i}: Test accuracy 0.113\n"
                   for i, loss in enumerate([2.30, 1.9, 1.5, 1.2, 1.0, 0.9]))
    assert "loss-stagnation" not in findings(tmp_path, text)


# --- a few late Caffe iterations at ln(K) ----------------------------------------------------------------------------

def caffe(start: int, losses: list[float]) -> str:
    # BVLC/caffe#59 (old Caffe glog solver lines, ImageNet reference net).
    out = []
    for i, loss in enumerate(losses):
        it = start + 20 * i
        out.append(f"I0127 08:5{i}:57.624028 37204 solver.cpp:210] Iteration {it}, lr = 0.01\n")
        out.append(f"I0127 08:5{i}:57.633610 37204 solver.cpp:68] Iteration {it}, loss = {loss}\n")
    return "".join(out)


def test_three_late_iterations_at_ln_1000_are_stagnation(tmp_path):
    assert findings(tmp_path, caffe(78000, [6.9063, 6.90727, 6.9073])) == ["loss-stagnation"]


def test_ln_k_at_the_start_or_only_near_it_late_is_quiet(tmp_path):
    # The first iterations of a healthy ImageNet run sit at ln(1000).
    assert findings(tmp_path / "a", caffe(0, [6.9112, 6.9050, 6.9064])) == []
    # Within 2% of ln(1000) but not held to it, and a late loss near ln(100) that moves between points.
    assert findings(tmp_path / "b", caffe(78000, [6.80, 6.83, 6.79])) == []
    assert findings(tmp_path / "c", caffe(5000, [4.59, 4.63, 4.60])) == []


# --- metrics no correct loss can print --------------------------------------------------------------------------------

FLASHLIGHT = "".join(  # flashlight/flashlight#137 (RnnLm example without LogSoftmax)
    f"Epoch {i} - Train Loss: {t} Validation Loss: {v} Validation Perplexity: 0 Time per iteration (ms): 11.6\n"
    for i, (t, v) in enumerate([("-8.31e+03", "-1.66e+04"), ("-2.49e+04", "-3.33e+04"), ("-4.16e+04", "-4.99e+04")], 1))


def word_lm(pairs: list[tuple[str, str]]) -> str:
    # pytorch/examples#734: the word_language_model example reporting a negative loss and a perplexity of 0.
    return "".join(f"| epoch   1 | {200 * i:5d}/ 2983 batches | lr 20.00 | ms/batch 45.54 | loss {loss} | ppl {ppl}\n"
                   for i, (loss, ppl) in enumerate(pairs, 1))


def test_perplexity_below_one_is_a_failure(tmp_path):
    assert findings(tmp_path / "a", FLASHLIGHT) == ["unclassified-failure"]
    assert findings(tmp_path / "b", word_lm([("-6.12", "0.00"), ("-9.40", "0.00"), ("-12.71", "0.00")])) == ["unclassified-failure"]


def test_flashlight_epoch_line_is_read_with_its_step_time(tmp_path):
    got = rows(tmp_path, FLASHLIGHT)
    assert (1, None, "loss", -8310.0) in got and (1, None, "validation_perplexity", 0.0) in got
    assert (1, None, "step_time_ms", 11.6) in got


def test_healthy_perplexity_and_negative_by_design_losses_are_quiet(tmp_path):
    assert findings(tmp_path / "a", word_lm([("7.63", "2063.74"), ("6.85", "945.93"), ("6.49", "658.90")])) == []
    # A single line of perplexity 0 is not enough.
    assert "unclassified-failure" not in findings(tmp_path / "b", word_lm([("-6.12", "0.00")]))
    # A normalising flow's NLL in nats and a -PSNR loss are negative by design, and named otherwise.
    flow = "".join(f"step {s} | loss {-1.2 - s / 1000:.3f} | nll {-1.3 - s / 1000:.3f} | bpd 3.41\n" for s in range(100, 600, 100))
    assert "unclassified-failure" not in findings(tmp_path / "c", flow)
    psnr = "".join(f"iter {s} loss: {-24.1 - s / 100:.2f} psnr: {24.1 + s / 100:.2f}\n" for s in range(100, 600, 100))
    assert "unclassified-failure" not in findings(tmp_path / "d", psnr)


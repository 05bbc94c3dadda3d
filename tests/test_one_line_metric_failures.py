"""Failures a library states in one metric line: an undefined Cohen's kappa, an early-stopping line saving a NaN
validation loss after a NaN best, a final loss at ln(K) of the class count the log announces, and a reinforcement-
learning trainer at step 0 that says it is not training; each with the real near misses that stay quiet.

Each log is a real paste (URL beside it), shortened.
"""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def findings(tmp: Path, text: str) -> list[tuple[str, str]]:
    """(playbook, severity) of the findings above info, in rank order, for a one-file run."""
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    return [(f.playbook.id, f.severity.name.lower()) for f in a.findings if f.severity.name.lower() != "info"]


# --- Cohen's kappa NaN: one class in labels and predictions ---------------------------------------------------------

# PaddlePaddle/PaddleSeg#1267: dygraph PaddleSeg, the kappa's numpy warning and the evaluation summary.
PADDLESEG_DYGRAPH = """2021-08-22 00:41:26 [INFO]      [TRAIN] epoch: 3, iter: 3000/3000, loss: 0.0023, lr: 0.000000, batch_cost: 0.6401, reader_cost: 0.23012, ips: 1.5623 samples/sec | ETA 00:00:00
2021-08-22 00:41:26 [INFO]      Start evaluating (total_samples: 245, total_iters: 245)...
/home/amourato/VM/paddle/PaddleSeg/paddleseg/utils/metrics.py:145: RuntimeWarning: invalid value encountered in true_divide
  kappa = (po - pe) / (1 - pe)
2021-08-22 00:43:14 [INFO]      [EVAL] #Images: 245 mIoU: 0.5000 Acc: 1.0000 Kappa: nan
"""
# PaddlePaddle/Paddle#34282 (a later comment): the summary with its per-class IoU list.
PADDLESEG_CLASS_IOU = """024-07-31 14:32:36 [INFO]      [EVAL] #Images: 321 mIoU: 0.5000 Acc: 1.0000 Kappa: nan
2024-07-31 14:32:36 [INFO]      [EVAL] Class IoU:
[1. 0.]
2024-07-31 14:32:36 [INFO]      [EVAL] Class Acc:
[1. 0.]
"""
# PaddlePaddle/PaddleSeg#1537: every pixel predicted background while both classes are labelled: kappa is defined.
PADDLESEG_MAJORITY = """2021-11-15 17:39:51 [INFO]      [EVAL] #Images: 76 mIoU: 0.4906 Acc: 0.9812 Kappa: -0.0008
2021-11-15 17:39:51 [INFO]      [EVAL] Class IoU:
[0.9812 0.    ]
"""
# PaddlePaddle/PaddleSeg#579: legacy pdseg evaluation of a run that learned (missing classes, kappa 0.87).
PDSEG_HEALTHY = """[EVAL]#image=2919 acc=0.9116 IoU=0.2399
[EVAL]Category IoU: [0.7778 0.8772 0.8416 0.9095 0.2639 0.2408 0.6473 0.0000 0.0000 0.0000]
[EVAL]Kappa:0.8661
"""


def test_nan_kappa_is_one_class_labels(tmp_path: Path) -> None:
    for i, text in enumerate((PADDLESEG_DYGRAPH, PADDLESEG_CLASS_IOU)):
        got = findings(tmp_path / str(i), text)
        assert got and got[0] == ("bad-input-data", "medium"), got


def test_finite_kappa_stays_quiet(tmp_path: Path) -> None:
    assert "bad-input-data" not in [p for p, _ in findings(tmp_path / "a", PADDLESEG_MAJORITY)]
    assert findings(tmp_path / "b", PDSEG_HEALTHY) == []


# --- early stopping saving a NaN validation loss ----------------------------------------------------------------------

# zhouhaoyi/Informer2020#193 with the train loss of thuml/Time-Series-Library#315's shape: finite training, NaN
# validation from the first evaluation (the early-stopping line's best is NaN from the second on).
INFORMER_VALI_NAN = """Epoch: 1, Steps: 9 | Train Loss: 1.0262758 Vali Loss: nan Test Loss: 1.4440242
Validation loss decreased (inf --> nan).  Saving model ...
Updating learning rate to 1e-06
Epoch: 2, Steps: 9 | Train Loss: 0.9871123 Vali Loss: nan Test Loss: 1.4290014
Validation loss decreased (nan --> nan).  Saving model ...
Updating learning rate to 5e-07
"""
# thuml/Autoformer#122: the same helper on a healthy run.
AUTOFORMER_HEALTHY = """Epoch: 1, Steps: 384 | Train Loss: 0.6329591 Vali Loss: 0.7022343 Test Loss: 0.6559243
Validation loss decreased (inf --> 0.702234).  Saving model ...
Updating learning rate to 0.0001
Epoch: 2, Steps: 384 | Train Loss: 0.2835468 Vali Loss: 0.6222830 Test Loss: 0.6060570
Validation loss decreased (0.702234 --> 0.622283).  Saving model ...
Updating learning rate to 5e-05
"""

def test_nan_after_nan_best_is_nan_loss(tmp_path: Path) -> None:
    got = findings(tmp_path, INFORMER_VALI_NAN)
    assert got and got[0] == ("nan-loss", "medium"), got


def test_finite_evaluations_stay_quiet(tmp_path: Path) -> None:
    assert findings(tmp_path, AUTOFORMER_HEALTHY) == []


# --- the final loss at ln(K) of the announced class count ---------------------------------------------------------

# facebookresearch/fastText#853: 2 labels, average loss over all of training 0.694915 ~ ln 2.
FASTTEXT_AT_CHANCE = """Read 0M words
Number of words:  80869
Number of labels: 2
Progress: 100.0% words/sec/thread: 2209148 lr:  0.000000 loss:  0.694915 ETA:   0h 0m
"""
# facebookresearch/fastText#682: 735 labels, the loss far from ln 735 = 6.6.
FASTTEXT_735 = """Read 0M words
Number of words:  14543
Number of labels: 735
Progress: 100.0%  words/sec/thread: 98266  lr: 0.000000  loss: 10.185630  eta: 0h0m h-14m
"""
# amarchenkova/yoga-pose-CNN#1: one epoch of a 10-class Keras run at 2.2847 (near ln 10) with accuracy 0.21, twice
# chance: a model that is learning (the reporter's 50 epochs worked).
KERAS_LEARNING = """Found 730 images belonging to 10 classes.
Found 109 images belonging to 10 classes.
Epoch 1/1
22/22 [==============================] - 13s 575ms/step - loss: 2.2847 - acc: 0.2088 - val_loss: 2.1990 - val_acc: 0.2683
"""


def test_closing_loss_at_ln_of_announced_classes(tmp_path: Path) -> None:
    got = findings(tmp_path, FASTTEXT_AT_CHANCE)
    assert got and got[0][0] == "loss-stagnation", got


def test_other_levels_or_a_learning_accuracy_stay_quiet(tmp_path: Path) -> None:
    assert "loss-stagnation" not in [p for p, _ in findings(tmp_path / "a", FASTTEXT_735)]
    assert "loss-stagnation" not in [p for p, _ in findings(tmp_path / "b", KERAS_LEARNING)]


# --- a reinforcement-learning trainer that never trains -----------------------------------------------------------

# Unity-Technologies/ml-agents#3105 (without the reporter's quotes).
MLAGENTS_NOT_TRAINING = ("INFO:mlagents.trainers: block5-0: BlockBrain: Step: 0. Time Elapsed: 99.064 s Mean Reward: -7.901. "
                         "Std of Reward: 2.661. Not Training.\n")
# Unity-Technologies/ml-agents#1814 and #1600: trainers that train.
MLAGENTS_TRAINING = """INFO:mlagents.trainers: PPOTest-0: NewLearner: Step: 19000. Mean Reward: -57.270. Std of Reward: 0.000. Training.
INFO:mlagents.trainers: PPOTest-0: NewLearner: Step: 24000. No episode was completed since last summary. Training.
INFO:mlagents.trainers: cpu_test: FindTheTarget: Step: 35000. Time Elapsed: 114.797 s Mean Reward: 0.400. Std of Reward: 0.490. Training.
"""


def test_step_zero_not_training_is_low_unclassified_failure(tmp_path: Path) -> None:
    assert findings(tmp_path, MLAGENTS_NOT_TRAINING) == [("unclassified-failure", "low")]


def test_training_summaries_stay_quiet(tmp_path: Path) -> None:
    assert findings(tmp_path, MLAGENTS_TRAINING) == []

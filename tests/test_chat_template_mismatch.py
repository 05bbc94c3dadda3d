"""FastChat/LLaVA `tokenization mismatch` warnings: a chat template that does not fit the tokenizer masks whole samples;
with the loss at exactly 0 it is a failed run (tokenizer-mismatch, high), a few beside a learning loss stay low."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def findings(tmp: Path, text: str) -> list:
    return analyze(Context(ingest(write_run(tmp, {"train.log": text})))).findings


# https://github.com/BAAI-DCAI/Bunny/issues/75: the maintainer asks for the right `--version` (template).
BUNNY_ZERO_LOSS = """WARNING: tokenization mismatch: 100 vs. 101. (ignored)
WARNING: tokenization mismatch: 153 vs. 154. (ignored)
WARNING: tokenization mismatch: 167 vs. 168. (ignored)
WARNING: tokenization mismatch: 56 vs. 57. (ignored)
WARNING: tokenization mismatch: 96 vs. 97. (ignored)
WARNING: tokenization mismatch: 56 vs. 57. (ignored)
WARNING: tokenization mismatch: 62 vs. 63. (ignored)
{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': 2.6490066225165566e-08, 'epoch': 0.0}
"""
# https://github.com/OpenGVLab/InternVL/issues/347 (fixed by the template, InternVL#742): warnings among DeepSpeed
# timers, no loss printed in the paste.
INTERNVL_NO_LOSS = """[2024-07-10 17:42:44,683] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd_microstep: 998.17 | bwd_microstep: 1538.87 | bwd_inner_microstep: 1536.33 | bwd_allreduce_microstep: 2.47 | step_microstep: 0.06
WARNING: tokenization mismatch: 654 vs. 643. #turn = 25. (ignored). This dataset is docvqa_train_10k.
WARNING: tokenization mismatch: 737 vs. 726. #turn = 25. (ignored). This dataset is docvqa_train_10k.
WARNING: tokenization mismatch: 405 vs. 402. #turn = 9. (ignored). This dataset is docvqa_train_10k.
WARNING: tokenization mismatch: 327 vs. 326. #turn = 5. (ignored). This dataset is docvqa_train_10k.
[2024-07-10 17:42:45,900] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | optimizer_step: 0.94
"""
# Near miss: one sample's warning (lm-sys/FastChat#1290's form) in a run whose loss is learning (the Trainer records of
# the healthy accelerate#1837 run): that sample is dropped, the run trains.
ONE_SAMPLE_LEARNING = """WARNING: tokenization mismatch: 185 vs. 186. (ignored)
{'loss': 1.306, 'learning_rate': 1.2195121951219514e-06, 'epoch': 0.0}
{'loss': 1.3887, 'learning_rate': 2.4390243902439027e-06, 'epoch': 0.0}
{'loss': 1.4621, 'learning_rate': 3.6585365853658537e-06, 'epoch': 0.0}
{'loss': 1.3461, 'learning_rate': 4.8780487804878055e-06, 'epoch': 0.01}
"""


def test_mismatches_with_a_zero_loss_are_a_failed_run(tmp_path: Path):
    top = [f for f in findings(tmp_path, BUNNY_ZERO_LOSS) if f.severity > Severity.INFO][0]
    assert top.id == "tokenizer-mismatch" and top.severity == Severity.HIGH
    assert top.causes[0].cause.id == "chat_template"
    lines = {e.line for e in top.evidence}
    assert 1 in lines and 8 in lines  # the first warning and the zero-loss record


def test_repeated_mismatches_without_a_loss_are_medium(tmp_path: Path):
    f = next(f for f in findings(tmp_path, INTERNVL_NO_LOSS) if f.id == "tokenizer-mismatch")
    assert f.severity == Severity.MEDIUM and f.causes[0].cause.id == "chat_template"


def test_one_mismatch_beside_a_learning_loss_stays_low(tmp_path: Path):
    fs = findings(tmp_path, ONE_SAMPLE_LEARNING)
    assert [f.severity for f in fs if f.id == "tokenizer-mismatch"] == [Severity.LOW]
    assert not [f for f in fs if f.severity >= Severity.MEDIUM]

"""unclassified-failure from a reinforcement-learning trainer that reports, at step 0, that it is not training."""

from __future__ import annotations

from forensics.playbooks.evidence import detection, events
from forensics.playbooks.operations.unclassified_failure import OWN, PLAYBOOK

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity

NOT_TRAINING_CODES = ("rl_trainer_not_training",)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Unity ML-Agents' summary `Step: 0. Time Elapsed: 99.064 s Mean Reward: … Not Training.`: the trainer's step
    counts only the steps it trains, so a summary at step 0 that says `Not Training.` is a run that collected
    episodes and never updated its policy (Unity-Technologies/ml-agents#3105: mlagents-learn of 0.x started without
    `--train`). Low: the trainer says so itself, but running a trained policy without training is also how one
    watches it play; a summary past step 0 saying `Not Training.` (max_steps reached) is no finding."""
    ev = events(ctx, NOT_TRAINING_CODES)
    if ev.height == 0:
        return None
    return detection(
        ev,
        f"the reinforcement-learning trainer reports `Not Training.` at step 0 ({ev.height} summary line(s)): episodes "
        "run but the policy is never updated (training not enabled for this run, e.g. mlagents-learn without --train, "
        "or the behaviour has no trainer configured)",
        {OWN: 0.8},
        confidence=0.5,
        severity=Severity.LOW,
        facts={"summaries": ev.height},
    )

"""silent-hang from a log that stops at an interactive prompt waiting for keyboard input (wandb's login menu)."""

from __future__ import annotations

from forensics.playbooks.evidence import detection
from forensics.playbooks.fields import field
from forensics.playbooks.operations.silent_hang import PLAYBOOK, quiet_end

from forensics.contracts.context import Context
from forensics.contracts.model import Detection, Severity


# The log's last line is a prompt that reads stdin (an `at_end` signature: parsers/signatures.toml, form stdin_prompt).
@PLAYBOOK.detector(("events",))
def detect_prompt_end(ctx: Context, th: dict) -> Detection | None:
    """A log whose last line is wandb's login menu (`wandb: (3) Don't visualize my results`, `wandb: Enter your
    choice:`), with no error in the run: the process waits for an answer on stdin, which a batch job, a launcher's
    worker or a non-zero rank never gets (wandb/wandb#592: distributed workers hanging there; McGill-NLP/llm2vec#99).

    The prompt proves the wait, not that nobody answered: a person may have pasted it from a terminal before typing the
    choice, so low. A prompt followed by anything (`You chose …`, the timeout of newer versions, training) is no finding.
    """
    stop = quiet_end(ctx, "stdin_prompt")
    if stop.height == 0:
        return None
    tool = stop.select(field("tool")).item(0, 0) or "a library"
    return detection(stop, f"the log stops at {tool}'s interactive prompt (" + str(stop.item(0, "message")).strip()[:100]
                     + ") with no error: the process waits for keyboard input that a batch job or a worker process "
                       "never gets", {"input_prompt": 0.9}, confidence=0.5, severity=Severity.LOW)

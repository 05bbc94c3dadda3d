"""Logs that stop where a process waits for something that never comes (ingest + analyze on real lines): ps-lite's
start-up before every node registered, wandb's interactive login menu, the start of a validation pass; and the
healthy logs that print the same lines and go on."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# apache/mxnet#5452: two-machine train_mnist; the scheduler binds and nothing more ('probably because of the firewall').
PSLITE_BIND = ["2017-03-18 03:16:32,929 INFO rsync /home/user/mxnet/example/image-classification/ -> user@machineB:/tmp/mxnet",
               "[03:16:33] src/van.cc:75: Bind to role=scheduler, id=1, ip=machineA's IP address, port=9094, is_recovery=0"]
# apache/mxnet#13644: AWS dist_sync; only the local server's registration reaches the scheduler.
PSLITE_ADD = ["[02:33:37] src/van.cc:290: Bind to role=scheduler, id=1, ip=172.31.35.130, port=9093, is_recovery=0",
              "INFO:root:Starting new image-classification task:, Namespace(batch_norm=False, batch_size=32, dataset='cifar10', "
              "epochs=120, gpus='0', kvstore='dist_sync', model='vgg11', num_workers=4)",
              "[02:33:37] src/van.cc:398: ? => 1. Meta: request=0, timestamp=0, control={ cmd=ADD_NODE, node={ role=server, "
              "ip=172.31.35.130, port=46899, is_recovery=0 } }"]
# apache/mxnet#3685: the user stops the launcher with Ctrl-C: ssh's and the launcher's lines follow the registration.
PSLITE_INTERRUPTED = ["[17:17:00] src/van.cc:155: ? => 1. Meta: request=0, timestamp=0, control={ cmd=ADD_NODE, node={ "
                      "role=worker, ip=158.1xx.x.80, port=51877, is_recovery=0 } }",
                      "Killed by signal 2.", "Killed by signal 2.", "2016-11-01 17:22:15,238 INFO Stop luancher"]
# apache/mxnet#7396 (PS_VERBOSE=2): every node registered and the scheduler assigned ids: the group formed.
PSLITE_FORMED = [
    "[00:38:29] src/van.cc:161: ? => 1. Meta: request=0, timestamp=0, control={ cmd=ADD_NODE, node={ role=server, ip=10.15.240.189, port=52099, is_recovery=0 } }",
    "[00:38:29] src/van.cc:161: ? => 1. Meta: request=0, timestamp=0, control={ cmd=ADD_NODE, node={ role=worker, ip=10.15.133.82, port=37993, is_recovery=0 } }",
    "[00:38:29] src/van.cc:235: assign rank=9 to node role=worker, ip=10.15.240.189, port=39902, is_recovery=0",
    "[00:38:29] src/van.cc:235: assign rank=8 to node role=server, ip=10.15.240.189, port=52099, is_recovery=0"]

WANDB_MENU = ["wandb: (1) Create a W&B account", "wandb: (2) Use an existing W&B account", "wandb: (3) Don't visualize my results"]
# wandb/wandb#592 (workers hanging at the prompt; the paste stops before click's `Enter your choice:`).
WANDB_WORKER = ["Logging to run05", "wandb: W&B is a tool that helps track and visualize machine learning experiments", *WANDB_MENU]
# McGill-NLP/llm2vec#99 (a batch job that cannot answer).
WANDB_BATCH = [*WANDB_MENU, "wandb: Enter your choice:"]
# Fuann/hmamba#2 (quoted in the issue with `> `).
WANDB_QUOTED = ["> Stage 1 : Training", *["> " + line for line in WANDB_MENU], "> wandb: Enter your choice:"]
# AI-Hypercomputer/kithara#12 (wandb-core's banner before the menu).
WANDB_CORE = ["wandb: Using wandb-core as the SDK backend.  Please refer to https://wandb.me/wandb-core for more information.",
              *WANDB_MENU]
# zf223669/Persona_Gestor#2: the user answered, training went on.
WANDB_ANSWERED = ["[2025-01-05 12:00:02,219][__main__][INFO] - Instantiating loggers...", *WANDB_MENU,
                  "wandb: Enter your choice: 3", 'wandb: You chose "Don\'t visualize my results"',
                  "[2025-01-05 12:00:52,225][__main__][INFO] - Instantiating trainer <lightning.pytorch.Trainer>"]

# MIC-DKFZ/medicaldetectiontoolkit#35: the epoch's training batches, the train-mode evaluation, then the validation pass
# that never yields (its class-balanced sampler loops over a split that lacks a class).
MDT_TRAIN = ["tr. batch 9/10 (ep. 1) fw 1.709s / bw 0.750s / total 2.459s || loss: 1.07, class: 0.89, bbox: 0.18",
             "tr. batch 10/10 (ep. 1) fw 2.189s / bw 0.743s / total 2.932s || loss: 1.06, class: 0.89, bbox: 0.17",
             "evaluating in mode train", "evaluating with match_iou: 0.1"]
MDT_VAL = "starting validation in mode val_sampling."


def _analyze(tmp_path: Path, lines: list[str]) -> Analysis:
    return analyze(Context(ingest(write_run(tmp_path, {"console.log": "\n".join(lines) + "\n"}))))


def _problems(a: Analysis) -> list:
    return [f for f in a.findings if f.severity > Severity.INFO]


@pytest.mark.parametrize("lines, line", [(PSLITE_BIND, 2), (PSLITE_ADD, 3), (PSLITE_INTERRUPTED, 1)],
                         ids=["scheduler_bind", "first_registration", "registration_then_ctrl_c"])
def test_log_ending_in_ps_lite_start_up_is_a_low_hang(tmp_path, lines, line):
    top = _problems(_analyze(tmp_path, lines))[0]
    assert (top.id, top.severity) == ("silent-hang", Severity.LOW)
    assert "rendezvous never completed" in top.summary and [e.line for e in top.evidence] == [line]


def test_ps_lite_group_that_formed_is_quiet(tmp_path):
    assert _problems(_analyze(tmp_path, PSLITE_FORMED)) == []


def test_interrupt_lines_after_a_progress_line_are_quiet(tmp_path):
    assert _problems(_analyze(tmp_path, [*PSLITE_FORMED, "Killed by signal 2.", "2016-11-01 17:22:15,238 INFO Stop luancher"])) == []


@pytest.mark.parametrize("lines", [WANDB_WORKER, WANDB_BATCH, WANDB_QUOTED, WANDB_CORE],
                         ids=["menu_cut", "enter_your_choice", "quoted", "wandb_core_banner"])
def test_log_ending_at_wandb_login_menu_is_a_low_hang(tmp_path, lines):
    top = _problems(_analyze(tmp_path, lines))[0]
    assert (top.id, top.severity) == ("silent-hang", Severity.LOW)
    assert "wandb's interactive prompt" in top.summary and top.causes[0].cause.id == "input_prompt"
    assert [e.line for e in top.evidence] == [len(lines)]


def test_answered_wandb_menu_is_quiet(tmp_path):
    assert _problems(_analyze(tmp_path, WANDB_ANSWERED)) == []


def test_wandb_menu_mid_log_is_quiet(tmp_path):
    assert _problems(_analyze(tmp_path, [*WANDB_MENU, *MDT_TRAIN[:2]])) == []


def test_log_ending_at_validation_start_after_training_is_a_low_hang(tmp_path):
    top = _problems(_analyze(tmp_path, [*MDT_TRAIN, MDT_VAL]))[0]
    assert (top.id, top.severity) == ("silent-hang", Severity.LOW)
    assert "start of a validation pass" in top.summary and [e.line for e in top.evidence] == [5]


@pytest.mark.parametrize("lines", [[MDT_VAL], ["evaluating in mode train", MDT_VAL], [*MDT_TRAIN, MDT_VAL, MDT_TRAIN[0]]],
                         ids=["no_training_before", "no_metric_before", "progress_after"])
def test_validation_start_without_training_before_or_with_progress_after_is_quiet(tmp_path, lines):
    assert _problems(_analyze(tmp_path, lines)) == []


def test_validation_start_then_error_is_not_a_hang(tmp_path):
    # zhou13/lcnn#17: `Running validation...` then the traceback of the validation's own KeyError (frames cut).
    lines = [*MDT_TRAIN[:2], "Running validation...", "Traceback (most recent call last):",
             '  File "train.py", line 182, in <module>', "    main()",
             '  File "/home/jsaez/Repositorios/Otros/lcnn/lcnn/trainer.py", line 70, in _loss',
             '    losses = result["losses"]', "KeyError: 'losses'"]
    assert all(f.id != "silent-hang" for f in _problems(_analyze(tmp_path, lines)))

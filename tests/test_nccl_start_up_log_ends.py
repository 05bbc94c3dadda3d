"""Logs that stop on Paddle's NCCL communicator start-up line (`init nccl context nranks: …`, printed right before
ncclCommInitRank) are a low silent-hang; the same line followed by the device notes and training is quiet."""

from __future__ import annotations

import pytest

from forensics.contracts.model import Severity
from tests.helpers import analyze_console

# PaddlePaddle/PaddleFleetX#1054 (= PaddlePaddle/Paddle#51096): 2 nodes x 2 GPUs; every endpoint log ends here, GPUs
# idle for 20 minutes, fixed by NCCL_SOCKET_IFNAME.
FLEETX_STOP = ["I0302 02:01:36.274989 31267 nccl_context.cc:83] init nccl context nranks: 4 local rank: 0/1 gpu id: 0/1 ring id: 0/1"]
# PaddlePaddle/FleetX docs, Collective quick start (fleetrun of the ResNet example): the communicator formed.
FLEETX_DOCS = [
    "    I0323 14:11:39.383992  3788 nccl_context.cc:66] init nccl context nranks: 2 local rank: 0 gpu id: 0 ring id: 0",
    "    W0323 14:11:39.872674  3788 device_context.cc:368] Please NOTE: device: 0, GPU Compute Capability: 7.0, Driver API Version: 10.2, Runtime API Version: 9.2",
    "    W0323 14:11:39.877283  3788 device_context.cc:386] device: 0, cuDNN Version: 7.4.",
    "    [Epoch 0, batch 0] loss: 4.77086, acc1: 0.00000, acc5: 0.00000",
    "    [Epoch 0, batch 5] loss: 15.69098, acc1: 0.03125, acc5: 0.18750",
]
# A Chinese ASR project's README log (MASR-style `训练输出结果如下`): two ranks' lines, then the device note.
TWO_RANKS_THEN_DEVICE = [
    "I0302 09:24:11.613675 15693 nccl_context.cc:189] init nccl context nranks: 2 local rank: 1 gpu id: 1 ring id: 0",
    "I0302 09:24:11.613677 15692 nccl_context.cc:189] init nccl context nranks: 2 local rank: 0 gpu id: 0 ring id: 0",
    "W0302 09:24:11.791157 15692 device_context.cc:362] Please NOTE: device: 0, GPU Compute Capability: 7.5, Driver API Version: 11.0, Runtime API Version: 10.2",
]


def test_log_ending_at_paddle_nccl_context_init_is_a_low_hang(tmp_path):
    top = analyze_console(tmp_path, FLEETX_STOP)[0][0]
    assert (top.id, top.severity) == ("silent-hang", Severity.LOW)
    assert "rendezvous never completed" in top.summary and [e.line for e in top.evidence] == [1]


@pytest.mark.parametrize("lines", [FLEETX_DOCS, TWO_RANKS_THEN_DEVICE], ids=["training_follows", "device_note_follows"])
def test_nccl_context_init_followed_by_the_run_is_quiet(tmp_path, lines):
    assert analyze_console(tmp_path, lines)[0] == []

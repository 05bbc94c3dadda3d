"""Real error output for the event parser tests: each case raises (or prints) a real PyTorch error.

Run by events_record.sh with the recording venv (torch CPU); never run by the test suite.
Usage: python events_cases.py CASE
"""

from __future__ import annotations

import os
import signal
import sys

import torch


def inplace() -> None:
    a = torch.randn(4, 3, requires_grad=True)
    x = a.sigmoid()
    x.mul_(2)  # sigmoid saved its output for backward; modifying it in place breaks the graph
    x.sum().backward()


def inplace_anomaly() -> None:
    with torch.autograd.set_detect_anomaly(True):
        inplace()


def embedding_index() -> None:
    emb = torch.nn.Embedding(10, 4)
    emb(torch.tensor([[1, 2, 12]]))


def backward_twice() -> None:
    a = torch.randn(3, requires_grad=True)
    y = (a * a).sum()
    y.backward()
    y.backward()



def shape_mismatch() -> None:
    torch.nn.Linear(8, 4)(torch.randn(2, 5))


def cpu_alloc() -> None:
    torch.empty(2**48, dtype=torch.uint8)


class _Killer(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        if i == 3:
            os.kill(os.getpid(), signal.SIGKILL)  # what the OOM killer does to a worker
        return torch.zeros(2)


class _Raiser(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        if i == 2:
            raise ValueError(f"corrupt sample {i}")
        return torch.zeros(2)


def dataloader_killed() -> None:
    for _ in torch.utils.data.DataLoader(_Killer(), num_workers=2, batch_size=1):
        pass


def dataloader_exception() -> None:
    for _ in torch.utils.data.DataLoader(_Raiser(), num_workers=1, batch_size=1):
        pass


def checkpoint_truncated() -> None:
    path = "/tmp/events_ckpt_truncated.pt"
    torch.save({"w": torch.zeros(1000)}, path)
    with open(path, "r+b") as f:
        f.truncate(2000)
    torch.load(path)


def nan_anomaly() -> None:
    with torch.autograd.set_detect_anomaly(True):
        a = torch.tensor([0.0, 1.0], requires_grad=True)
        y = torch.sqrt(a) * 0  # d sqrt/dx at 0 is inf; times 0 -> nan in the backward
        y.sum().backward()


def recompile() -> None:
    import torch._dynamo

    torch._dynamo.config.recompile_limit = 2

    @torch.compile(backend="eager", dynamic=False)
    def f(x, k):
        return x * k

    for k in range(6):
        f(torch.ones(2), k)


CASES = {name: fn for name, fn in globals().items() if callable(fn) and not name.startswith("_") and fn.__module__ == __name__}

if __name__ == "__main__":
    CASES[sys.argv[1]]()

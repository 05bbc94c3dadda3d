"""Autograd failures of real training loops (CPU, all messages printed by torch itself).

Scenarios (--scenario):
  inplace         a gated residual multiplies the sigmoid gate in place; sigmoid saved its output,
                  so backward finds it modified (anomaly detection off: the short hint).
  backward-twice  a recurrent language model carries its hidden state across batches without
                  detaching it; the second backward walks into the first batch's freed graph.
  threads         two trainer threads share one model and optimizer (a "parallel" data-feeding
                  hack); one thread's optimizer.step() bumps the weights' version while the other
                  thread's forward still holds them for its backward. Runs until the race bites.
  anomaly-clean   anomaly detection on, two losses backpropagated through a shared trunk with
                  retain_graph=True, a gate cloned before its in-place update: finishes cleanly.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time

import torch
import torch.nn as nn
from crash_common import SEQ, VOCAB, TinyLM, batch, lm_loss, nanogpt_line


class GatedBlock(nn.Module):
    def __init__(self, dim: int, inplace: bool) -> None:
        super().__init__()
        self.proj, self.gate, self.inplace = nn.Linear(dim, dim), nn.Linear(dim, dim), inplace

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        g = torch.sigmoid(self.gate(x))
        if self.inplace:
            g.mul_(keep)  # drop gated positions: modifies sigmoid's saved output
        else:
            g = g.clone().mul_(keep)
        return x + g * self.proj(x)


class GatedLM(nn.Module):
    def __init__(self, inplace: bool) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 64)
        self.blocks = nn.ModuleList(GatedBlock(64, inplace) for _ in range(2))
        self.head = nn.Linear(64, VOCAB)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.emb(idx)
        keep = (idx % 7 != 0).float().unsqueeze(-1)
        for b in self.blocks:
            x = b(x, keep)
        return self.head(x)


class RNNLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.rnn, self.head = nn.Embedding(VOCAB, 64), nn.GRU(64, 64, batch_first=True), nn.Linear(64, VOCAB)

    def forward(self, idx: torch.Tensor, h: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        out, h = self.rnn(self.emb(idx), h)
        return self.head(out), h


def run_inplace(iters: int) -> None:
    model = GatedLM(inplace=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    for it in range(iters):
        t0 = time.time()
        x, y = batch(gen, 16)
        loss = lm_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(nanogpt_line(it, loss.item(), time.time() - t0, -1.0), flush=True)


def run_backward_twice(iters: int) -> None:
    model = RNNLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    h = None
    for it in range(iters):
        t0 = time.time()
        x, y = batch(gen, 16)
        logits, h = model(x, h)  # truncated BPTT without h = h.detach()
        loss = lm_loss(logits, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(nanogpt_line(it, loss.item(), time.time() - t0, -1.0), flush=True)


def run_threads(iters: int) -> None:
    logging.basicConfig(format="%(asctime)s [%(threadName)s] %(levelname)s %(message)s", level=logging.INFO,
                        stream=sys.stdout, force=True)
    log = logging.getLogger("trainer")
    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    failures: list[BaseException] = []

    def worker(wid: int) -> None:
        gen = torch.Generator().manual_seed(wid)
        try:
            for it in range(iters):
                x, y = batch(gen, 8)
                loss = lm_loss(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad()
                if it % 20 == 0:
                    log.info(f"iter {it}: loss {loss.item():.4f}")
        except BaseException as e:
            failures.append(e)
            raise

    x, y = batch(torch.Generator().manual_seed(99), 8)  # one single-threaded sanity step (creates optimizer state)
    lm_loss(model(x), y).backward()
    opt.step()
    opt.zero_grad()
    log.info("sanity step ok")
    threads = [threading.Thread(target=worker, args=(w,), name=f"trainer-{w}") for w in range(2)]
    log.info(f"starting {len(threads)} trainer threads sharing one model ({sum(p.numel() for p in model.parameters()):,} params)")
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        log.error(f"{len(failures)} trainer thread(s) failed")
        sys.exit(1)
    log.info("all trainer threads finished")


def run_anomaly_clean(iters: int) -> None:
    with torch.autograd.detect_anomaly():
        _anomaly_loop(iters)
    print("done: backward through the shared trunk twice per step with retain_graph=True")


def _anomaly_loop(iters: int) -> None:
    model = GatedLM(inplace=False)
    aux = nn.Linear(VOCAB, 1)
    opt = torch.optim.AdamW(list(model.parameters()) + list(aux.parameters()), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    for it in range(iters):
        t0 = time.time()
        x, y = batch(gen, 16)
        logits = model(x)
        loss = lm_loss(logits, y)
        aux_loss = aux(logits.detach().softmax(-1)).pow(2).mean() + 1e-3 * logits.pow(2).mean()
        loss.backward(retain_graph=True)  # the trunk's graph is needed again by aux_loss
        aux_loss.backward()
        opt.step()
        opt.zero_grad()
        if it % 10 == 0:
            print(nanogpt_line(it, loss.item(), time.time() - t0, -1.0 if it < 5 else 0.0004), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--iters", type=int, default=50)
    a = ap.parse_args()
    print(f"number of parameters: {sum(p.numel() for p in TinyLM().parameters()) / 1e6:.2f}M")
    print(f"tokens per iteration will be: {16 * SEQ:,}")
    {"inplace": run_inplace, "backward-twice": run_backward_twice, "threads": run_threads,
     "anomaly-clean": run_anomaly_clean}[a.scenario](a.iters)


if __name__ == "__main__":
    main()

"""Shared pieces of the crash recordings: a tiny language model, batches, loggers, metric lines.

Run with the recording venv (/work/recvenv, torch CPU). Nothing here is imported by the project.
"""

from __future__ import annotations

import logging
import math
import os
import sys

import torch
import torch.nn as nn

VOCAB = 512
SEQ = 64


class TinyLM(nn.Module):
    """A two-layer decoder-only transformer: small enough for CPU, shaped like the real thing."""

    def __init__(self, vocab: int = VOCAB, dim: int = 64, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(SEQ, dim)
        block = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        mask = torch.triu(torch.full((t, t), float("-inf"), device=idx.device), diagonal=1)
        return self.head(self.norm(self.blocks(x, mask=mask, is_causal=True)))


def batch(gen: torch.Generator, bs: int, seq: int = SEQ, vocab: int = VOCAB) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of a learnable toy language: token t+1 = (3 * token t + 1) mod vocab, with noise."""
    start = torch.randint(0, vocab, (bs, 1), generator=gen)
    steps = torch.arange(seq + 1).unsqueeze(0)
    seqs = (start * pow(3, 1) + steps * 7) % vocab
    noise = torch.rand(seqs.shape, generator=gen) < 0.1
    seqs = torch.where(noise, torch.randint(0, vocab, seqs.shape, generator=gen), seqs)
    return seqs[:, :-1].contiguous(), seqs[:, 1:].contiguous()


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def titan_logger() -> logging.Logger:
    """torchtitan's logger format: `[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s`."""
    logger = logging.getLogger()
    logger.setLevel(logging.INFO)
    h = logging.StreamHandler(sys.stdout)
    h.setFormatter(logging.Formatter("[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    logger.handlers[:] = [h]
    return logger


def plain_logger(name: str = "__main__") -> logging.Logger:
    """The format of HF example scripts: `%(asctime)s - %(levelname)s - %(name)s - %(message)s`."""
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        datefmt="%m/%d/%Y %H:%M:%S",
        level=logging.INFO,
        stream=sys.stdout,
        force=True,
    )
    return logging.getLogger(name)


def titan_step_line(step: int, loss: float, grad_norm: float, mem_gib: float, mem_pct: float, tps: int,
                    tflops: float, mfu: float) -> str:
    """torchtitan v0.2.x metrics line (colours off)."""
    return (
        f"step: {step:2}  loss: {loss:8.5f}  grad_norm: {grad_norm:7.4f}  memory: {mem_gib:5.2f}GiB"
        f"({mem_pct:.2f}%)  tps: {round(tps):,}  tflops: {tflops:,.2f}  mfu: {mfu:.2f}%"
    )


def nanogpt_line(it: int, loss: float, dt: float, mfu: float) -> str:
    """nanoGPT's per-iteration print."""
    return f"iter {it}: loss {loss:.4f}, time {dt * 1000:.2f}ms, mfu {mfu * 100:.2f}%"


def grad_norm(model: nn.Module) -> float:
    total = 0.0
    for p in model.parameters():
        if p.grad is not None:
            total += float(p.grad.detach().pow(2).sum())
    return math.sqrt(total)


def rank_log_to_file() -> None:
    """With RANK_LOG_DIR set, send this rank's stdout and stderr (C++ output too) to RANK_LOG_DIR/rankN.log,
    the dup2 pattern of many cluster launch scripts."""
    d = os.environ.get("RANK_LOG_DIR")
    if not d:
        return
    fd = os.open(os.path.join(d, f"rank{os.environ['RANK']}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))

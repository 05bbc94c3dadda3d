"""Record a healthy plain PyTorch loop that prints `step N loss X lr Y grad_norm Z` every step.

A tiny random-init MLP regression on CPU with AdamW, cosine LR and gradient clipping;
run by record_plain_loop.sh with /work/recvenv, stdout to train.log.
"""

import math

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
steps = 60
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
w_true = 0.5 * torch.randn(16, 1)
print(f"training {sum(p.numel() for p in model.parameters())} parameters for {steps} steps", flush=True)
for step in range(1, steps + 1):
    x = torch.randn(32, 16)
    y = x @ w_true + 0.1 * torch.randn(32, 1)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    lr = sched.get_last_lr()[0]
    opt.step()
    sched.step()
    print(f"step {step} loss {loss.item():.4f} lr {lr:.3e} grad_norm {grad_norm.item():.4f}", flush=True)
print("done", flush=True)

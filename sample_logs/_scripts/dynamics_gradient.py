"""Record gradient-dynamics samples: explosion, vanishing, clipping saturation, and their near misses.

Usage: dynamics_gradient.py SCENARIO > train.log, with SCENARIO one of
gradient-explosion, gradient-explosion-nearmiss, vanishing-gradient, vanishing-gradient-nearmiss,
clipping-saturation, clipping-saturation-nearmiss. Tiny CPU models, real training; see dynamics_common.py
for the printed formats.
"""

from __future__ import annotations

import sys
import time

import torch
from dynamics_common import Regression, fairseq_line, fmt_g, grad_norm, mlp, plain


def explosion(nearmiss: bool) -> None:
    """SGD+momentum warmed up linearly to a peak LR: 0.3 diverges (grad norm x10, then inf/NaN); 0.03 trains."""
    torch.manual_seed(0)
    model = mlp(depth=2, act=torch.nn.Tanh)
    peak, warm, steps = (0.03, 100, 200) if nearmiss else (0.3, 100, 200)
    opt = torch.optim.SGD(model.parameters(), lr=peak, momentum=0.9)
    # Small noisy batches in the near miss: the grad norm has spikes inside its noise.
    data = Regression(noise=0.5 if nearmiss else 0.1)
    print(f"model: {sum(p.numel() for p in model.parameters())} parameters; optimizer SGD(momentum=0.9), "
          f"lr warmup to {peak} over {warm} steps, no gradient clipping", flush=True)
    nan_run = 0
    for step in range(1, steps + 1):
        lr = peak * min(1.0, step / warm)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = data.batch(8 if nearmiss else 32)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        gn = grad_norm(model.parameters())
        opt.step()
        plain(step, loss=f"{loss.item():.4f}", lr=f"{lr:.3e}", grad_norm=f"{gn:.4f}")
        nan_run = nan_run + 1 if not torch.isfinite(loss) else 0
        if nan_run >= 3:
            # The DETR/DeiT-style guard (reference/formats.md §1.15, §2.14).
            print(f"Loss is {loss.item()}, stopping training", flush=True)
            sys.exit(1)


def vanishing(nearmiss: bool) -> None:
    """A 24-layer sigmoid MLP (default init, no normalisation): the first layers get ~no gradient.

    The near miss is the same depth with pre-LayerNorm residual blocks and GELU (Adam), which trains.
    """
    torch.manual_seed(0)
    depth, width = 24, 32

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(width)
            self.lin = torch.nn.Linear(width, width)

        def forward(self, h):
            return h + torch.nn.functional.gelu(self.lin(self.norm(h)))

    if nearmiss:
        layers = [torch.nn.Linear(16, width)] + [Block() for _ in range(depth - 1)]
        first = layers[0]
        last_hidden = layers[-1].lin
    else:
        layers = [torch.nn.Linear(16, width), torch.nn.Sigmoid()]
        for _ in range(depth - 1):
            layers += [torch.nn.Linear(width, width), torch.nn.Sigmoid()]
        first = layers[0]
        last_hidden = layers[-2]
    head = torch.nn.Linear(width, 1)
    model = torch.nn.Sequential(*layers, head)
    lr = 1e-3 if nearmiss else 0.05
    opt = torch.optim.Adam(model.parameters(), lr=lr) if nearmiss else torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    data = Regression(noise=0.1)
    print(f"model: {depth} hidden layers of {width} ({'residual LayerNorm+GELU' if nearmiss else 'sigmoid'}), "
          f"{sum(p.numel() for p in model.parameters())} parameters", flush=True)
    for step in range(1, 201):
        x, y = data.batch(32)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        gn = grad_norm(model.parameters())
        g_first = first.weight.grad.norm().item()
        g_last = last_hidden.weight.grad.norm().item()
        opt.step()
        if step % 5 == 0 or step == 1:
            plain(step, loss=f"{loss.item():.4f}", lr=f"{lr:.3e}", grad_norm=f"{gn:.4e}",
                  grad_norm_first_layer=f"{g_first:.4e}", grad_norm_last_layer=f"{g_last:.4e}")


def clipping(nearmiss: bool) -> None:
    """clip_grad_norm_ with a max_norm far below the natural norm (0.01) clips every update; 2.0 clips rarely.

    Printed as fairseq's `train_inner` lines, whose `clip` meter is the share (%) of clipped updates
    in the log interval and `gnorm` the pre-clip norm.
    """
    torch.manual_seed(0)
    clip_norm = 4.0 if nearmiss else 0.01
    model = mlp(depth=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    data = Regression(noise=0.3)
    interval, updates = 10, 300
    print(f"Namespace(arch='mlp', clip_norm={clip_norm}, lr=[0.02], log_interval={interval}, "
          f"max_update={updates}, momentum=0.9, optimizer='sgd')", flush=True)
    t0 = t_int = time.time()
    acc: dict[str, list[float]] = {"loss": [], "gnorm": [], "clip": []}
    for step in range(1, updates + 1):
        x, y = data.batch(16)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm).item()
        opt.step()
        acc["loss"].append(loss.item())
        acc["gnorm"].append(gn)
        acc["clip"].append(100.0 if gn > clip_norm else 0.0)
        if step % interval == 0:
            now = time.time()
            wall, dt = now - t0, max(now - t_int, 1e-6)
            t_int = now
            fairseq_line(1, step, updates, {
                "loss": f"{sum(acc['loss']) / interval:.3f}",
                "wps": fmt_g(16 * interval / dt),
                "ups": fmt_g(interval / dt),
                "wpb": "16",
                "bsz": "16",
                "num_updates": str(step),
                "lr": f"{opt.param_groups[0]['lr']:g}",
                "gnorm": f"{sum(acc['gnorm']) / interval:.3f}",
                "clip": fmt_g(round(sum(acc["clip"]) / interval, 1)),
                "train_wall": str(int(wall)),
                "wall": str(int(wall)),
            })
            acc = {k: [] for k in acc}


SCENARIOS = {
    "gradient-explosion": lambda: explosion(False),
    "gradient-explosion-nearmiss": lambda: explosion(True),
    "vanishing-gradient": lambda: vanishing(False),
    "vanishing-gradient-nearmiss": lambda: vanishing(True),
    "clipping-saturation": lambda: clipping(False),
    "clipping-saturation-nearmiss": lambda: clipping(True),
}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()

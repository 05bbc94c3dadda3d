"""Record a run for the `nondeterminism` samples: same seed, same config, DataLoader workers with augmentation.

Usage: dynamics_nondeterminism.py {unseeded|seeded} > train.log; dynamics_record.sh runs each twice
(the run and its baseline). `unseeded`: the augmentation draws from `numpy.random.default_rng()` created
without a seed in each worker, so two runs with torch.manual_seed(0) still differ from the first step.
`seeded`: the augmentation uses torch's RNG, which DataLoader seeds per worker from the base seed, so
the two runs are identical.
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from dynamics_common import mlp, plain


class Augmented(torch.utils.data.Dataset):
    """Regression points with additive jitter as the augmentation."""

    def __init__(self, unseeded: bool, n: int = 2048) -> None:
        g = torch.Generator().manual_seed(11)
        self.x = torch.randn(n, 16, generator=g)
        self.y = self.x @ (0.5 * torch.randn(16, 1, generator=torch.Generator().manual_seed(12)))
        self.unseeded = unseeded
        self.rng = None

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        if self.unseeded:
            if self.rng is None:
                self.rng = np.random.default_rng()  # the bug: no seed, fresh OS entropy in every worker
            jitter = torch.from_numpy(self.rng.normal(0.0, 0.3, 16).astype("float32"))
        else:
            jitter = 0.3 * torch.randn(16)
        return self.x[i] + jitter, self.y[i]


def main(unseeded: bool) -> None:
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(Augmented(unseeded), batch_size=32, shuffle=True, num_workers=2)
    model = mlp(depth=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    print(f"seed 0, DataLoader(batch_size=32, shuffle=True, num_workers=2), {len(loader)} steps", flush=True)
    for step, (x, y) in enumerate(loader, 1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0).item()
        opt.step()
        plain(step, loss=f"{loss.item():.4f}", lr=f"{0.05:.3e}", grad_norm=f"{gn:.4f}")


if __name__ == "__main__":
    main(sys.argv[1] == "unseeded")

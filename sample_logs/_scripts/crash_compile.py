"""torch.compile on CPU (inductor, real C++ codegen), run with TORCH_LOGS=recompiles.

Scenarios (--scenario):
  recompile   the model is compiled with dynamic=False and fed unpadded variable-length batches;
              every new sequence length fails a size guard, Dynamo recompiles, hits its recompile
              limit (8) and runs the model eagerly from then on.
  once        default dynamic setting, variable batch sizes: the second size triggers one
              recompilation with a dynamic batch dimension, after which nothing recompiles.
"""

from __future__ import annotations

import argparse
import time

import torch
from crash_common import TinyLM, batch, lm_loss, nanogpt_line


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--iters", type=int, default=40)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = TinyLM()
    print(f"number of parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")
    print("compiling the model... (takes a ~minute)")

    cmodel = torch.compile(model, dynamic=False) if a.scenario == "recompile" else torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(0)
    sizes = [16, 24, 16, 32, 24, 16, 8, 24]
    for it in range(a.iters):
        t0 = time.time()
        if a.scenario == "recompile":
            seq = int(torch.randint(16, 65, (1,), generator=gen))  # no padding to a fixed length
            x, y = batch(gen, 16, seq)
            loss = lm_loss(cmodel(x), y)
        else:
            x, y = batch(gen, sizes[it % len(sizes)])
            loss = lm_loss(cmodel(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(nanogpt_line(it, loss.item(), time.time() - t0, -1.0 if it < 5 else 0.0013), flush=True)


if __name__ == "__main__":
    main()

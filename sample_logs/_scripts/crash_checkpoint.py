"""nanoGPT-style training loop that saves `out_dir/ckpt.pt` at every eval interval; checkpoint failures.

Run from a scratch working directory (record_crash.sh does); only the console log is kept.

Scenarios (--scenario):
  readonly    out_dir is not writable by the training user (run as `nobody`, directory mode 555):
              torch.save fails with the real `open file failed with strerror: Permission denied`.
  disk-full   out_dir/ckpt.pt is a symlink to /dev/full, which fails every write with ENOSPC like a
              full filesystem: torch.save's zip writer reports `unexpected pos ... vs ...`.
  truncated   init_from=resume with a ckpt.pt cut in half (a previous job killed mid-write):
              torch.load fails with `failed finding central directory`.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from crash_common import SEQ, TinyLM, batch, lm_loss, nanogpt_line


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--out-dir", default="out")
    ap.add_argument("--max-iters", type=int, default=600)
    ap.add_argument("--eval-interval", type=int, default=250)
    a = ap.parse_args()
    torch.manual_seed(1337)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)
    gen = torch.Generator().manual_seed(1337)
    iter_num, best_val = 0, 1e9
    if a.scenario == "truncated":
        print(f"Resuming training from {a.out_dir}")
        ckpt = torch.load(os.path.join(a.out_dir, "ckpt.pt"), map_location="cpu")
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        iter_num, best_val = ckpt["iter_num"], ckpt["best_val_loss"]
    else:
        print("Initializing a new model from scratch")
    print(f"tokens per iteration will be: {16 * SEQ:,}")
    print(f"number of parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M")
    t0 = time.time()
    while iter_num <= a.max_iters:
        if iter_num % a.eval_interval == 0 and iter_num > 0:
            with torch.no_grad():
                losses = [lm_loss(model(x), y).item() for x, y in (batch(torch.Generator().manual_seed(k), 16) for k in range(8))]
            val = sum(losses) / len(losses)
            print(f"step {iter_num}: train loss {lossf:.4f}, val loss {val:.4f}")
            if val < best_val:
                best_val = val
                ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "model_args": {"n_layer": 2, "n_embd": 64},
                        "iter_num": iter_num, "best_val_loss": best_val, "config": vars(a)}
                print(f"saving checkpoint to {a.out_dir}")
                torch.save(ckpt, os.path.join(a.out_dir, "ckpt.pt"))
        x, y = batch(gen, 16)
        loss = lm_loss(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        t1 = time.time()
        lossf = loss.item()
        if iter_num % 10 == 0:
            print(nanogpt_line(iter_num, lossf, t1 - t0, -1.0 if iter_num < 50 else 0.0017), flush=True)
        t0 = t1
        iter_num += 1


if __name__ == "__main__":
    main()

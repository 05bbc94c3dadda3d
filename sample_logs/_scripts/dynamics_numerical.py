"""Record numerical-dynamics samples: NaN loss, loss spikes, fp16 overflow, loss-scale runaway,
optimizer-state drift, logit saturation, and their near misses.

Usage: dynamics_numerical.py SCENARIO [OUTDIR] > train.log (OUTDIR only for the HF scenario, which also
writes trainer_state.json). Tiny CPU models, real training; formats in dynamics_common.py.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from pathlib import Path

import torch
from dynamics_common import (
    DynamicLossScaler,
    MetricLogger,
    Regression,
    SmoothedValue,
    grad_norm,
    megatron_line,
    mlp,
    plain,
)

# ------------------------------------------------------------------ NaN loss


def nan_loss() -> None:
    """One NaN feature in the batch of step 137: the loss turns NaN with no build-up; the loop stops after 3."""
    torch.manual_seed(0)
    model = mlp(depth=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = Regression(noise=0.2)
    bad_step = 137
    nan_run = 0
    for step in range(1, 301):
        x, y = data.batch(32)
        if step == bad_step:
            x[3, 5] = float("nan")  # a corrupt sample
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0).item()
        opt.step()
        plain(step, loss=f"{loss.item():.4f}", lr=f"{1e-3:.3e}", grad_norm=f"{gn:.4f}")
        nan_run = nan_run + 1 if not math.isfinite(loss.item()) else 0
        if nan_run >= 3:
            print(f"Loss is {loss.item()}, stopping training", flush=True)
            sys.exit(1)


def nan_loss_hf(out: Path) -> None:
    """HF Trainer on a regression model whose step-50 batch holds a NaN feature.

    The console shows the classic masked form: `'loss': '0', 'grad_norm': 'nan'` (logging_nan_inf_filter
    replaces the non-finite loss, grad_norm is never filtered); trainer_state.json has the same.
    """
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            g = torch.Generator().manual_seed(1)
            w = 0.5 * torch.randn(16, 1, generator=torch.Generator().manual_seed(2))
            for i in range(80 * 8):
                x = torch.randn(16, generator=g)
                y = x @ w
                if i == 49 * 8 + 3:  # a sample of the batch of step 50
                    x[5] = float("nan")
                yield {"x": x, "labels": y}

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = mlp(depth=2)

        def forward(self, x, labels=None):
            out = self.net(x)
            return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    work = out / "_work"
    args = TrainingArguments(output_dir=str(work), max_steps=80, per_device_train_batch_size=8, learning_rate=1e-3,
                             logging_steps=1, save_strategy="steps", save_steps=80, report_to="none", use_cpu=True,
                             seed=0, dataloader_num_workers=0)
    Trainer(model=Model(), args=args, train_dataset=Stream()).train()
    shutil.copy(work / "checkpoint-80" / "trainer_state.json", out / "trainer_state.json")
    shutil.rmtree(work)


# ------------------------------------------------------------------ fp16 with manual loss scaling


def _fp16_step(model, x, y, scaler: DynamicLossScaler, opt, lr: float) -> tuple[float, float, bool]:
    """Forward/backward in float16 with the loss multiplied by the scale; unscale, check, step or skip."""
    out = model(x.half())
    loss = torch.nn.functional.mse_loss(out.float(), y)
    opt.zero_grad()
    (loss * scaler.loss_scale).backward()
    params = [p for p in model.parameters()]
    overflow = scaler.has_overflow(params)
    gn = float("inf")
    if not overflow:
        for p in params:
            p.grad.div_(scaler.loss_scale)
        gn = grad_norm(params)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
    scaler.update_scale(overflow)
    return loss.item(), gn, overflow


def fp16_megatron(nearmiss: bool) -> None:
    """A float16 MLP with Megatron's dynamic loss scaling printed as Megatron iteration lines.

    Positive: from iteration 120 the data carries an unnormalised feature (a new shard with raw values
    around 3e4); the float16 first layer overflows, the loss is inf on every iteration, each one is
    skipped and the scale halves down to its minimum (1.0) while `number of nan iterations` climbs.
    Near miss: initial scale 2**32 (Megatron's default) overflows for the first iterations until the
    scale has calibrated, then every `scale_window` clean iterations the scale doubles and one
    probing overflow halves it back: the normal saw-tooth.
    """
    torch.manual_seed(0)
    model = mlp(depth=2, act=torch.nn.Tanh).half()
    # Master weights would be fp32 in a real mixed-precision optimizer; SGD on the fp16 copy keeps this tiny.
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = Regression(noise=0.1)
    iters = 200
    scaler = DynamicLossScaler(init_scale=2.0**32, scale_window=40 if nearmiss else 1000, min_scale=1.0, quiet=True)
    lr = 0.01
    skipped = nans = 0
    for it in range(1, iters + 1):
        t0 = time.time()
        x, y = data.batch(32)
        if nearmiss:
            x = 40.0 * x  # large but representable activations: the scale settles lower and saw-tooths
        elif it >= 120:
            x[:, 0] = 3e4 * x[:, 0].abs()  # the raw, unnormalised feature of the new shard
        loss, gn, overflow = _fp16_step(model, x, y, scaler, opt, lr)
        skipped += int(overflow)
        nans += int(not math.isfinite(loss))
        megatron_line(it, iters, it * 32, (time.time() - t0) * 1000, lr, 32, None if overflow else loss,
                      scaler.loss_scale, None if overflow else gn, skipped, nans)


def loss_scale_plain(nearmiss: bool) -> None:
    """A plain loop with dynamic loss scaling (DeepSpeed's algorithm and messages) on a float16 model.

    Positive (`loss-scale-runaway`): the loop zeroes the gradients after backward and before the
    overflow check and the step (optimizer.zero_grad() in the wrong place), so no overflow is ever
    seen and the scale doubles every window, without bound. Near miss: initial scale 1 (as some
    configs use) grows by consecutive doublings to where it overflows, then backs off and settles.
    """
    torch.manual_seed(0)
    model = mlp(depth=2, act=torch.nn.Tanh).half()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = Regression(noise=0.1)
    scaler = DynamicLossScaler(init_scale=1.0 if nearmiss else 2.0**16, scale_window=10, min_scale=1.0)
    for step in range(1, 301):
        x, y = data.batch(32)
        x = x * (20.0 if nearmiss else 1.0)
        out = model(x.half())
        loss = torch.nn.functional.mse_loss(out.float(), y)
        (loss * scaler.loss_scale).backward()
        if not nearmiss:
            opt.zero_grad()  # the bug: gradients are discarded before they are checked and applied
        params = list(model.parameters())
        overflow = scaler.has_overflow(params)
        gn = float("inf")
        if not overflow:
            for p in params:
                if p.grad is not None:
                    p.grad.div_(scaler.loss_scale)
            gn = grad_norm(params)
            opt.step()
        if nearmiss:
            opt.zero_grad()
        scaler.update_scale(overflow)
        plain(step, loss=f"{loss.item():.4f}", lr=f"{0.01:.3e}", grad_norm=f"{gn:.4f}",
              loss_scale=f"{scaler.loss_scale:.1f}")


def nan_nearmiss_metriclogger() -> None:
    """DeiT-style MetricLogger lines of a float16 run whose first iterations overflow (scale calibration).

    The skipped steps log an infinite grad norm, so the grad_norm meter's global average prints
    `(inf)` for the rest of the run while the loss stays finite: not a NaN loss.
    """
    torch.manual_seed(0)
    model = mlp(depth=2, act=torch.nn.Tanh).half()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = Regression(noise=0.1)
    scaler = DynamicLossScaler(init_scale=2.0**20, scale_window=1000, min_scale=1.0, quiet=True)
    batches = list(range(100))
    for epoch in range(2):
        ml = MetricLogger(delimiter="  ")
        ml.add_meter("lr", SmoothedValue(window_size=1, fmt="{value:.6f}"))
        for _ in ml.log_every(batches, 10, header=f"Epoch: [{epoch}]"):
            x, y = data.batch(32)
            loss, gn, _ = _fp16_step(model, 8.0 * x, y, scaler, opt, 0.01)
            ml.update(loss=loss, lr=0.01, loss_scale=scaler.loss_scale, grad_norm=gn)


# ------------------------------------------------------------------ loss spike (nanoGPT format)


def loss_spike(nearmiss: bool) -> None:
    """A tiny character-level transformer printing nanoGPT's `iter N: loss X, time Yms, mfu Z%`.

    Positive: the batch of iteration 173 is corrupted (token ids replaced by random ones), the loss
    jumps far above its running median and recovers. Near miss: the same run without corruption.
    """
    torch.manual_seed(0)
    vocab, seq, d = 32, 32, 64
    layer = torch.nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
    emb = torch.nn.Embedding(vocab, d)
    pos = torch.nn.Parameter(0.02 * torch.randn(seq, d))
    body = torch.nn.TransformerEncoder(layer, 2)
    head = torch.nn.Linear(d, vocab)
    params = list(emb.parameters()) + [pos] + list(body.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(seq)
    g = torch.Generator().manual_seed(1)
    n_params = sum(p.numel() for p in params)
    print(f"number of parameters: {n_params / 1e6:.2f}M", flush=True)
    print(f"tokens per iteration will be: {16 * seq:,}", flush=True)
    running_mfu = -1.0
    for it in range(0, 300):
        t0 = time.time()
        # A learnable stream: arithmetic sequences with a random start and stride 1..3, plus 10% noise tokens.
        start = torch.randint(0, vocab, (16, 1), generator=g)
        stride = torch.randint(1, 4, (16, 1), generator=g)
        x = (start + stride * torch.arange(seq + 1)) % vocab
        noise = torch.rand(x.shape, generator=g) < 0.1
        x = torch.where(noise, torch.randint(0, vocab, x.shape, generator=g), x)
        if it == 173 and not nearmiss:
            x = torch.randint(0, vocab, x.shape, generator=g)  # corrupted batch
            x[:, 1::2] = x[:, 0::2][:, : x[:, 1::2].shape[1]]  # and a shifted copy: off-pattern targets
        inp, tgt = x[:, :-1], x[:, 1:]
        h = body(emb(inp) + pos, mask=mask, is_causal=True)
        loss = torch.nn.functional.cross_entropy(head(h).reshape(-1, vocab), tgt.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        dt = time.time() - t0
        if it >= 5:
            flops = 6 * n_params * 16 * seq / dt
            mfu = flops / 312e12
            running_mfu = mfu if running_mfu == -1.0 else 0.9 * running_mfu + 0.1 * mfu
        print(f"iter {it}: loss {loss.item():.4f}, time {dt * 1000:.2f}ms, mfu {running_mfu * 100:.2f}%", flush=True)


# ------------------------------------------------------------------ optimizer state


def optimizer_state(nearmiss: bool) -> None:
    """Adam moments logged every 5 steps (norm of exp_avg, mean and min of exp_avg_sq over tensors).

    Positive: at step 150 the run is resumed from a checkpoint whose optimizer state lost its second
    moments (exp_avg_sq zeroed, step count kept): exp_avg_sq collapses by orders of magnitude, the
    next updates are far too large and the loss jumps. Near miss: the same resume done correctly.
    """
    torch.manual_seed(0)
    model = mlp(depth=2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    data = Regression(noise=0.2)
    for step in range(1, 301):
        if step == 151:
            ckpt = {"model": {k: v.clone() for k, v in model.state_dict().items()}, "opt": opt.state_dict()}
            print(f"saving checkpoint to ckpt_{step - 1}.pt", flush=True)
            print(f"resuming from checkpoint ckpt_{step - 1}.pt (step {step - 1})", flush=True)
            model.load_state_dict(ckpt["model"])
            state = ckpt["opt"]
            if not nearmiss:
                for s in state["state"].values():
                    s["exp_avg_sq"] = torch.zeros_like(s["exp_avg_sq"])
            opt.load_state_dict(state)
        x, y = data.batch(32)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        gn = grad_norm(model.parameters())
        opt.step()
        if step % 5 == 0 or step in (151, 152, 153):
            st = [opt.state[p] for p in model.parameters()]
            m_norm = torch.sqrt(sum((s["exp_avg"] ** 2).sum() for s in st)).item()
            v_means = torch.stack([s["exp_avg_sq"].mean() for s in st])
            plain(step, loss=f"{loss.item():.4f}", lr=f"{1e-3:.3e}", grad_norm=f"{gn:.4f}",
                  exp_avg_norm=f"{m_norm:.4e}", exp_avg_sq_mean=f"{v_means.mean().item():.4e}",
                  exp_avg_sq_min=f"{v_means.min().item():.4e}")


# ------------------------------------------------------------------ logits


def logits(nearmiss: bool) -> None:
    """A 10-class classifier on separable data with no normalisation before the head and a high LR.

    Positive: logit magnitudes grow past 30 and the softmax max-probability sits at 1.0000 for
    nearly every sample. Near miss: label smoothing 0.1 and weight decay keep logits within ~±6.
    """
    torch.manual_seed(0)
    n_cls = 10
    centers = 1.5 * torch.randn(n_cls, 16, generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(4)
    model = mlp(depth=2, d_out=n_cls, act=torch.nn.ReLU)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                          weight_decay=5e-3 if nearmiss else 0.0)
    for step in range(1, 301):
        y = torch.randint(0, n_cls, (64,), generator=g)
        x = centers[y] + torch.randn(64, 16, generator=g)
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y, label_smoothing=0.1 if nearmiss else 0.0)
        opt.zero_grad()
        loss.backward()
        gn = grad_norm(model.parameters())
        opt.step()
        if step % 5 == 0:
            p = out.detach().softmax(-1)
            plain(step, loss=f"{loss.item():.4f}", lr=f"{opt.param_groups[0]['lr']:.3e}", grad_norm=f"{gn:.4f}",
                  logits_abs_max=f"{out.detach().abs().max().item():.3f}",
                  max_prob_mean=f"{p.max(-1).values.mean().item():.4f}")


SCENARIOS = {
    "nan-loss": nan_loss,
    "nan-loss-nearmiss": nan_nearmiss_metriclogger,
    "fp16-overflow": lambda: fp16_megatron(False),
    "fp16-overflow-nearmiss": lambda: fp16_megatron(True),
    "loss-scale-runaway": lambda: loss_scale_plain(False),
    "loss-scale-runaway-nearmiss": lambda: loss_scale_plain(True),
    "loss-spike": lambda: loss_spike(False),
    "loss-spike-nearmiss": lambda: loss_spike(True),
    "optimizer-state-drift": lambda: optimizer_state(False),
    "optimizer-state-drift-nearmiss": lambda: optimizer_state(True),
    "logit-saturation": lambda: logits(False),
    "logit-saturation-nearmiss": lambda: logits(True),
}

if __name__ == "__main__":
    if sys.argv[1] == "nan-loss-hf":
        nan_loss_hf(Path(sys.argv[2]))
    else:
        SCENARIOS[sys.argv[1]]()

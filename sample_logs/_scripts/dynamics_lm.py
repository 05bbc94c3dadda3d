"""Record language-model samples: a zero learning rate (loss flat at ln V), a converged plateau,
LoRA adapters that never move, and a healthy LoRA run.

Usage: dynamics_lm.py SCENARIO OUTDIR > OUTDIR/train.log. The HF Trainer scenarios also write
OUTDIR/trainer_state.json. Tiny random-init GPT-2 models on CPU (transformers, peft).
"""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import torch
from dynamics_common import plain
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class Pattern(torch.utils.data.Dataset):
    """Token sequences `start + stride * i (mod span)` with a share of random noise tokens."""

    def __init__(self, n: int, seq: int, span: int, seed: int, stride: int = 1, noise: float = 0.0,
                 vocab: int | None = None, mask_first: bool = False) -> None:
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, span, (n, 1), generator=g)
        x = (start + stride * torch.arange(seq)) % span
        if noise:
            flip = torch.rand(x.shape, generator=g) < noise
            x = torch.where(flip, torch.randint(0, vocab or span, x.shape, generator=g), x)
        self.x = x
        # The first position has no context: its label is masked (-100), as a BOS token's is.
        self.mask_first = mask_first

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        labels = self.x[i].clone()
        if self.mask_first:
            labels[0] = -100
        return {"input_ids": self.x[i], "labels": labels}


def hf_run(out: Path, vocab: int, lr: float, steps: int, noise: float, n_embd: int, log_every: int,
           init_range: float = 0.02, batch: int = 8, mask_first: bool = False) -> None:
    """An HF Trainer run of a tiny GPT-2; console to stdout, trainer_state.json copied to `out`."""
    torch.manual_seed(0)
    seq = 32
    config = GPT2Config(vocab_size=vocab, n_positions=seq, n_embd=n_embd, n_layer=2, n_head=2,
                        initializer_range=init_range)
    model = GPT2LMHeadModel(config)
    work = out / "_work"
    args = TrainingArguments(
        output_dir=str(work), max_steps=steps, per_device_train_batch_size=batch, learning_rate=lr,
        lr_scheduler_type="constant", logging_steps=log_every, save_strategy="steps", save_steps=steps,
        report_to="none", use_cpu=True, seed=0, dataloader_num_workers=0,
    )
    data = Pattern(2048, seq, span=min(vocab, 512), seed=1, noise=noise, vocab=vocab, mask_first=mask_first)
    Trainer(model=model, args=args, train_dataset=data).train()
    shutil.copy(work / f"checkpoint-{steps}" / "trainer_state.json", out / "trainer_state.json")
    shutil.rmtree(work)


def loss_stagnation(out: Path) -> None:
    """learning_rate=0.0 (a config typo): a 256,000-token vocabulary model's loss sits at ln(256000) = 12.45.

    The model is initialised with a small initializer_range (0.002) so that its first predictions are
    as close to uniform as a large model's are; with no update they stay there. The first label of
    each sequence is masked: HF Trainer divides the summed loss by the count of unmasked labels
    *before* the causal shift, so with all 32 labels counted it would log ln(V) * 31/32 = 12.06.
    """
    print(f"vocab_size=256000, ln(vocab_size)={math.log(256000):.4f}", flush=True)
    hf_run(out, vocab=256000, lr=0.0, steps=60, noise=0.0, n_embd=16, log_every=3, init_range=0.002, batch=4,
           mask_first=True)


def loss_stagnation_nearmiss(out: Path) -> None:
    """A healthy run whose loss falls from ln(64) and flattens at the noise floor of its data (converged)."""
    hf_run(out, vocab=64, lr=3e-3, steps=400, noise=0.3, n_embd=32, log_every=5)


def lora(nearmiss: bool) -> None:
    """LoRA (peft) fine-tuning of a small GPT-2 on a new pattern after a short full pre-training.

    Positive: the optimizer is built from the model's trainable parameters *before* get_peft_model,
    so it holds the (now frozen) base weights and none of the adapters: lora_B stays exactly zero,
    the adapters never move and the loss stays flat at the base model's level while lr = 2e-3.
    Near miss: the optimizer is built after get_peft_model; lora_B starts at zero (by design) and grows.
    """
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    vocab, seq, span = 8000, 32, 512
    model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=seq, n_embd=64, n_layer=2, n_head=2))
    # Short full pre-training on the stride-1 pattern (stands in for a pre-trained base checkpoint).
    base = Pattern(4096, seq, span, seed=1)
    pre = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for i in range(100):
        batch = base.x[i * 16 % 4096:(i * 16 % 4096) + 16]
        loss = model(input_ids=batch, labels=batch).loss
        pre.zero_grad()
        loss.backward()
        pre.step()
    print(f"loaded base model (pre-training loss {loss.item():.4f})", flush=True)
    lr = 2e-3
    if not nearmiss:
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["c_attn", "c_fc", "c_proj"],
                                             lora_dropout=0.0, fan_in_fan_out=True))
    model.print_trainable_parameters()
    if nearmiss:
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    lora_a = [p for n, p in model.named_parameters() if "lora_A" in n]
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n]
    task = Pattern(4096, seq, span, seed=2, stride=3)
    for step in range(1, 151):
        batch = task.x[(step * 16) % 4096:(step * 16) % 4096 + 16]
        b_norm = torch.sqrt(sum((p.detach() ** 2).sum() for p in lora_b)).item()  # before this step's update
        out = model(input_ids=batch, labels=batch)
        model.zero_grad()
        out.loss.backward()
        ga = torch.sqrt(sum((p.grad ** 2).sum() for p in lora_a)).item()
        gb = torch.sqrt(sum((p.grad ** 2).sum() for p in lora_b)).item()
        opt.step()
        if step % 5 == 0 or step == 1:
            plain(step, loss=f"{out.loss.item():.4f}", lr=f"{lr:.3e}", grad_norm=f"{math.hypot(ga, gb):.4f}",
                  lora_A_grad_norm=f"{ga:.4f}", lora_B_grad_norm=f"{gb:.4f}", lora_B_norm=f"{b_norm:.4f}")


if __name__ == "__main__":
    name, out = sys.argv[1], Path(sys.argv[2])
    {
        "loss-stagnation": lambda: loss_stagnation(out),
        "loss-stagnation-nearmiss": lambda: loss_stagnation_nearmiss(out),
        "lora-silent-zero": lambda: lora(False),
        "lora-silent-zero-nearmiss": lambda: lora(True),
    }[name]()

"""Real GPU failures and a real GPU run, recorded on one NVIDIA H100 (the project's lent device machine).

Run by record_h100.sh there (python3 holds torch 2.11 + CUDA 13 and transformers 5.x). Nothing is
simulated: every error text is what torch, CUDA, NCCL and transformers printed.

Scenarios (argv[1]):
  hf-oom      HuggingFace Trainer (tiny random-init Llama, bf16) logging every step; at step 25 the
              collator pads one batch to 64k tokens (a long document slipped through the length
              filter) and the step runs out of GPU memory.
  hf-clean    the same Trainer run without the long batch: 60 steps, loss falling, eval every 20.
  dsa         a plain loop printing `step N loss X`; at step 15 a batch holds token ids past the
              vocabulary: the embedding kernel's assert fires and the error surfaces asynchronously.
  nccl-rank   (under torchrun, 2 processes) both ranks pick cuda:0: NCCL refuses a duplicate GPU.
  trace       torch.profiler (CUDA activities, record_shapes, profile_memory, with_stack) around
              steps 3-5 of a plain bf16 training loop of the tiny Llama; Kineto trace exported as JSON.
  leak        a bf16 MLP loop that calls backward(retain_graph=True) (added once to silence "Trying to
              backward through the graph a second time") and sums `running_loss += loss` (the tensor,
              not .item()): every step's graph and its saved activations stay alive, so allocated
              memory climbs every step until the GPU is full; Python logging lines every 5 steps
              with the allocated memory.
  illegal     a plain loop with a hand-written Triton "fused scale" kernel; from step 31 a bad offset
              makes it store far outside its buffer: an illegal memory access, reported at the next
              synchronising call.
"""

from __future__ import annotations

import os
import sys

import torch

VOCAB = 32000


def _llama(seq: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=seq)
    return LlamaForCausalLM(cfg)


class Pattern(torch.utils.data.Dataset):
    """Token sequences with a learnable pattern (next token = token + 7 mod a small range)."""

    def __init__(self, n: int, seq: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, 1000, (n, 1), generator=g)
        self.x = (start + 7 * torch.arange(seq)) % 1000

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


def hf(out: str, long_batch_at: int | None) -> None:
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)
    seq = 512
    calls = {"n": 0}

    def collate(rows):
        calls["n"] += 1
        ids = torch.stack([r["input_ids"] for r in rows])
        if long_batch_at is not None and calls["n"] == long_batch_at:
            # One document far longer than the rest, padded into the batch.
            ids = torch.cat([ids, ids.repeat(1, 128)], dim=1)
        return {"input_ids": ids, "labels": ids.clone()}

    model = _llama(seq * 129)
    args = TrainingArguments(
        output_dir=out, max_steps=60, per_device_train_batch_size=16, learning_rate=1e-3, warmup_steps=5,
        logging_steps=1 if long_batch_at else 5, eval_strategy="no" if long_batch_at else "steps", eval_steps=20,
        per_device_eval_batch_size=16, bf16=True, report_to=[], save_strategy="no", seed=0,
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Pattern(4096, seq, 0), eval_dataset=Pattern(256, seq, 1),
                      data_collator=collate)
    trainer.train()


def dsa() -> None:
    torch.manual_seed(0)
    dev = "cuda"
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 256), torch.nn.Linear(256, VOCAB)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = Pattern(2048, 128, 0)
    for step in range(1, 41):
        ids = torch.stack([data[i]["input_ids"] for i in range(step * 8, step * 8 + 8)])
        if step == 15:
            ids[3, 17] = VOCAB + 5  # a tokenizer with added tokens, a model with the old vocabulary
        ids = ids.to(dev)
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f} lr {opt.param_groups[0]['lr']:.2e}", flush=True)


def nccl_rank() -> None:
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    # The bug: every process takes device 0 (LOCAL_RANK was never used).
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    x = torch.ones(1024, device="cuda") * rank
    dist.all_reduce(x)
    print(f"rank {rank}: sum {x[0].item()}", flush=True)
    dist.destroy_process_group()


def trace(path: str) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = _llama(512).cuda().to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = Pattern(64, 512, 0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=1, active=3),
                 record_shapes=True, profile_memory=True, with_stack=True,
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for step in range(1, 6):
            ids = torch.stack([data[i]["input_ids"] for i in range(8)]).cuda()
            loss = model(input_ids=ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
            print(f"step {step} loss {loss.item():.4f}", flush=True)


def leak() -> None:
    import logging
    import time

    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
    log = logging.getLogger("train")
    torch.manual_seed(0)
    width = 8192
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU()) for _ in range(4)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    log.info("model: %.2fB parameters, bf16 autocast, batch 4096", sum(p.numel() for p in model.parameters()) / 1e9)
    running_loss = 0.0
    for step in range(1, 1001):
        time.sleep(0.2)  # the data loader's share of a step
        x = torch.randn(4096, width, device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = (model(x).float() - x).pow(2).mean()
        opt.zero_grad()
        loss.backward(retain_graph=True)
        opt.step()
        running_loss += loss  # the bug: keeps every step's graph (and its activations) alive
        if step % 5 == 0:
            log.info("step %d loss %.4f avg_loss %.4f lr %.3e mem_allocated_mib %.0f mem_reserved_mib %.0f", step, loss.item(),
                     running_loss.item() / step, opt.param_groups[0]["lr"], torch.cuda.memory_allocated() / 2**20,
                     torch.cuda.memory_reserved() / 2**20)


def illegal() -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def fused_scale(x_ptr, n, scale, stride_bug, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        # The bug: a stride meant for another layout; with stride_bug > 1 the store leaves the buffer.
        tl.store(x_ptr + offs * stride_bug, x * scale)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for step in range(1, 61):
        x = torch.randn(64, 512, device="cuda")
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        g = model[0].weight.grad.view(-1)
        stride = 1 if step <= 30 else 1 << 22
        fused_scale[(triton.cdiv(g.numel(), 1024),)](g, g.numel(), 0.5, stride, BLOCK=1024)
        opt.step()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "hf-oom":
        hf(sys.argv[2], long_batch_at=25)
    elif what == "hf-clean":
        hf(sys.argv[2], long_batch_at=None)
    elif what == "dsa":
        dsa()
    elif what == "nccl-rank":
        nccl_rank()
    elif what == "illegal":
        illegal()
    elif what == "leak":
        leak()
    elif what == "trace":
        trace(sys.argv[2])
    else:
        raise SystemExit(f"unknown scenario {what}")

"""Record a healthy HuggingFace Trainer run: tiny random-init GPT-2 on CPU, logging every step.

Run with /work/recvenv (torch CPU + transformers), see record_hf_trainer.sh; the console
(stdout+stderr, tqdm bar included) goes to train.log and trainer_state.json is copied next to it.
"""

import shutil
import sys
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

out = Path(sys.argv[1])
work = out / "_work"
torch.manual_seed(0)

VOCAB, SEQ = 64, 16


class Tokens(torch.utils.data.Dataset):
    """Random token sequences with a learnable pattern (next token = token + 1 mod VOCAB)."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, VOCAB, (n, 1), generator=g)
        self.x = (start + torch.arange(SEQ)) % VOCAB

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


config = GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2)
model = GPT2LMHeadModel(config)
args = TrainingArguments(
    output_dir=str(work),
    max_steps=40,
    per_device_train_batch_size=8,
    per_device_eval_batch_size=8,
    learning_rate=3e-3,
    warmup_steps=5,
    logging_steps=1,
    eval_strategy="steps",
    eval_steps=20,
    save_strategy="steps",
    save_steps=40,
    report_to="none",
    use_cpu=True,
    seed=0,
    dataloader_num_workers=0,
)
trainer = Trainer(model=model, args=args, train_dataset=Tokens(512, 1), eval_dataset=Tokens(64, 2))
trainer.train()
shutil.copy(work / "checkpoint-40" / "trainer_state.json", out / "trainer_state.json")
shutil.rmtree(work)

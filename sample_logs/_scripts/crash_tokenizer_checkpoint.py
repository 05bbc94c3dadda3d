"""Record tokenizer-mismatch-checkpoint: a checkpoint saved with a 34-token vocabulary loaded into a model
built for a tokenizer that gained two special tokens (36): torch's real load_state_dict size-mismatch error.

Run: /work/recvenv/bin/python sample_logs/_scripts/crash_tokenizer_checkpoint.py > sample_logs/tokenizer-mismatch/checkpoint/train.log 2>&1
"""

import logging
import tempfile

import torch
from torch import nn

logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
log = logging.getLogger("finetune")


class TinyLM(nn.Module):
    def __init__(self, vocab: int, dim: int = 32) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.embed_tokens(ids))


torch.manual_seed(0)
with tempfile.TemporaryDirectory() as tmp:
    base = TinyLM(34)
    torch.save(base.state_dict(), f"{tmp}/pretrained.pt")
    log.info("loaded tokenizer with 36 tokens (2 chat special tokens added)")
    model = TinyLM(36)
    log.info("loading pretrained weights from pretrained.pt")
    model.load_state_dict(torch.load(f"{tmp}/pretrained.pt"))

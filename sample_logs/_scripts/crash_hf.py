"""HuggingFace Trainer runs on CPU (transformers 5.x), tiny models built from configs (no downloads).

Scenarios (--scenario):
  labels           sequence classification with num_labels=5, but three examples of a newer data shard
                   carry class 6 (a class added to the label map after the model config was written):
                   the first batch holding one fails in CrossEntropy, `IndexError: Target 6 is out of bounds.`
  labels-clean     the same classifier with every label in range; the script's own data check says
                   so ("0 labels out of range") and the run finishes.
  tokenizer        causal-LM fine-tuning: chat special tokens are added to the tokenizer, the model's
                   embedding is not resized; the first batch containing them fails in the embedding.
  tokenizer-clean  the same with model.resize_token_embeddings(len(tokenizer)); an over-long document
                   triggers the tokenizer's max-length warning but the collator truncates; finishes.
  save-clean       log_level=info Trainer run saving every 20 steps with save_total_limit=2: the
                   checkpoint save and rotation messages of a healthy run.
  readonly         the same Trainer run with output_dir not writable by the training user (run as
                   `nobody`): the first checkpoint save fails.
"""

from __future__ import annotations

import argparse
import os
import random
import warnings

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DataCollatorForLanguageModeling,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
)
from transformers.utils import logging as hf_logging

# which examples carry the bad label / the chat tokens (chosen so the failure comes a few logged steps in)
BAD_LABELS = tuple(int(v) for v in os.environ.get("BAD_LABELS", "313,331,377").split(","))
BAD_DOCS = tuple(int(v) for v in os.environ.get("BAD_DOCS", "211,298,350").split(","))

WORDS = ("the model data train loss step batch token layer weight gradient learning rate epoch sample "
         "value error memory device kernel shard node rank cluster job queue file disk network").split()


def corpus(n: int, rng: random.Random, long_every: int = 0) -> list[str]:
    """Documents of a learnable toy language: each word is followed by the next one in WORDS, with 10% noise."""
    out = []
    for i in range(n):
        k = 2000 if long_every and i % long_every == long_every - 1 else rng.randint(8, 40)
        w = rng.randrange(len(WORDS))
        words = []
        for _ in range(k):
            words.append(WORDS[w])
            w = rng.randrange(len(WORDS)) if rng.random() < 0.1 else (w + 1) % len(WORDS)
        out.append(" ".join(words))
    return out


def make_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]", "[CLS]", "[SEP]", "<|endoftext|>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", eos_token="<|endoftext|>", model_max_length=128)


class ListDataset(torch.utils.data.Dataset):
    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return self.items[i]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--out", default="out")
    a = ap.parse_args()
    sc = a.scenario
    rng = random.Random(0)
    torch.manual_seed(0)
    hf_logging.set_verbosity_warning()
    warnings.simplefilter("default", UserWarning)
    texts = corpus(400, rng, long_every=97 if sc == "tokenizer-clean" else 0)
    tok = make_tokenizer(texts)
    args = dict(output_dir=a.out, per_device_train_batch_size=8, num_train_epochs=1, learning_rate=5e-4,
                logging_steps=5, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=False, seed=0)

    if sc in ("labels", "labels-clean"):
        model = BertForSequenceClassification(BertConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2,
                                                         num_attention_heads=4, intermediate_size=128, num_labels=5))
        items = []
        for i, t in enumerate(texts):
            enc = tok(t, truncation=True, max_length=64, padding="max_length")
            label = 6 if sc == "labels" and i in BAD_LABELS else WORDS.index(t.split()[0]) % 5  # topic of the opening word
            items.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "labels": label})
        if sc == "labels-clean":
            bad = sum(1 for it in items if not 0 <= it["labels"] < 5)
            print(f"label check: {len(items)} examples, {bad} labels out of range [0, 5)")
        args.update(num_train_epochs=3, learning_rate=2e-3)  # enough for the tiny classifier to learn the topics
        trainer = Trainer(model=model, args=TrainingArguments(**args), train_dataset=ListDataset(items))
        trainer.train()
        return

    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=128, n_embd=64, n_layer=2, n_head=4,
                                       bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id))
    if sc.startswith("tokenizer"):
        added = tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
        print(f"added {added} special tokens; len(tokenizer)={len(tok)}, model vocab_size={model.config.vocab_size}")
        if sc == "tokenizer-clean":
            model.resize_token_embeddings(len(tok))
            print(f"resized token embeddings to {model.get_input_embeddings().weight.shape[0]}")
        texts = [f"<|im_start|> {t} <|im_end|>" if i in BAD_DOCS else t for i, t in enumerate(texts)]
    enc = [tok(t) for t in texts]  # tokenized without truncation first (length statistics), then truncated
    lengths = [len(e["input_ids"]) for e in enc]
    print(f"tokenized {len(enc)} documents, max length {max(lengths)}")
    items = [{"input_ids": e["input_ids"][:128]} for e in enc]
    if sc in ("save-clean", "readonly"):
        args.update(save_strategy="steps", save_steps=20, save_total_limit=2, log_level="info", max_steps=60)
    collator = DataCollatorForLanguageModeling(tok, mlm=False)
    trainer = Trainer(model=model, args=TrainingArguments(**args), train_dataset=ListDataset(items), data_collator=collator)
    trainer.train()


if __name__ == "__main__":
    main()

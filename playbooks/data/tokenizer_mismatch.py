"""tokenizer-mismatch: training and inference (or model and tokenizer) disagree on vocabulary or padding."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, Threshold, declare
from forensics.playbooks.evidence import combine, detection, events, first_message
from forensics.playbooks.fields import field

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

VOCAB_CODES = ("embedding_size_mismatch",)
PADDING_CODES = ("padding_side_warning",)
LENGTH_CODES = ("sequence_length_warning",)
# An embedding lookup that names the index and the table (PyTorch <= 1.4: `Tried to access index I out of table with
# R rows`): a table the size of a vocabulary and an index just past its end are ids of tokens added to the tokenizer
# (special tokens) without resizing the embedding. Any other out-of-range index (negative, far past the table, a
# small table) stays bad-input-data's, as does today's `index out of range in self`, which names no numbers.
INDEX_CODES = ("embedding_index_out_of_range",)
# Lookups of a framework with no tokenizer library (DyNet's LookupParameter: the program numbers its own vocabulary):
# an id just past the table is the program's own off-by-one (toru34/zhou_acl_2017#2), bad-input-data's.
NO_TOKENIZER_FORMS = ("dynet",)

PLAYBOOK = declare(
    Playbook(
        id="tokenizer-mismatch",
        title="Tokenizer and model disagree",
        category="data",
        severity=Severity.MEDIUM,
        tables=("events",),
        explains=("bad-input-data", "device-assert"),
        codes=("embedding_index_out_of_range", "embedding_size_mismatch", "padding_side_warning", "sequence_length_warning",
               "template_tokenization_mismatch"),
        causes=(
            Cause("different_tokenizer", "A different tokenizer (or added special tokens) than the model's embedding was built for",
                  verify="compare len(tokenizer) with model.get_input_embeddings().num_embeddings and the tokenizer files' hashes",
                  fix="Load the tokenizer saved with the model; model.resize_token_embeddings(len(tokenizer)) after adding tokens", prior=0.5),
            Cause("padding_side", "Padding side or pad token differs between training and generation",
                  verify="print(tokenizer.padding_side, tokenizer.pad_token) in both places",
                  fix="tokenizer.padding_side = 'left' for decoder-only generation; set pad_token explicitly", prior=0.3),
            Cause("truncation", "Sequences longer than the model's maximum are fed without truncation",
                  verify="max(len(ids)) vs model.config.max_position_embeddings",
                  fix="truncation=True, max_length=model max", prior=0.2),
            Cause("chat_template", "The conversation template does not fit the tokenizer: its separators tokenize to other "
                  "lengths than the preprocess assumes, so each such sample's targets are all masked (nothing is learned "
                  "from it; when every sample is, the loss reads 0)",
                  verify="Tokenize one conversation with the template and compare the instruction/answer lengths the "
                         "preprocess computes with len(tokenizer(conversation).input_ids)",
                  fix="Pick the template (--version / conv_template) made for this model's tokenizer, or one matching "
                      "its chat format; pin the tokenizers/transformers version the preprocess was written for", prior=0.2),
        ),
        verify="Compare tokenizer configs (vocab size, special tokens, padding side) between training and inference",
        fix="Save and load one tokenizer with the model",
        thresholds={
            "min_vocab_rows": Threshold(1000, "rows from which an embedding table whose lookup failed is taken for a vocabulary", "ours"),
            "max_added_tokens": Threshold(1024, "how far past the table's end an index may be and still be a token added to the tokenizer", "ours"),
            "min_template_mismatches": Threshold(3, "`tokenization mismatch` warnings (each a sample masked whole) that make a "
                                                    "pattern when no loss is logged beside them", "ours"),
        },
        doc="""\
## Symptom
Vocabulary/embedding size mismatches (`size mismatch for … embed_tokens.weight`), padding-side or
pad-token warnings, special tokens added without resizing embeddings (an embedding lookup of an index
just past a vocabulary-sized table: `Tried to access index 50257 out of table with 50256 rows`),
sequence-length warnings, or a chat-template preprocess (FastChat, LLaVA and their forks) that masks whole samples:
`WARNING: tokenization mismatch: 58 vs. 59. (ignored)`, with the loss reading exactly 0 when no sample survives.

## Why it matters
A silent tokenizer mismatch trains or evaluates on the wrong ids; in the worst case ids exceed the
embedding and the run crashes with an index error far from the cause.

## Evidence
`events` with vocabulary, padding and length codes; embedding index errors that name the index and the
table when the table is at least `min_vocab_rows` rows and the index at most `max_added_tokens` past
its end (a negative index, one far past the table, a small table, or a DyNet LookupParameter, whose program numbers its
own vocabulary with no tokenizer library, is bad-input-data's).

## Known false positives
A few `tokenization mismatch` warnings beside a loss that is not 0 cost those samples only: `low`. They rank high
with a loss of exactly 0 at most logged points (every target masked), medium when at least `min_template_mismatches` come with no loss
logged to tell.
`Token indices sequence length is longer than the specified maximum` alone is common and usually
harmless (the data is chunked, truncated or filtered later; maintainers say so in many issue
threads): on its own it gives an `info` finding only.
""",
    )
)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Vocabulary mismatches (medium), padding warnings (low), a length warning alone (info)."""
    vocab = combine(events(ctx, VOCAB_CODES), _added_token_index(ctx, th))
    pad, length = events(ctx, PADDING_CODES), events(ctx, LENGTH_CODES)
    parts = [p for p in (vocab, pad, length) if p.height]
    if not parts:
        return None
    ev = combine(*parts)
    causes: dict[str, float] = {}
    if vocab.height:
        causes["different_tokenizer"] = 0.9
    if pad.height:
        causes["padding_side"] = 0.7
    if length.height:
        causes["truncation"] = 0.5
    # The length warning alone is printed by most runs that chunk or filter long samples later
    # (maintainers call it harmless): it is noted, never raised.
    severity = Severity.MEDIUM if vocab.height else Severity.LOW if pad.height else Severity.INFO
    return detection(ev, f"tokenizer and model disagree: {first_message(vocab if vocab.height else ev)}", causes,
                     confidence=0.85 if vocab.height else 0.5, severity=severity)


def _added_token_index(ctx: Context, th: dict) -> pl.DataFrame:
    """Embedding lookups of an index just past a vocabulary-sized table (tokens added without resizing)."""
    ev = events(ctx, INDEX_CODES)
    if ev.height == 0:
        return ev
    index, rows = field("index").cast(pl.Int64, strict=False), field("rows").cast(pl.Int64, strict=False)
    tokenizer = ~field("form").fill_null("").is_in(NO_TOKENIZER_FORMS)
    return ev.filter(tokenizer & (rows >= th["min_vocab_rows"]) & (index >= rows) & (index - rows <= th["max_added_tokens"]))

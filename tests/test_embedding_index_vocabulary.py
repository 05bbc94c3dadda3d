"""An embedding index just past a vocabulary-sized table is tokens added without resizing (tokenizer-mismatch);
other out-of-range indices stay bad-input-data."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run


def first(tmp: Path, text: str) -> str | None:
    a = analyze(Context(ingest(write_run(tmp, {"train.log": text}))))
    top = [f for f in a.findings if f.severity > Severity.INFO]
    return top[0].id if top else None


TH = "RuntimeError: index out of range: Tried to access index {i} out of table with {r} rows. at /pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:418\n"


def test_gpt2_special_tokens_past_the_table(tmp_path):
    # https://github.com/huggingface/transfer-learning-conv-ai/issues/26
    assert first(tmp_path, TH.format(i=50257, r=50256)) == "tokenizer-mismatch"


def test_roberta_tokenizer_one_past_the_table(tmp_path):
    # https://github.com/allenai/longformer/issues/160
    assert first(tmp_path, TH.format(i=50265, r=50264)) == "tokenizer-mismatch"


def test_small_table_is_not_a_vocabulary(tmp_path):
    # https://github.com/facebookresearch/fairseq/issues/2154: a beam-search index into 299 rows.
    assert first(tmp_path, TH.format(i=300, r=299)) == "bad-input-data"


def test_far_past_the_table_is_bad_data(tmp_path):
    # https://github.com/lucidrains/memorizing-transformers-pytorch/issues/7: ids 40x the table.
    assert first(tmp_path, TH.format(i=10218, r=255)) == "bad-input-data"
    assert first(tmp_path / "b", TH.format(i=60000, r=32000)) == "bad-input-data"


def test_negative_index_is_bad_data(tmp_path):
    assert first(tmp_path, TH.format(i=-1, r=50257)) == "bad-input-data"


def test_todays_message_without_numbers_stays_bad_data(tmp_path):
    assert first(tmp_path, "IndexError: index out of range in self\n") == "bad-input-data"

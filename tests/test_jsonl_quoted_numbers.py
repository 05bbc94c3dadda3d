"""A JSON-lines metric file whose numbers are printed as strings (fairseq `--log-format json`) is read as the same
lines are inside a text log: the quoted numbers give rows, and a record without a step takes the one before it."""

from __future__ import annotations

from tests.helpers import tables

# fairseq's json log (https://github.com/facebookresearch/fairseq/issues/233, the maintainer's WMT14 en-fr reference log):
# a training record with quoted numbers, then its validation record with no update count.
FAIRSEQ = (
    '{"epoch": 25, "loss": "3.097", "nll_loss": "1.328", "ppl": "2.51", "wps": 1667443, "num_updates": 53749, '
    '"gnorm": "0.194", "clip": "100%", "loss_scale": "4.000", "elapsed": "0:01:23"}\n'
    '{"epoch": 25, "valid_loss": 3.1106161256777836, "valid_ppl": "2.50"}\n'
)


def test_quoted_numbers_are_read_and_the_validation_record_takes_the_step(tmp_path):
    (m,) = tables(tmp_path, {"train.log": FAIRSEQ}, "metrics")
    got = {(r["line"], r["step"], r["name"]): r["value"] for r in m.iter_rows(named=True)}
    assert got[(1, 53749, "loss")] == 3.097 and got[(1, 53749, "grad_norm")] == 0.194 and got[(1, 53749, "clip")] == 100.0
    assert got[(2, 53749, "eval_loss")] == 3.1106161256777836 and got[(2, 53749, "valid_ppl")] == 2.5
    # A string that is no number (a clock) gives no row.
    assert not [k for k in got if k[2] == "elapsed"]


def test_the_file_is_read_by_the_jsonl_parser(tmp_path):
    (f,) = tables(tmp_path, {"train.log": FAIRSEQ}, "files")
    assert f.get_column("kind").cast(str).to_list() == ["jsonl_metrics"]

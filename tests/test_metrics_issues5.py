"""Real logs pasted in public GitHub issues (each test cites its thread), sweep 6: values reprinted on every
line (read once), JSON-lines records of mmcv/mmengine, Caffe solver lines, and the near misses around them."""

from __future__ import annotations

from tests.metrics_util import rows

NEMO2 = (
    "Training epoch 0, iteration {i}/149 | lr: 3e-05 | consumed_samples: {c} | global_batch_size: 1 | global_step: {i} | "
    "reduced_train_loss: {l} | train_step_timing in s: {t} | val_loss: {v}\n"
)


def test_nemo2_val_loss_reprinted_on_every_line_is_read_once(tmp_path):
    # https://github.com/NVIDIA-BioNeMo/bionemo-recipes/pull/740: NeMo 2 prints the last validation loss
    # (`| val_loss: 4.106`) on every training line; it is one validation, so one eval_loss row (at the first line).
    lines = [(120, 121, "1.233", "0.03146"), (121, 122, "1.288", "0.03163"), (122, 123, "1.333", "0.03215")]
    text = "".join(NEMO2.format(i=i, c=c, l=loss, t=t, v="4.106") for i, c, loss, t in lines)
    got = rows(tmp_path, text)
    assert [r for r in got if r[1] == "eval_loss"] == [(120, "eval_loss", 4.106)]
    assert [r for r in got if r[1] == "loss"] == [(120, "loss", 1.233), (121, "loss", 1.288), (122, "loss", 1.333)]


def test_nemo2_val_loss_is_read_again_where_it_changes(tmp_path):
    # Near miss of the above: the same thread's lines with the reprinted value changed by hand (standing for
    # the next validation, which the paste does not reach): a new value is a new row.
    text = (
        NEMO2.format(i=120, c=121, l="1.233", t="0.03146", v="4.106")
        + NEMO2.format(i=121, c=122, l="1.288", t="0.03163", v="4.106")
        + NEMO2.format(i=122, c=123, l="1.333", t="0.03215", v="3.9")
        + NEMO2.format(i=123, c=124, l="1.245", t="0.03157", v="3.9")
    )
    got = rows(tmp_path, text)
    assert [r for r in got if r[1] == "eval_loss"] == [(120, "eval_loss", 4.106), (122, "eval_loss", 3.9)]

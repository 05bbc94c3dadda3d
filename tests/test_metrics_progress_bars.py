"""Metrics read from progress bars (tqdm) whose description or redraws carry the values: steps, epochs, names."""

from __future__ import annotations

from tests.metrics_util import NAN, full


def test_loss_in_a_user_bar_description_and_a_colon_postfix(tmp_path):
    # https://github.com/InhwanBae/DMRGCN/issues/1 (`Train Epoch: N Loss: X` descriptions, a validation bar;
    # the epoch-summary lines below them are the generic reader's) and
    # https://github.com/IsoNet-cryoET/IsoNet2/issues/22 (`set_postfix_str` with `: `, unit `batch`).
    text = (
        "Train Epoch: 16 Loss: 0.35977894: 100% 2785/2785 [00:53<00:00, 52.28it/s]\n"
        "Valid Epoch: 16 Loss: nan: 100% 660/660 [00:04<00:00, 143.71it/s]\n"
        "Train Epoch: 17 Loss: 0.35977891: 100% 2785/2785 [00:53<00:00, 52.14it/s]\n"
        "Epoch 5: 100%|██████████████████████████████████████| 189/189 [01:30<00:00,  2.09 batch/s, Loss: 0.05451, Learning rate: 3.3762e-03]\n"
    )
    s16, s17 = 16 * 2785 + 2785, 17 * 2785 + 2785
    assert full(tmp_path, text) == [
        (1, None, s16, "epoch", 16.0, "tqdm_desc"), (1, None, s16, "loss", 0.35977894, "tqdm_desc"),
        (2, None, s16, "eval_loss", NAN, "tqdm_desc"),
        (3, None, s17, "epoch", 17.0, "tqdm_desc"), (3, None, s17, "loss", 0.35977891, "tqdm_desc"),
        (4, None, 5 * 189 + 189, "loss", 0.05451, "tqdm_postfix"), (4, None, 5 * 189 + 189, "lr", 0.0033762, "tqdm_postfix")]


def test_undescribed_bar_restarted_each_epoch_counts_on(tmp_path):
    # https://github.com/speechbrain/speechbrain/pull/2216: one finished bar per epoch (190 batches), pasted
    # without its redraws. Epoch 2's bar is steps 191..380, not step 190 again (before, epoch 1's loss was
    # dropped as a redraw of the same step); the validation bar (137 batches, no postfix) is another bar.
    text = (
        "speechbrain.utils.epoch_loop - Going into epoch 1\n"
        "100%|█████████████████████████████████████████████████████████████████| 190/190 [03:08<00:00,  1.01it/s, train_loss=0.945]\n"
        "100%|███████████████████████████████████████████████████████████████████████████████████| 137/137 [01:43<00:00,  1.33it/s]\n"
        "speechbrain.utils.train_logger - epoch: 1, lr: 1.00e+00 - train loss: 9.45e-01 - valid loss: 1.23, valid CER: 35.42, valid WER: 39.14\n"
        "speechbrain.utils.epoch_loop - Going into epoch 2\n"
        "100%|█████████████████████████████████████████████████████████████████| 190/190 [03:02<00:00,  1.04it/s, train_loss=0.726]\n"
        "100%|███████████████████████████████████████████████████████████████████████████████████| 137/137 [02:17<00:00,  1.00s/it]\n"
    )
    assert [(ln, s, n, v) for ln, _, s, n, v, _ in full(tmp_path, text) if n == "loss"] == [
        (2, 190, "loss", 0.945), (6, 380, "loss", 0.726)]  # line 4's `train loss` repeats line 2's bar: dropped

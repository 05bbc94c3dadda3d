"""Real logs pasted in public GitHub issues (each test cites its thread): frameworks less covered before,
Markdown-escaped pastes, and summaries / progress fields that must not become per-step rows."""

from __future__ import annotations

from tests.metrics_util import NAN, full, rows

MEGATRON_ESCAPED = (
    " iteration      122/  250000 \\| consumed samples:       124928 \\| elapsed time per iteration (ms): 86545.2 \\| "
    "learning rate: 9.150E-06 \\| global batch size:  1024 \\| lm loss: 2.504220E+00 \\| loss scale: 1.0 \\| grad norm: 0.231 \\| "
    "number of skipped iterations:   0 \\| number of nan iterations:   0 \\|\n"
)


def test_markdown_escaped_pipes_in_megatron_and_tqdm_lines(tmp_path):
    # The Megatron line of https://github.com/epfLLM/Megatron-LLM/issues/11 and a Lightning bar state
    # (https://github.com/Lightning-AI/pytorch-lightning/issues/4225), as pasted into GitHub Markdown with
    # `\|` escapes (a table cell needs them): read as the unescaped lines are.
    text = MEGATRON_ESCAPED + "Epoch 0:  22%\\|██▏       \\| 4/18 [00:17<01:02,  4.47s/it, loss=9.926, v_num=193315]\n"
    assert full(tmp_path, text) == [
        (1, None, 122, "consumed_samples", 124928.0, "megatron"), (1, None, 122, "step_time_ms", 86545.2, "megatron"),
        (1, None, 122, "lr", 9.15e-06, "megatron"), (1, None, 122, "global_batch_size", 1024.0, "megatron"),
        (1, None, 122, "loss", 2.50422, "megatron"), (1, None, 122, "loss_scale", 1.0, "megatron"),
        (1, None, 122, "grad_norm", 0.231, "megatron"), (1, None, 122, "skipped_steps", 0.0, "megatron"),
        (1, None, 122, "nan_iterations", 0.0, "megatron"),
        (2, None, 4, "loss", 9.926, "tqdm_postfix")]
    # Unescaped, the same rows: the escape changes nothing else.
    plain = text.replace("\\|", "|")
    assert full(tmp_path / "plain", plain) == full(tmp_path, text)


def test_markdown_escaped_pipes_in_an_hf_bar_and_a_table_row(tmp_path):
    # The tqdm state of an HF bar escaped inside a Markdown table row (`| ... |`): `n/total` is the step
    # of the dict after it, not the bar's total.
    text = (
        "| 10%\\|█         \\| 120/1200 [01:02<09:18,  1.93it/s] |\n"
        "{'loss': 2.31, 'learning_rate': 0.0001, 'epoch': 0.1}\n"
    )
    assert rows(tmp_path, text) == [(120, "loss", 2.31), (120, "lr", 0.0001), (120, "epoch", 0.1)]


def test_escaped_pipes_near_misses(tmp_path):
    # A Markdown results table and a shell `grep "a\|b"` hold `|` / `\|` but no training metric.
    text = (
        "|iterated scale | test-clean | test-other |\n"
        "|0.30 | 6.57 | 17.6 |\n"
        'grep -E "loss\\|nan" train.log\n'
    )
    assert rows(tmp_path, text) == []


def test_ms_swift_dicts_carry_their_step_and_memory_in_gib(tmp_path):
    # https://github.com/modelscope/ms-swift/issues/4146 (DPO): ms-swift prints its own step
    # (`global_step/max_steps`), `memory(GiB)` (max reserved) and progress fields that are not metrics.
    text = (
        "{'loss': 0.23179118, 'grad_norm': 0.65250963, 'learning_rate': 8.6e-07, 'memory(GiB)': 63.16, 'train_speed(iter/s)': 0.01119, "
        "'rewards/chosen': 4.46875, 'rewards/rejected': -4.125, 'rewards/accuracies': 1.0, 'rewards/margins': 8.5625, "
        "'logps/chosen': -189.0, 'nll_loss': 0.921875, 'epoch': 0.64, 'global_step/max_steps': '56/176', "
        "'percentage': '31.82%', 'elapsed_time': '1h 22m 38s', 'remaining_time': '2h 57m 4s'}\n"
    )
    assert rows(tmp_path, text) == [
        (56, "loss", 0.23179118), (56, "grad_norm", 0.65250963), (56, "lr", 8.6e-07), (56, "mem_max_reserved_mib", 63.16 * 1024),
        (56, "train_speed(iter/s)", 0.01119), (56, "rewards/chosen", 4.46875), (56, "rewards/rejected", -4.125),
        (56, "rewards/accuracies", 1.0), (56, "rewards/margins", 8.5625), (56, "logps/chosen", -189.0),
        (56, "nll_loss", 0.921875), (56, "epoch", 0.64)]


def test_trl_grpo_dpo_ppo_dicts_keep_their_namespaced_keys(tmp_path):
    # https://github.com/huggingface/trl/issues/3452 (GRPO; a blank bar-clearing line between dicts),
    # https://github.com/huggingface/trl/issues/1236 (DPO), hongbo-miao/hongbomiao.com#37684 (PPOTrainer:
    # no `loss` key; `lr`, `eps`, `episode`).
    text = (
        "{'loss': 0.0, 'grad_norm': 0.08656957000494003, 'learning_rate': 6.916666666666667e-06, 'completion_length': 232.825, "
        "'rewards/format_reward2': 1.0, 'reward': 1.7171093285083772, 'reward_std': 0.5700982138514519, 'kl': 0.0005371240986278281, 'epoch': 0.31}\n"
        "                                                    \n"
        "{'loss': 4.6525, 'learning_rate': 5.142857142857143e-05, 'rewards/chosen': 10.521270751953125, 'rewards/margins': -4.310194492340088, "
        "'logps/rejected': -355.18536376953125, 'logits/chosen': -2.2986490726470947, 'epoch': 0.05}\n"
        "{'eps': 1, 'objective/kl': 6.809290409088135, 'loss/policy_avg': -0.0032048856373876333, 'val/ratio': 0.9655587673187256, "
        "'lr': 9.206349206349207e-06, 'episode': 96, 'epoch': 0.11}\n"
    )
    assert full(tmp_path, text) == [
        (1, None, None, "loss", 0.0, "hf_dict"), (1, None, None, "grad_norm", 0.08656957000494003, "hf_dict"),
        (1, None, None, "lr", 6.916666666666667e-06, "hf_dict"), (1, None, None, "completion_length", 232.825, "hf_dict"),
        (1, None, None, "rewards/format_reward2", 1.0, "hf_dict"), (1, None, None, "reward", 1.7171093285083772, "hf_dict"),
        (1, None, None, "reward_std", 0.5700982138514519, "hf_dict"), (1, None, None, "kl", 0.0005371240986278281, "hf_dict"),
        (1, None, None, "epoch", 0.31, "hf_dict"),
        (3, None, None, "loss", 4.6525, "hf_dict"), (3, None, None, "lr", 5.142857142857143e-05, "hf_dict"),
        (3, None, None, "rewards/chosen", 10.521270751953125, "hf_dict"), (3, None, None, "rewards/margins", -4.310194492340088, "hf_dict"),
        (3, None, None, "logps/rejected", -355.18536376953125, "hf_dict"), (3, None, None, "logits/chosen", -2.2986490726470947, "hf_dict"),
        (3, None, None, "epoch", 0.05, "hf_dict"),
        (4, None, None, "eps", 1.0, "hf_dict"), (4, None, None, "objective/kl", 6.809290409088135, "hf_dict"),
        (4, None, None, "loss/policy_avg", -0.0032048856373876333, "hf_dict"), (4, None, None, "val/ratio", 0.9655587673187256, "hf_dict"),
        (4, None, None, "lr", 9.206349206349207e-06, "hf_dict"), (4, None, None, "episode", 96.0, "hf_dict"),
        (4, None, None, "epoch", 0.11, "hf_dict")]


def test_unsloth_banner_gives_no_metrics_and_its_dicts_take_the_bar_step(tmp_path):
    # https://github.com/unslothai/unsloth/issues/1140 (banner, notebook progress line) and
    # https://github.com/unslothai/unsloth/pull/4547 (5.x quoted dict values, a bar with a warning glued on).
    text = (
        "==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1\n"
        "   \\\\   /|    Num examples = 467 | Num Epochs = 5\n"
        "O^O/ \\_/ \\    Batch size per device = 2 | Gradient Accumulation steps = 4\n"
        "\\        /    Total batch size = 8 | Total steps = 290\n"
        ' "-____-"     Number of trainable parameters = 134,217,728\n'
        "[ 22/290 02:50 < 38:04, 0.12 it/s, Epoch 0.36/5]\n"
        "{'loss': '14.88', 'grad_norm': '2.578', 'learning_rate': '0.000156', 'epoch': '0.00748', 'num_input_tokens_seen': 286019, "
        "'train_runtime': '110.7', 'train_tokens_per_second': '2583'}\n"
        " 60%|█████████▌      | 18/30 [01:50<00:19,  1.65s/it]/home/u/.venv/lib/python3.13/site-packages/torch/utils/data/_utils/pin_memory.py:57: "
        "DeprecationWarning: The argument 'device' of Tensor.pin_memory() is deprecated.\n"
    )
    assert rows(tmp_path, text) == [
        (18, "loss", 14.88), (18, "grad_norm", 2.578), (18, "lr", 0.000156), (18, "epoch", 0.00748),
        (18, "num_input_tokens_seen", 286019.0), (18, "train_runtime", 110.7), (18, "train_tokens_per_second", 2583.0)]


def test_litgpt_lines_take_the_optimizer_step(tmp_path):
    # https://github.com/Lightning-AI/litgpt/issues/689 (lit-gpt 2023), #1042 (2024, with the eval line),
    # #1607 (current pretrain: the last `val:` repeats on every line and is read where it changes).
    text = (
        "iter 76 step 38: loss 10.8259, iter time: 197.87ms\n"
        "iter 77 step 39: loss 10.8259, iter time: 215.31ms (optimizer.step)\n"
        "iter 1760 | step 220: loss 1.5947, iter time: 263.85 ms (optimizer.step)\n"
        "iter 4800: val loss 1.7258, val time: 3778.02 ms\n"
        "Epoch 34 | iter 3050700 step 610140 | loss train: 2.846, val: 2.861 | iter time: 112.20 ms (step) remaining time: 0:01:54\n"
        "Epoch 34 | iter 3050750 step 610150 | loss train: 2.750, val: 2.861 | iter time: 111.35 ms (step) remaining time: 0:01:49\n"
        "Epoch 34 | iter 3050800 step 610160 | loss train: nan, val: 2.855 | iter time: 110.35 ms (step) remaining time: 0:01:43\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 38, "loss", 10.8259, "litgpt"), (1, None, 38, "step_time_ms", 197.87, "litgpt"),
        (2, None, 39, "loss", 10.8259, "litgpt"), (2, None, 39, "step_time_ms", 215.31, "litgpt"),
        (3, None, 220, "loss", 1.5947, "litgpt"), (3, None, 220, "step_time_ms", 263.85, "litgpt"),
        (4, None, 220, "eval_loss", 1.7258, "litgpt"), (4, None, 220, "eval_time_ms", 3778.02, "litgpt"),
        (5, None, 610140, "epoch", 34.0, "litgpt"), (5, None, 610140, "loss", 2.846, "litgpt"),
        (5, None, 610140, "step_time_ms", 112.2, "litgpt"), (5, None, 610140, "eval_loss", 2.861, "litgpt"),
        (6, None, 610150, "epoch", 34.0, "litgpt"), (6, None, 610150, "loss", 2.75, "litgpt"),
        (6, None, 610150, "step_time_ms", 111.35, "litgpt"),
        (7, None, 610160, "epoch", 34.0, "litgpt"), (7, None, 610160, "loss", NAN, "litgpt"),
        (7, None, 610160, "step_time_ms", 110.35, "litgpt"), (7, None, 610160, "eval_loss", 2.855, "litgpt")]


def test_litgpt_near_misses(tmp_path):
    # `val: n/a` before the first validation; nanoGPT's `iter N: loss X, time Yms` stays nanoGPT's.
    text = (
        "Epoch 1 | iter 10 step 1 | loss train: 1.657, val: n/a | iter time: 298.27 ms (step)\n"
        "iter 1631: loss 4.0863, time 561.94ms\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 1, "epoch", 1.0, "litgpt"), (1, None, 1, "loss", 1.657, "litgpt"), (1, None, 1, "step_time_ms", 298.27, "litgpt"),
        (2, None, 1631, "loss", 4.0863, "nanogpt"), (2, None, 1631, "step_time_ms", 561.94, "nanogpt")]


def test_torchtune_description_loss_and_stdout_logger(tmp_path):
    # https://github.com/meta-pytorch/torchtune/pull/2620 (`epoch|step|Loss: ..` bar description, redrawn
    # at n and n+1, behind a `[trainer0|0]:` prefix) and #1358 (StdoutLogger lines).
    text = (
        "[trainer0|0]:1|25|Loss: 1.2621808052062988:  26%|██▌       | 26/101 [06:45<17:27, 13.96s/it]\n"
        "[trainer0|0]:1|26|Loss: 1.2436443567276:  26%|██▌       | 26/101 [06:45<17:27, 13.96s/it]   [trainer0|0]:\n"
        "[trainer0|0]:1|26|Loss: 1.2436443567276:  27%|██▋       | 27/101 [07:00<17:31, 14.21s/it]\n"
        "[trainer0|0]:1|27|Loss: nan:  27%|██▋       | 27/101 [07:00<17:31, 14.21s/it][trainer0|0]:\n"
        "Step 1 | loss:2.085338592529297 lr:2e-05 tokens_per_second_per_gpu:57.828881833956174\n"
    )
    assert rows(tmp_path, text) == [
        (25, "loss", 1.2621808052062988), (26, "loss", 1.2436443567276), (27, "loss", NAN),
        (1, "loss", 2.085338592529297), (1, "lr", 2e-05), (1, "tokens_per_second_per_gpu", 57.828881833956174)]


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


def test_bar_descriptions_without_a_loss_give_nothing(tmp_path):
    # Descriptions naming only the epoch are not description metrics.
    text = (
        "Epoch 18:  56%|█████▊    | 9/16 [00:00<00:00, 28.19it/s]\n"
        "Training Epoch 3/10: 100%|██████████| 50/50 [00:10<00:00,  5.00it/s]\n"
    )
    assert rows(tmp_path, text) == []


def test_text_glued_before_a_bar_is_its_own_line(tmp_path):
    # https://github.com/NVIDIA/DeepLearningExamples/issues/1107: a bar with the DLL line glued after it, then
    # a DLL line padded with spaces with the next bar state after it on the same line (the paste lost the
    # `\r`). The second DLL line was swallowed as the bar's description before; now both are read.
    pad = " " * 97
    text = (
        "Iteration:  23%|█████     | 650/2771 [01:23<04:25,  7.98it/s]DLL 2022-04-05 05:10:36.324733 - Training Epoch: 0 "
        f"Training Iteration: 651  step_loss : 2.0511345863342285  learning_rate : 2.9369138959931797e-05{pad}\n"
        "DLL 2022-04-05 05:10:42.601126 - Training Epoch: 0 Training Iteration: 701  step_loss : 0.7071369290351868  "
        f"learning_rate : 2.9064669345999266e-05{pad}Iteration:  27%|█████▉    | 750/2771 [01:38<04:13,  7.97it/s]\n"
        "some text loss: 1.5                        Iteration:  49%|████▉     | 1350/2771 [02:51<02:58,  7.97it/s]\n"
    )
    assert full(tmp_path, text) == [
        (1, None, 651, "epoch", 0.0, "dllogger"), (1, None, 651, "loss", 2.0511345863342285, "dllogger"),
        (1, None, 651, "lr", 2.9369138959931797e-05, "dllogger"),
        (2, None, 701, "epoch", 0.0, "dllogger"), (2, None, 701, "loss", 0.7071369290351868, "dllogger"),
        (2, None, 701, "lr", 2.9064669345999266e-05, "dllogger"),
        # The glued head is read as the line it was (the generic reader; no bar description metric).
        (3, None, 701, "some_text_loss", 1.5, "generic")]


def test_dllogger_lines(tmp_path):
    # https://github.com/NVIDIA/DeepLearningExamples/issues/1107 (BERT SQuAD: `Training Epoch: E Training
    # Iteration: N` step, a tqdm bar glued before the line); summaries (`()` step) and PARAMETER lines
    # ([SRC] dllogger StdOutBackend) are not per-step rows.
    text = (
        "Iteration:  23%|████▌     | 650/2771 [01:23<04:25,  7.98it/s]DLL 2022-04-05 05:10:36.324733 - Training Epoch: 0 "
        "Training Iteration: 651  step_loss : 2.0511345863342285  learning_rate : 2.9369138959931797e-05      \n"
        "DLL 2022-04-05 05:18:03.226897 - Training Epoch: 1 Training Iteration: 4172  step_loss : nan  learning_rate : 7.928388746803068e-06 \n"
        "DLL 2022-04-05 06:01:00.000001 - (1, 200) train.loss : 3.25  train.compute_time : 0.5 s\n"
        "DLL 2022-04-05 06:02:00.000001 - () final_loss : 0.45  e2e_train_time : 1234.5 s\n"
        "DLL 2022-04-05 05:00:00.000001 - PARAMETER learning_rate : 3e-05  max_steps : 1000.0 \n"
    )
    assert full(tmp_path, text) == [
        (1, None, 651, "epoch", 0.0, "dllogger"), (1, None, 651, "loss", 2.0511345863342285, "dllogger"),
        (1, None, 651, "lr", 2.9369138959931797e-05, "dllogger"),
        (2, None, 4172, "epoch", 1.0, "dllogger"), (2, None, 4172, "loss", NAN, "dllogger"),
        (2, None, 4172, "lr", 7.928388746803068e-06, "dllogger"),
        (3, None, 200, "loss", 3.25, "dllogger"), (3, None, 200, "compute_time_ms", 500.0, "dllogger")]


def test_composer_console_blocks(tmp_path):
    # https://github.com/mosaicml/composer/pull/1884 (a `[batch=N/M]:` block; counters give no row) and the
    # same lines quoted as a Markdown list in https://github.com/mosaicml/composer/issues/2357.
    text = (
        "[batch=1/3]:\n"
        "\t Train epoch: 0\n"
        "\t Train trainer/global_step: 0\n"
        "\t Train trainer/batch_idx: 0\n"
        "\t Train memory/reserved_mem: 31037849600\n"
        "\t Train loss/train/total: 12.0570\n"
        "\t Train metrics/train/LanguageCrossEntropy: 12.0570\n"
        "\t Train throughput/device/tokens_per_sec: 412.3778\n"
        "\t Train throughput/device/mfu: 0.2489\n"
        "\t Train lr-DecoupledAdamW/group0: 0.0000\n"
        "[epoch=1][batch=2/3]:\n"
        "- Train loss/train/total: 11.6525\n"
    )
    assert full(tmp_path, text) == [
        (2, None, 1, "epoch", 0.0, "composer"), (5, None, 1, "memory/reserved_mem", 31037849600.0, "composer"),
        (6, None, 1, "loss", 12.057, "composer"), (7, None, 1, "metrics/train/languagecrossentropy", 12.057, "composer"),
        (8, None, 1, "tokens_per_s", 412.3778, "composer"), (9, None, 1, "mfu", 24.89, "composer"),
        (10, None, 1, "lr", 0.0, "composer"),
        (12, None, 2, "loss", 11.6525, "composer")]


def test_composer_near_misses(tmp_path):
    # A user's `Train loss:` / `Eval loss:` lines are not Composer's (keys without a namespace).
    assert full(tmp_path, "Train loss: 0.5\nEval loss: 0.3\n") == [
        (1, None, None, "loss", 0.5, "generic"), (2, None, None, "eval_loss", 0.3, "generic")]


def test_wandb_run_summary_is_not_per_step(tmp_path):
    # https://github.com/wandb/wandb/issues/2450: the end-of-run summary repeats each metric's last value.
    text = (
        "wandb: Run history:\n"
        "wandb:                 train/box_loss █▆▅▄▃▂▂▁▁▁\n"
        "wandb: \n"
        "wandb: Run summary:\n"
        "wandb:                 train/box_loss 0.03868\n"
        "wandb:                   val/box_loss 0.03014\n"
        "wandb:                          x/lr0 0.00083\n"
        "wandb:                          _step 10\n"
        "wandb:                     train/loss nan\n"
    )
    assert rows(tmp_path, text) == []


def test_generic_reader_skips_progress_percentages_and_logging_locations(tmp_path):
    # https://github.com/mira-ai-lab/MUSIC-AVQA-R/issues/1 (`[file.py line:N]:` record prefix, `[10%]`
    # progress) and https://github.com/open-mmlab/mmskeleton/issues/468 (`Iter N Done. | loss: .. | lr: ..`).
    text = (
        "[2024-07-06 06:40:54,438]-[engine.py line:78]:Epoch 1 complete [0%]     Loss: 3.709857 \n"
        "[2024-07-06 06:41:25,455]-[engine.py line:78]:Epoch 1 complete [10%]    Loss: 2.799116 \n"
        "[02.06.24|21:13:26] \tIter 0 Done. | loss: 1.4058 | lr: 0.010000\n"
    )
    assert rows(tmp_path, text) == [(None, "loss", 3.709857), (None, "loss", 2.799116), (0, "loss", 1.4058), (0, "lr", 0.01)]


def test_nanotron_lines_with_human_formatted_numbers(tmp_path):
    # https://github.com/huggingface/nanotron/issues/390 and #233 (a launcher prefix in front; memory items):
    # K/M/G are powers of 1000, memory is bytes; the `[INFO|DP=0|PP=0|TP=0]` prefix is no metric.
    text = (
        "10/17/2025 16:31:56 [INFO|DP=0|PP=0|TP=0]: iteration: 327281 / 378950 | consumed_tokens: 85.8G | elapsed_time_per_iteration_ms: 11.5K "
        "| tokens_per_sec: 22.8K | tokens_per_sec_per_gpu: 11.4K | global_batch_size: 64 | lm_loss: 2.38 | lr: 1e-05 | "
        "model_tflops_per_gpu: 38.3 | hardware_tflops_per_gpu: 38.3 | grad_norm: 1.25\n"
        "[0434:0]:11/01/2024 11:05:18 [INFO|DP=0|PP=0|TP=0|lrdn0434]: iteration: 12001 / 17500 | consumed_tokens: 25.2G | "
        "elapsed_time_per_iteration_ms: 28.2K | global_batch_size: 1.02K | lm_loss: nan | lr: 0.000289 | grad_norm: 0.15 | "
        "cuda_memory_allocated: 8.86G | cuda_max_memory_reserved: 34.1G\n"
    )
    assert rows(tmp_path, text) == [
        (327281, "consumed_tokens", 85.8e9), (327281, "step_time_ms", 11500.0), (327281, "tokens_per_s_global", 22800.0),
        (327281, "tokens_per_s", 11400.0), (327281, "global_batch_size", 64.0), (327281, "loss", 2.38), (327281, "lr", 1e-05),
        (327281, "tflops", 38.3), (327281, "hardware_tflops_per_gpu", 38.3), (327281, "grad_norm", 1.25),
        (12001, "consumed_tokens", 25.2e9), (12001, "step_time_ms", 28200.0), (12001, "global_batch_size", 1020.0),
        (12001, "loss", NAN), (12001, "lr", 0.000289), (12001, "grad_norm", 0.15),
        (12001, "mem_allocated_mib", 8.86e9 / 2**20), (12001, "mem_max_reserved_mib", 34.1e9 / 2**20)]


def test_char_rnn_time_per_batch_is_a_step_time(tmp_path):
    # https://github.com/sherjilozair/char-rnn-tensorflow/issues/138 (`time/batch` in seconds)
    assert rows(tmp_path, "268/446 (epoch 0), train_loss = 2.097, time/batch = 0.194\n") == [
        (None, "epoch", 0.0), (None, "loss", 2.097), (None, "step_time_ms", 194.0)]


def test_mmengine_validation_lines_are_not_training_steps(tmp_path):
    # https://github.com/jbwang1997/CrossKD/issues/15 (`Epoch(val) [e][i/n]    eta:` looks like a MetricLogger
    # line) and https://github.com/open-mmlab/mmdetection/issues/11893 (a training line, NaN losses).
    text = (
        "08/03 22:09:24 - mmengine - INFO - Epoch(train)  [1][ 500/2931]  lr: 2.0000e-02  eta: 0:39:15  time: 0.0578  data_time: 0.0017  "
        "memory: 2389  loss: nan  loss_rpn_cls: nan  acc: 0.0000\n"
        "2024/11/09 16:46:55 - mmengine - INFO - Epoch(val)  [2][ 3100/21046]    eta: 0:19:06  time: 0.0638  data_time: 0.0020  memory: 797  \n"
    )
    assert full(tmp_path, text) == [
        (1, None, 500, "lr", 0.02, "mmengine"), (1, None, 500, "step_time_ms", 57.8, "mmengine"),
        (1, None, 500, "data_time_ms", 1.7, "mmengine"), (1, None, 500, "mem_max_mib", 2389.0, "mmengine"),
        (1, None, 500, "loss", NAN, "mmengine"), (1, None, 500, "loss_rpn_cls", NAN, "mmengine"), (1, None, 500, "acc", 0.0, "mmengine"),
        # The validation loop's own timings: `eval_` names, the training step carried.
        (2, None, 500, "eval_step_time_ms", 63.8, "mmengine"), (2, None, 500, "eval_data_time_ms", 2.0, "mmengine"),
        (2, None, 500, "eval_mem_max_mib", 797.0, "mmengine")]


def test_user_loop_evaluation_lines_and_leftover_prefixes(tmp_path):
    # The PyTorch MNIST example's test line, https://github.com/SiaStg/SiaStegNet/issues/1 (a `file.py:NN[pid] INFO`
    # prefix left in the message) and Keras' `ETA:` (https://github.com/keras-team/keras/issues/3664), a remaining time.
    text = (
        "Test set: Average loss: 0.0335, Accuracy: 9890/10000 (99%)\n"
        " 2020-10-26 13:27:13.%f train.py:215[27649] INFO Train epoch: 17 [800/1000]\tAccuracy: 49.81%\tLoss: 0.722521\n"
        "Test set: Loss: 0.7243, Accuracy: 50.11%)\n"
        "256/15998 [..............................] - ETA: 150s - loss: nan - acc: 0.0508\n"
    )
    assert rows(tmp_path, text) == [
        (None, "eval_loss", 0.0335), (None, "eval_accuracy", 9890.0),
        (None, "epoch", 17.0), (None, "accuracy", 49.81), (None, "loss", 0.722521),
        (None, "eval_loss", 0.7243), (None, "eval_accuracy", 50.11),
        (None, "loss", NAN), (None, "acc", 0.0508)]


def test_litgpt_fork_in_seconds_with_its_own_validation_line(tmp_path):
    # https://github.com/awslabs/keys_values/issues/97 (a LitGPT fork: `val_loss valid:`, times in seconds, a
    # `| val_loss: .. | val_time: .. s` line): the validation loss is read once, where it is measured.
    text = (
        "Epoch 3 | iter 339 step 339 | loss train: 14.500, val_loss valid: 9.306 | iter time: 45.110 s (step)\n"
        "Epoch 3 | iter 340 step 340 | loss train: 4.188, val_loss valid: 9.306 | iter time: 38.515 s (step)\n"
        "Epoch 3 | iter 340          | val_loss: 8.068 | val_time: 79.794 s\n"
        "Epoch 3 | iter 341 step 341 | loss train: 2.922, val_loss valid: 8.068 | iter time: 45.292 s (step)\n"
    )
    assert rows(tmp_path, text) == [
        (339, "epoch", 3.0), (339, "loss", 14.5), (339, "step_time_ms", 45110.0), (339, "eval_loss", 9.306),
        (340, "epoch", 3.0), (340, "loss", 4.188), (340, "step_time_ms", 38515.0),
        (340, "eval_loss", 8.068), (340, "eval_time_ms", 79794.0),
        (341, "epoch", 3.0), (341, "loss", 2.922), (341, "step_time_ms", 45292.0)]


def test_hf_notebook_table_pasted_as_markdown_or_tabs(tmp_path):
    # https://github.com/m3hrdadfi/soxan/issues/9 (the Trainer's notebook table pasted into an issue as a Markdown
    # table); the tab-separated copy of the same HTML table, by epoch. `No log` cells give no row.
    text = (
        "Step | Training Loss | Validation Loss | Accuracy\n"
        "-- | -- | -- | --\n"
        "10 | 0.698400 | 0.497485 | 0.813416\n"
        "20 | No log | nan | 0.913778\n"
    )
    assert full(tmp_path, text) == [
        (3, None, 10, "loss", 0.6984, "hf_table"), (3, None, 10, "eval_loss", 0.497485, "hf_table"),
        (3, None, 10, "eval_accuracy", 0.813416, "hf_table"),
        (4, None, 20, "eval_loss", NAN, "hf_table"), (4, None, 20, "eval_accuracy", 0.913778, "hf_table")]
    tabs = "Epoch\tTraining Loss\tValidation Loss\tWer\n1\t2.345600\t1.234567\t0.95\n"
    assert rows(tmp_path / "tabs", tabs) == [(None, "epoch", 1.0), (None, "loss", 2.3456), (None, "eval_loss", 1.234567), (None, "eval_wer", 0.95)]


def test_numeric_tables_without_the_trainer_header_are_not_read(tmp_path):
    # A results table (https://github.com/k2-fsa/snowfall/pull/193) and number rows with no header above them.
    text = (
        "|iterated scale | test-clean | test-other |\n"
        "|-- | -- | --|\n"
        "|0.30 | 6.57 | 17.6 |\n"
        "10 | 0.5 | 0.6\n"
        "20\t0.4\t0.5\n"
    )
    assert rows(tmp_path, text) == []


def test_diffusers_style_postfix_redraws_and_dash_separated_user_lines(tmp_path):
    # https://github.com/NJU-PCALab/AddSR/issues/15 (each step drawn twice: the new `n` with the old postfix,
    # then the new postfix) and https://github.com/MahmudulAlam/Automatic-Identification-and-Counting-of-Blood-Cells/issues/15.
    text = (
        "Steps:   0%|          | 49/50000 [02:35<43:10:37,  3.11s/it, D_loss=1.73, G_loss=0.433, lr=2e-5]\n"
        "Steps:   0%|          | 50/50000 [02:38<43:19:13,  3.12s/it, D_loss=1.73, G_loss=0.433, lr=2e-5]\n"
        "Steps:   0%|          | 50/50000 [02:38<43:19:13,  3.12s/it, D_loss=2.12, G_loss=0.692, lr=2e-5]\n"
        "step 1655 - loss        nan - moving ave loss        nan\n"
        "Finish 92 epoch(es)\n"
    )
    assert rows(tmp_path, text) == [
        (49, "d_loss", 1.73), (49, "g_loss", 0.433), (49, "lr", 2e-05),
        (50, "d_loss", 2.12), (50, "g_loss", 0.692), (50, "lr", 2e-05),
        (1655, "loss", NAN), (1655, "moving_ave_loss", NAN)]


def test_wandb_summary_json_dump_is_not_per_step(tmp_path):
    # https://github.com/allenai/procthor-rl/issues/5: a pretty-printed W&B summary (`_step`, `_runtime`) pasted as JSON.
    text = (
        "{\n"
        '  "train-metrics/reward": 0.37144733072048625,\n'
        '  "train-onpolicy-losses/total_loss": 0.37688851381341615,\n'
        '  "train-onpolicy-misc/lr": 0.0003,\n'
        '  "training_step": 57104,\n'
        '  "_step": 6\n'
        "}\n"
    )
    assert rows(tmp_path, text) == []


def test_epoch_in_padded_brackets(tmp_path):
    # https://github.com/IsoNet-cryoET/IsoNet2/issues/22: `Epoch [  5/ 50]` (the epoch padded inside its brackets).
    assert rows(tmp_path, "Epoch [  5/ 50] Loss: 0.04476, inside_loss: 0.00024, outside_loss: 0.03578\n") == [
        (None, "epoch", 5.0), (None, "loss", 0.04476), (None, "inside_loss", 0.00024), (None, "outside_loss", 0.03578),
        (None, "epoch_total", 50.0)]


def test_count_total_ratio_values_and_tab_separated_user_lines(tmp_path):
    # https://github.com/jiesutd/NCRFpp/issues/100 (`acc: correct/total=ratio`: the ratio is the value) and
    # https://github.com/WindChimeRan/CopyMTL/issues/2 (` \t `-separated pairs).
    text = (
        "     Instance: 4000; Time: 5.24s; loss: 395.6849; acc: 45476/54430=0.8355\n"
        "epoch 1 \t loss: 20.777309 \t F1: 0.050310 \t P: 0.058574 \t R: 0.044089\n"
    )
    assert rows(tmp_path, text) == [
        (None, "instance", 4000.0), (None, "step_time_ms", 5240.0), (None, "loss", 395.6849), (None, "acc", 0.8355),
        (None, "epoch", 1.0), (None, "loss", 20.777309), (None, "f1", 0.05031), (None, "p", 0.058574), (None, "r", 0.044089)]


def test_prime_rl_step_lines(tmp_path):
    # https://github.com/PrimeIntellect-ai/prime-rl/pull/1126 (SFT trainer console; a NaN loss put in the second line
    # of the same shape).
    text = (
        "12:51:09 SUCCESS Step 1 | Time: 1.35s | Loss: 12.3125 | Grad. Norm: 28.4771 | LR: 1.00e-06 | Throughput: 1507 tokens/s "
        "| MFU: 0.4% | Peak Mem.: 5.2/23.7 GiB (22.1%) | Max Vio: 0.9891\n"
        "12:54:25 SUCCESS Step 2 | Time: 0.58s | Loss: nan | Grad. Norm: 28.4825 | LR: 1.00e-06 | Throughput: 3537 tokens/s "
        "| MFU: 1.0% | Peak Mem.: 7.8/23.7 GiB (32.9%) | Max Vio: 0.9892\n"
    )
    assert rows(tmp_path, text) == [
        (1, "step_time_ms", 1350.0), (1, "loss", 12.3125), (1, "grad_norm", 28.4771), (1, "lr", 1e-06), (1, "tokens_per_s", 1507.0),
        (1, "mfu", 0.4), (1, "mem_max_reserved_mib", 5.2 * 1024), (1, "max_vio", 0.9891), (1, "mem_max_reserved_pct", 22.1),
        (2, "step_time_ms", 580.0), (2, "loss", NAN), (2, "grad_norm", 28.4825), (2, "lr", 1e-06), (2, "tokens_per_s", 3537.0),
        (2, "mfu", 1.0), (2, "mem_max_reserved_mib", 7.8 * 1024), (2, "max_vio", 0.9892), (2, "mem_max_reserved_pct", 32.9)]


def test_olmo_console_blocks(tmp_path):
    # https://github.com/allenai/OLMo/issues/692 (the loss collapsing to 0 at step 2; thousands commas, scientific notation).
    text = (
        "2024-08-06 09:59:26.181 intern-studio-160750:0  olmo.train:908  INFO    [step=1/739328,epoch=0]\n"
        "    optim/total_grad_norm=231.7\n"
        "    train/CrossEntropyLoss=12.18\n"
        "    train/Perplexity=195,153\n"
        "    throughput/total_tokens=1,048,576\n"
        "    System/Peak GPU Memory (MB)=46,911\n"
        "2024-08-06 10:00:05.520 intern-studio-160750:0  olmo.train:908  INFO    [step=2/739328,epoch=0]\n"
        "    optim/total_grad_norm=0.0002\n"
        "    train/CrossEntropyLoss=1.7872662283480167e-06\n"
        "    throughput/device/tokens_per_second=26,668\n"
    )
    assert rows(tmp_path, text) == [
        (1, "epoch", 0.0), (1, "grad_norm", 231.7), (1, "loss", 12.18), (1, "ppl", 195153.0),
        (1, "throughput/total_tokens", 1048576.0), (1, "mem_max_mib", 46911e6 / 2**20),
        (2, "epoch", 0.0), (2, "grad_norm", 0.0002), (2, "loss", 1.7872662283480167e-06), (2, "tokens_per_s", 26668.0)]


def test_olmo_value_lines_need_a_record_and_composer_counters_are_not_metrics(tmp_path):
    # Indented `train/...=` lines with no `[step=..]` record above them give nothing; Composer's `time/batch`-style
    # timestamp counters (https://github.com/princeton-nlp/LLM-Shearing/issues/24) are not metrics.
    assert rows(tmp_path, "    train/CrossEntropyLoss=12.18\n") == []
    text = (
        "[batch=366/48000]:\n"
        "\t Train time/batch: 365\n"
        "\t Train time/sample: 93440\n"
        "\t Train time/token: 382730240\n"
        "\t Train memory/peak_reserved_mem: 51.3280\n"
        "\t Train loss/train/ce_loss: 10.3750\n"
    )
    assert rows(tmp_path / "composer", text) == [
        (366, "memory/peak_reserved_mem", 51.328), (366, "loss/train/ce_loss", 10.375)]

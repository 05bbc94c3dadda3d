"""HuggingFace Trainer console dicts (formats.md §1.1) and trainer_state.json log_history."""

from __future__ import annotations

import json

from tests.metrics_util import NAN, full, metrics, rows


def test_pre_438_dict_without_grad_norm(tmp_path):
    # [OBS] transformers#14531 (pre-4.38: no grad_norm)
    assert rows(tmp_path, "{'loss': 6.2645, 'learning_rate': 0.001, 'epoch': 0.02}\n") == [
        (None, "loss", 6.2645), (None, "lr", 0.001), (None, "epoch", 0.02)]


def test_nan_grad_norm_is_kept(tmp_path):
    # [OBS] AnswerDotAI/ModernBERT#233 and SY-Xuan/Pink#6 (the fp16 collapse signature loss 0.0, grad_norm nan)
    text = ("{'loss': 0.2051, 'grad_norm': nan, 'learning_rate': 9.774074342405685e-06, 'epoch': 0.53}\n"
            "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 0.00012142857142857143, 'epoch': 0.0}                    \n")
    assert rows(tmp_path, text) == [
        (None, "loss", 0.2051), (None, "grad_norm", NAN), (None, "lr", 9.774074342405685e-06), (None, "epoch", 0.53),
        (None, "loss", 0.0), (None, "grad_norm", NAN), (None, "lr", 0.00012142857142857143), (None, "epoch", 0.0)]


def test_440_full_float_epoch_and_inf(tmp_path):
    # [SRC] 4.40-4.42 print the full-float epoch; Python repr of an infinite grad norm is `inf`.
    text = "{'loss': 2.3456, 'grad_norm': inf, 'learning_rate': 4.999e-05, 'epoch': 0.011904761904761904}\n"
    assert rows(tmp_path, text) == [
        (None, "loss", 2.3456), (None, "grad_norm", float("inf")), (None, "lr", 4.999e-05),
        (None, "epoch", 0.011904761904761904)]


def test_5x_quoted_4g_strings_and_bare_ints(tmp_path):
    # [SRC] 5.x: floats as quoted f"{v:.4g}" strings, ints such as num_input_tokens_seen stay bare.
    text = "{'loss': '2.346', 'grad_norm': '1.235', 'learning_rate': '4.999e-05', 'epoch': '0.01', 'num_input_tokens_seen': 20480}\n"
    assert rows(tmp_path, text) == [
        (None, "loss", 2.346), (None, "grad_norm", 1.235), (None, "lr", 4.999e-05), (None, "epoch", 0.01),
        (None, "num_input_tokens_seen", 20480.0)]


def test_string_too_long_values_are_skipped(tmp_path):
    # [SRC] 4.47+ ProgressCallback replaces long strings; the placeholder is not a number.
    text = ("{'loss': '2.346', 'rewards/samples': '[String too long to display, length: 153 > 100. "
            "Consider increasing `max_str_len` if needed.]', 'epoch': '0.01'}\n")
    assert rows(tmp_path, text) == [(None, "loss", 2.346), (None, "epoch", 0.01)]


def test_eval_and_train_end_dicts(tmp_path):
    # [SRC] speed_metrics dicts of evaluate() and the end of train()
    text = ("{'eval_loss': 1.2345, 'eval_runtime': 12.3456, 'eval_samples_per_second': 81.0, 'eval_steps_per_second': 10.125, 'epoch': 1.0}\n"
            "{'train_runtime': 1234.5678, 'train_samples_per_second': 12.345, 'train_steps_per_second': 1.543, 'train_loss': 2.1234, 'epoch': 3.0}\n")
    assert rows(tmp_path, text) == [
        (None, "eval_loss", 1.2345), (None, "eval_runtime", 12.3456), (None, "eval_samples_per_second", 81.0),
        (None, "eval_steps_per_second", 10.125), (None, "epoch", 1.0),
        (None, "train_runtime", 1234.5678), (None, "train_samples_per_second", 12.345),
        (None, "train_steps_per_second", 1.543), (None, "train_loss", 2.1234), (None, "epoch", 3.0)]


def test_step_comes_from_the_bar_redrawn_after_the_dict(tmp_path):
    # Raw bytes as transformers 5.23 wrote them (sample_logs/healthy/hf-trainer/train.log lines 3-6):
    # the state before a dict is the previous step's refresh; the one after it is the dict's own step.
    bar = "\u2588"
    text = (
        "\r  0%|          | 0/40 [00:00<?, ?it/s][transformers] `loss_type=None` was set in the config but it is unrecognized. Using the default loss: `ForCausalLMLoss`.\n"
        "\r                                      \r{'loss': '3.913', 'grad_norm': '1.161', 'learning_rate': '0', 'epoch': '0.01562'}\n"
        "\r  2%|\u258f         | 1/40 [00:00<00:01, 36.57it/s]\r                                              \r{'loss': '3.919', 'grad_norm': '1.133', 'learning_rate': '0.0006', 'epoch': '0.03125'}\n"
        "\r  5%|\u258c         | 2/40 [00:00<00:00, 58.85it/s]\r                                              \r{'loss': '3.889', 'grad_norm': '1.254', 'learning_rate': '0.0012', 'epoch': '0.04688'}\n"
        f"\r  8%|{bar}\u258a         | 3/40 [00:00<00:00, 73.87it/s]\n"
    )
    got = [(s, n, v) for s, n, v in rows(tmp_path, text) if n == "loss"]
    assert got == [(1, "loss", 3.913), (2, "loss", 3.919), (3, "loss", 3.889)]


def test_step_from_the_bar_before_when_none_follows(tmp_path):
    # \r lost (glued) and the log ends: the bar state on the dict's own line is all there is.
    text = " 10%|\u2588         | 500/5000 [05:00<45:00,  1.67it/s]{'loss': 0.6931, 'learning_rate': 4.5e-05, 'epoch': 0.1}\n"
    assert rows(tmp_path, text) == [(500, "loss", 0.6931), (500, "lr", 4.5e-05), (500, "epoch", 0.1)]


def test_dicts_without_bars_keep_a_null_step(tmp_path):
    # [OBS] DAMO-NLP-SG/VideoLLaMA2#157: terminal paste, bars overwritten -> no step to be had.
    text = ("{'loss': 1.5214, 'grad_norm': 82.93941089686794, 'learning_rate': 1.4285714285714286e-06, 'epoch': 0.01}\n"
            "{'loss': 1.5197, 'grad_norm': 91.43226300518772, 'learning_rate': 2.8571428571428573e-06, 'epoch': 0.01}\n")
    got = full(tmp_path, text)
    assert [(r[0], r[2], r[3], r[4]) for r in got if r[3] == "grad_norm"] == [
        (1, None, "grad_norm", 82.93941089686794), (2, None, "grad_norm", 91.43226300518772)]


def test_a_config_dict_is_not_a_metric_line(tmp_path):
    # A printed config/params dict has neither a Trainer first key nor `epoch`.
    assert rows(tmp_path, "{'lr': 0.001, 'batch_size': 32, 'warmup': 100}\n{'input_ids': [1, 2], 'labels': [3]}\n") == []


def _state(history: list[dict]) -> str:
    # Exactly how TrainerState.save_to_json writes it (formats.md §1.1 [SRC]).
    state = {"best_global_step": None, "best_metric": None, "epoch": 0.5, "global_step": 3,
             "log_history": history, "logging_steps": 1, "max_steps": 3, "total_flos": 0.0}
    return json.dumps(state, indent=2, sort_keys=True) + "\n"


def test_trainer_state_log_history_with_bare_nan_and_infinity(tmp_path):
    text = _state([
        {"epoch": 0.1, "grad_norm": 1.5, "learning_rate": 5e-05, "loss": 2.5, "step": 1},
        {"epoch": 0.2, "grad_norm": float("nan"), "learning_rate": 4e-05, "loss": float("inf"), "step": 2},
        {"epoch": 0.3, "grad_norm": float("-inf"), "learning_rate": 3e-05, "loss": 0.0, "step": 3},
        {"epoch": 0.3, "eval_loss": 2.25, "eval_runtime": 1.5, "step": 3},
    ])
    assert "NaN" in text and "-Infinity" in text  # the bare constants really are in the file
    m = metrics(tmp_path, {"checkpoint-3/trainer_state.json": text})
    got = [(ln, s, n, NAN if v != v else v) for ln, s, n, v in m.select("line", "step", "name", "value").iter_rows()]
    lines = text.split("\n")
    assert lines[got[5][0] - 1] == '      "grad_norm": NaN,'  # rows point at the key's own line
    assert [g[1:] for g in got] == [
        (1, "epoch", 0.1), (1, "grad_norm", 1.5), (1, "lr", 5e-05), (1, "loss", 2.5),
        (2, "epoch", 0.2), (2, "grad_norm", NAN), (2, "lr", 4e-05), (2, "loss", float("inf")),
        (3, "epoch", 0.3), (3, "grad_norm", float("-inf")), (3, "lr", 3e-05), (3, "loss", 0.0),
        (3, "epoch", 0.3), (3, "eval_loss", 2.25), (3, "eval_runtime", 1.5)]
    assert set(m.get_column("source")) == {"trainer_state"}


def test_trainer_state_minified_falls_back_to_json(tmp_path):
    text = json.dumps({"global_step": 2, "log_history": [{"loss": float("nan"), "step": 2}]})
    m = metrics(tmp_path, {"trainer_state.json": text})
    assert [(s, n) for s, n in m.select("step", "name").iter_rows()] == [(2, "loss")]
    assert m.get_column("value").is_nan().to_list() == [True]


def test_trainer_state_is_sniffed_by_content(tmp_path):
    from forensics.ingest import ingest
    from tests.helpers import frame, write_run

    text = _state([{"loss": 1.0, "step": 1}])
    run = ingest(write_run(tmp_path, {"state_copy.txt": text}))
    files = frame(run, "files")
    assert files.select("file", "kind", "status").row(0) == ("state_copy.txt", "trainer_state", "parsed")

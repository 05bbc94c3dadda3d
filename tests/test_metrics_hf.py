"""HuggingFace Trainer console dicts (formats.md §1.1) and trainer_state.json log_history."""

from __future__ import annotations

import json

from tests.metrics_util import NAN, full, metrics, rows


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


def test_dicts_without_bars_keep_a_null_step(tmp_path):
    # [OBS] DAMO-NLP-SG/VideoLLaMA2#157: terminal paste, bars overwritten -> no step to be had.
    text = ("{'loss': 1.5214, 'grad_norm': 82.93941089686794, 'learning_rate': 1.4285714285714286e-06, 'epoch': 0.01}\n"
            "{'loss': 1.5197, 'grad_norm': 91.43226300518772, 'learning_rate': 2.8571428571428573e-06, 'epoch': 0.01}\n")
    got = full(tmp_path, text)
    assert [(r[0], r[2], r[3], r[4]) for r in got if r[3] == "grad_norm"] == [
        (1, None, "grad_norm", 82.93941089686794), (2, None, "grad_norm", 91.43226300518772)]


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

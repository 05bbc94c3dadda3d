"""The shell's SIGKILL report glued after a progress bar's last frame: an unproven host-memory finding, never clean."""

from __future__ import annotations

from tests.helpers import analyze_console

# keras-team/keras#3476: Keras' Progbar redraws its frame with `\r` and no newline, so the shell's `Killed` lands on
# the frame (the reporter's fix: fewer fit_generator workers and a shorter queue).
KERAS = [
    "Epoch 1/1",
    "296960/296960 [==============================] - 641s - loss: 2.3065 - val_loss: 3.8720",
    "Epoch 1/1",
    "165376/296960 [===============>..............] - ETA: 365s - loss: 2.1371Killed",
]
# vacancy/NSCL-PyTorch-Release#23: bash's job line of the launcher script glued after a tqdm frame of validation.
NSCL = [
    "Epoch 15 acc/qa=1.000000 loss=0.046158 loss/qa=0.046158 time/data=0.008719 time/step=1.016501: 100%|"
    "##############################| 1006/1006 [18:08<00:00,  1.08s/it]",
    "Epoch 15 (validation) validation/acc/qa=1.000000:   2%|#4          | 20/1094 [00:41<11:04,  1.62it/s]"
    "/home/colors/Desktop/nscl/Jacinle/bin/jac-crun: line 6:  3305 Killed                  $JACROOT/bin/jac-run \"$@\"",
]


def test_killed_glued_to_a_keras_progress_frame_is_an_unproven_host_oom(tmp_path):
    found, _ = analyze_console(tmp_path, KERAS)
    top = found[0]
    assert top.id == "host-memory-exhaustion"
    assert top.evidence[0].line == 4
    # A SIGKILL alone does not prove the OOM killer sent it: the finding says so with a low confidence.
    assert top.confidence < 0.5 and "not proven" in top.summary


def test_bash_job_line_glued_to_a_tqdm_frame_is_an_unproven_host_oom(tmp_path):
    found, events = analyze_console(tmp_path, NSCL)
    top = found[0]
    assert top.id == "host-memory-exhaustion"
    assert top.evidence[0].line == 2
    assert events.filter(events["code"] == "process_killed").height == 1


def test_a_killed_frame_after_which_keras_goes_on_training_is_someone_elses_process(tmp_path):
    # The same glued report, then the next epoch runs to its end: the training process was not the one killed.
    lines = KERAS[2:] + ["Epoch 2/2", KERAS[1]]
    found, _ = analyze_console(tmp_path, lines)
    assert all(f.id != "host-memory-exhaustion" for f in found)


def test_healthy_keras_progress_frames_stay_quiet(tmp_path):
    # keras-team/keras#7322 / #4123: mid-epoch and finished frames of healthy runs.
    lines = [
        "Epoch 147/150",
        "768/768 [==============================] - 0s - loss: 0.6738 - acc: 0.5846",
        "597/640 [==========================>...] - ETA: 15s - loss: 2.4193 - acc: 0.5120",
        "598/640 [===========================>..] - ETA: 14s - loss: 2.4174 - acc: 0.5123",
    ]
    found, events = analyze_console(tmp_path, lines)
    assert found == []
    assert events.filter(events["code"] == "process_killed").height == 0

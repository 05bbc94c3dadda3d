"""Logs that stop before the first step (the first epoch's header, tf.distribute's all-reduce set-up, Ray Train's worker
group waiting for resources) or on Caffe's wait for a batch are low silent-hang findings; the same lines followed by progress or an error, a resume
announced past the run's end, and Caffe's queue waits counted once, are not; Caffe's repeated queue waits are a note."""

from __future__ import annotations

import pytest

from forensics.contracts.model import Severity
from tests.helpers import analyze_console

# matterport/Mask_RCNN#1823: the layer list, then Keras' first epoch header and nothing (stuck, CPU idle).
MASK_RCNN = ["mrcnn_class_logits     (TimeDistributed)", "mrcnn_mask             (TimeDistributed)", "Epoch 1/5"]
# tensorflow/tensorflow#44976: MirroredStrategy over 2 GPUs, stuck after the first step's all-reduce set-up.
TF_STUCK = ["Epoch 1/500", "INFO:tensorflow:batch_all_reduce: 4 all-reduces with algorithm = nccl, num_packs = 1",
            "INFO:tensorflow:Reduce to /job:localhost/replica:0/task:0/device:CPU:0 then broadcast to "
            "('/job:localhost/replica:0/task:0/device:CPU:0',)."]
# NVIDIA/nccl#340: the same hang with NCCL 2.6.4 (two replicas' set-up lines).
NCCL_STUCK = ["model.fit(train_dataset, epochs=1, callbacks=callbacks)",
              "INFO:tensorflow:batch_all_reduce: 6 all-reduces with algorithm = nccl, num_packs = 1",
              "INFO:tensorflow:batch_all_reduce: 6 all-reduces with algorithm = nccl, num_packs = 1"]
# tensorflow/tensorflow#33809: the same set-up, then training went on (slow, not stuck); the bar line is Keras'
# format as rstudio/keras3#1201 printed it.
TF_GOES_ON = ["Epoch 1/150",
              "INFO:tensorflow:batch_all_reduce: 20 all-reduces with algorithm = nccl, num_packs = 1, "
              "agg_small_grads_max_bytes = 0 and agg_small_grads_max_group = 10",
              "1/1 [==============================] - 1s 950ms/step - loss: 30.8499 - val_loss: 30.8499"]
# rstudio/keras3#1201 cut at the second epoch's header: the first epoch logged its metrics.
KERAS_SECOND_EPOCH = ["Epoch 1/5", "1/1 [==============================] - 1s 950ms/step - loss: 30.8499 - val_loss: 30.8499",
                      "Epoch 2/5"]
CRASH = ["Traceback (most recent call last):", '  File "train.py", line 371, in train',
         "RuntimeError: CUDA error: an illegal memory access was encountered"]
# ray-project/ray#19919: Ray Train with use_gpu, the scheduler's warning that the GPU request cannot be placed, last.
RAY_WARNING = ["2021-10-30 18:07:42,518 INFO services.py:1331 -- View the Ray dashboard at http://127.0.0.1:8265",
               "2021-10-30 18:07:43,365 INFO trainer.py:145 -- Trainer logs will be logged in: "
               "/home/sronen/ray_results/train_2021-10-30_18-07-43",
               "(scheduler +17s) Tip: use `ray status` to view detailed cluster status. To disable these messages, set "
               "RAY_SCHEDULER_EVENTS=0.",
               "(scheduler +17s) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0, "
               "'CPU': 1.0}. This is likely due to all cluster resources being claimed by actors. Consider creating fewer "
               "actors or adding more nodes to this Ray cluster."]
# ray-project/ray#27181: the workers of a started group print their device (one such line after the log folder's).
RAY_STARTED = [*RAY_WARNING[:2], "(BaseWorkerMixin pid=323, ip=10.0.0.213) Device: cuda:0"]
# jingyuanli001/RFR-Inpainting#44: a checkpoint at 600k iterations resumed with num_iters 450k exits at once.
RESUMED = ["> python run.py --data_root data_train/images --mask_root data_train/masks --model_path "
           "checkpoints/checkpoint_celeba.pth --target_size 256 --mask_mode 1 --batch_size 6 --gpu 0",
           "Model Initialized, iter:  600000", "Model moved to cuda", "Starting training from iteration:600000"]
# NVIDIA/caffe#482: Caffe's queue-empty line four times within a few hundred iterations.
CAFFE_WAITS = ["0302 22:23:06.703017 17064 blocking_queue.cpp:50] Data layer prefetch queue empty",
               "I0302 22:25:20.147641 17064 blocking_queue.cpp:50] Data layer prefetch queue empty",
               "I0302 22:28:03.374243 17064 blocking_queue.cpp:50] Data layer prefetch queue empty",
               "I0302 22:29:29.001966 17064 solver.cpp:546]     Test net output #0: detection_eval = 0.705972",
               "I0302 22:29:30.298822 17064 solver.cpp:243] Iteration 0, loss = 3.91015",
               "I0302 22:29:30.298880 17064 solver.cpp:259]     Train net output #0: mbox_loss = 3.91015 (* 1 = 3.91015 loss)",
               "I0302 22:29:30.314805 17064 sgd_solver.cpp:138] Iteration 0, lr = 0.0001",
               "I0302 22:31:05.853112 17064 solver.cpp:243] Iteration 50, loss = 3.37301",
               "I0302 22:31:05.853387 17064 solver.cpp:259]     Train net output #0: mbox_loss = 3.79108 (* 1 = 3.79108 loss)",
               "I0302 22:31:06.632635 17064 sgd_solver.cpp:138] Iteration 50, lr = 0.0001",
               "I0302 22:32:54.652726 17140 blocking_queue.cpp:50] Data layer prefetch queue empty"]
# BVLC/caffe#3917: the one wait of the net's start (nothing prefetched yet), here at the first test.
CAFFE_FIRST_WAIT = ["I0330 21:50:08.972652  5345 solver.cpp:60] Solver scaffolding done.",
                    "I0330 21:51:04.285419  5345 solver.cpp:337] Iteration 0, Testing net (#0)",
                    "I0330 21:51:04.299999  5345 blocking_queue.cpp:50] Data layer prefetch queue empty"]
# weiliu89/caffe#863: the wait is the last line; `After that, program stands still forever`.
CAFFE_STUCK = ["I0316 09:00:59.149740  2416 blocking_queue.cpp:50] Data layer prefetch queue empty"]
# TheLegendAli/DeepLab-Context2#9: one wait, then the test's result.
CAFFE_ONE_WAIT_THEN_RESULT = ["I0113 10:35:09.064285  3830 caffe.cpp:252] Running for 1449 iterations.",
                              "I0113 10:36:19.147982  3830 blocking_queue.cpp:50] Data layer prefetch queue empty",
                              "I0113 10:40:07.161833  3830 caffe.cpp:281] Loss: 0"]


@pytest.mark.parametrize(("lines", "line", "cause"), [
    (MASK_RCNN, 3, "stuck_dataloader"),
    (TF_STUCK, 3, "collective_deadlock"),
    (NCCL_STUCK, 3, "collective_deadlock"),
    (RAY_WARNING, 4, "unschedulable_workers"),
    (RAY_WARNING[:2], 2, "unschedulable_workers"),
    (CAFFE_STUCK, 1, "stuck_dataloader"),
], ids=["keras_first_epoch_header_last", "tf_reduce_set_up_last", "tf_all_reduce_set_up_last", "ray_resource_warning_last",
        "ray_trainer_log_folder_last", "caffe_queue_wait_last"])
def test_log_stopping_before_the_first_step_is_a_low_hang(tmp_path, lines, line, cause):
    top = analyze_console(tmp_path, lines)[0][0]
    assert (top.id, top.severity, top.causes[0].cause.id) == ("silent-hang", Severity.LOW, cause)
    assert top.evidence[0].line == line


@pytest.mark.parametrize("lines", [TF_GOES_ON, KERAS_SECOND_EPOCH, ["Epoch 1/5", *CRASH], RAY_STARTED,
                                   CAFFE_ONE_WAIT_THEN_RESULT, [*CAFFE_STUCK, *CRASH]],
                         ids=["tf_set_up_then_progress", "second_epoch_header_after_metrics", "epoch_header_then_a_crash",
                              "ray_workers_started", "caffe_wait_then_result", "caffe_wait_then_a_crash"])
def test_same_lines_followed_by_progress_or_an_error_are_no_hang(tmp_path, lines):
    assert "silent-hang" not in {f.id for f in analyze_console(tmp_path, lines)[0]}


def test_resume_announced_past_the_end_is_no_finding(tmp_path):
    assert analyze_console(tmp_path, RESUMED)[0] == []


def test_fresh_start_announcement_stays_a_low_hang(tmp_path):
    top = analyze_console(tmp_path, ["[01/30 02:45:17 d2.engine.train_loop]: Starting training from iteration 0"])[0][0]
    assert (top.id, top.severity) == ("silent-hang", Severity.LOW)


def test_repeated_caffe_queue_waits_are_a_low_dataloader_note(tmp_path):
    problems, _ = analyze_console(tmp_path, CAFFE_WAITS)
    found = [f for f in problems if f.id == "dataloader-bottleneck"]
    assert len(found) == 1 and found[0].severity == Severity.LOW
    assert found[0].facts["waits_at_least"] == 3000
    assert found[0].evidence[0].line == 11


@pytest.mark.parametrize("lines", [CAFFE_FIRST_WAIT, CAFFE_ONE_WAIT_THEN_RESULT], ids=["first_test", "one_wait_then_result"])
def test_one_caffe_queue_wait_is_the_nets_start(tmp_path, lines):
    assert "dataloader-bottleneck" not in {f.id for f in analyze_console(tmp_path, lines)[0]}

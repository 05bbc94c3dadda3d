"""Final errors whose message proves the cause: a Caffe net refusing saved weights of another shape, a DIGITS task
killed by SIGKILL, Horovod's NCCL call answered by an NCCL 1.x library, Open MPI's runtime aborting, PyTorch's desync
report and accelerate's debug-mode shape check, an extension built against another torch, a Triton kernel written for
another Triton; and the near misses that stay with another playbook."""

from __future__ import annotations

from tests.test_library_final_errors import _problems, _top


def test_caffe_snapshot_of_another_class_count_is_checkpoint_model_mismatch(tmp_path):
    # weiliu89/caffe#343: the restore of a solverstate whose .caffemodel was made for 21 classes, not 2.
    text = ("F1215 13:01:28.729923 26988 net.cpp:774] Cannot copy param 0 weights from layer 'conv4_3_norm_mbox_conf'; "
            "shape mismatch.  Source param shape is 63 512 3 3 (290304); target param shape is 6 512 3 3 (27648). To learn "
            "this layer's parameters from scratch rather than copying from a saved net, rename the layer.\n"
            "*** Check failure stack trace: ***\n"
            "    @     0x7f5ad0bf8e27  caffe::Net<>::CopyTrainedLayersFrom()\n"
            "    @     0x7f5ad0db8ace  caffe::SGDSolver<>::RestoreSolverStateFromBinaryProto()\n"
            "Aborted (core dumped)\n")
    assert _top(tmp_path, text) == ("checkpoint-failure", "model_mismatch")


def test_digits_sigkill_above_the_log_tail_is_host_memory(tmp_path):
    # NVIDIA/DIGITS#1509: the job page prints the error above the caffe log's tail; the tail is older than the error.
    text = ("ERROR: error code -9\n"
            "\n"
            "I0314 22:54:40.302898  3497 caffe.cpp:248] Starting Optimization\n"
            "I0314 22:54:40.302913  3497 solver.cpp:274] Learning Rate Policy: step\n"
            "I0314 22:54:40.422722  3497 solver.cpp:331] Iteration 0, Testing net (#0)\n"
            "I0314 22:54:41.517745  3497 solver.cpp:398]     Test net output #0: accuracy = 0.625\n")
    found = _problems(tmp_path, text)
    assert found[0].id == "host-memory-exhaustion"
    assert "SIGKILL" in found[0].summary


def test_digits_segfault_exit_code_is_not_a_kill(tmp_path):
    # NVIDIA/DIGITS#2054: -11 is SIGSEGV, not the OOM killer's signal.
    text = ("2018-05-19 17:34:02 [20180519-173401-20b7] [INFO ] Train Caffe Model task started.\n"
            "2018-05-19 17:34:03 [20180519-173401-20b7] [ERROR] Train Caffe Model task failed with error code -11\n")
    assert "host-memory-exhaustion" not in [f.id for f in _problems(tmp_path, text)]


def test_horovod_invalid_data_type_is_an_nccl_version_mismatch(tmp_path):
    # horovod/horovod#907 under mpirun's tag: two root errors of the same allreduce.
    text = ("[1,0]<stderr>:tensorflow.python.framework.errors_impl.UnknownError: 2 root error(s) found.\n"
            "[1,0]<stderr>:  (0) Unknown:  ncclAllReduce failed: invalid data type\n"
            "[1,0]<stderr>:  (1) Unknown:  ncclAllReduce failed: invalid data type\n")
    assert _top(tmp_path, text) == ("driver-runtime-mismatch", "nccl_mismatch")


def test_paddle_nccl_error_with_errno_detail_stays_an_nccl_error(tmp_path):
    # PaddlePaddle/RocketQA#29: Paddle's own errno detail and shared-memory advice, at communicator creation.
    text = ("terminate called after throwing an instance of 'paddle::platform::EnforceNotMet'\n"
            "  what():  (External)  Nccl error, unhandled cuda error, detail: Resource temporarily unavailable\n"
            "Please try one of the following solutions:\n"
            "1. export NCCL_SHM_DISABLE=1;\n"
            "2. export NCCL_P2P_LEVEL=SYS;\n"
            "3. Increase shared memory by setting the -shm-size option when starting docker container, e.g., setting  -shm-size=2g.\n"
            "  (at /paddle/paddle/fluid/platform/nccl_helper.h:72)\n")
    found = [f.id for f in _problems(tmp_path, text)]
    assert found[0] == "nccl-timeout"
    assert "driver-runtime-mismatch" not in found


def test_orte_abort_is_a_failure_not_a_clean_run(tmp_path):
    # horovod/horovod#368, server 1: ORTE_ERROR_LOG then the FORCE-TERMINATE help text, nothing after.
    text = ("[CPSG-AI-GPU-2:46613] [[17593,0],1] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file "
            "grpcomm_direct.c at line 355\n"
            "--------------------------------------------------------------------------\n"
            "An internal error has occurred in ORTE:\n"
            "\n"
            "[[17593,0],1] FORCE-TERMINATE AT Data unpack would read past end of buffer:-26 - error grpcomm_direct.c(359)\n"
            "\n"
            "This is something that should be reported to the developers.\n"
            "--------------------------------------------------------------------------\n")
    found = _problems(tmp_path, text)
    assert found[0].id == "unclassified-failure"
    assert "FORCE-TERMINATE" in found[0].summary or "ORTE_ERROR_LOG" in found[0].summary


def test_desync_report_of_a_rank_that_never_joined_is_a_collective_mismatch(tmp_path):
    # stas00/ml-engineering debug/pytorch.md: rank 0 issues one extra all_reduce.
    text = ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=4, "
            "NumelOut=4, Timeout(ms)=8000) ran for 8097 milliseconds before timing out.\n"
            " - [0] Timeout at collective: ALLREDUCE, #3\n"
            " - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
            "     [1] finished collective #2, but didn't join collective #3 (count from 1)\n")
    found = [f.id for f in _problems(tmp_path, text)]
    assert found[0] == "collective-mismatch"


def test_desync_report_after_a_crash_of_the_lagging_rank_is_not_a_mismatch(tmp_path):
    # NVIDIA/nccl#2213: rank 1 crashed with SIGSEGV inside NCCL, so it never joined; rank 0's watchdog fired later.
    text = ("*** SIGSEGV received at time=1775734074 on cpu 19 ***\n"
            "PC: @     0xe1e2567f5014  (unknown)  ncclLocalOpAppend()\n"
            "\n"
            "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1155874, OpType=ALLREDUCE, "
            "NumelIn=9445376, NumelOut=9445376, Timeout(ms)=1800000) ran for 1800002 milliseconds before timing out.\n"
            "\n"
            "[1] finished collective #1155873, but didn't join collective #1155874\n")
    found = [f.id for f in _problems(tmp_path, text)]
    assert found, "a crash and a timeout: not a clean run"
    assert "collective-mismatch" not in found


def test_desync_report_of_a_rank_stuck_inside_stays_a_timeout(tmp_path):
    # TraceUtils.h's other form: the rank joined the collective and never finished it (stuck inside, not skipped).
    text = ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41207, OpType=ALLREDUCE, NumelIn=1024, "
            "NumelOut=1024, Timeout(ms)=600000) ran for 600090 milliseconds before timing out.\n"
            " - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
            "   - [47] joined but didn't finish collective #41207 (count from 1)\n")
    found = [f.id for f in _problems(tmp_path, text)]
    assert found[0] == "nccl-timeout"
    assert "collective-mismatch" not in found


def test_accelerate_gather_shape_check_is_a_collective_mismatch(tmp_path):
    # huggingface/trl#2882: ORPO's gather of logits padded to other lengths on each rank, under [rankN]: prefixes.
    text = ('[rank0]:   File "/usr/local/lib/python3.10/dist-packages/accelerate/utils/operations.py", line 389, in wrapper\n'
            "[rank0]:     raise DistributedOperationException(\n"
            "[rank0]: accelerate.utils.operations.DistributedOperationException: Cannot apply desired operation due to shape "
            "mismatches. All shapes across devices must be valid.\n"
            "[rank0]: Operation: `accelerate.utils.operations.gather`\n"
            "[rank0]: Input shapes:\n"
            "[rank0]:   - Process 0: [2, 350, 32256]\n"
            "[rank0]:   - Process 1: [2, 658, 32256]\n")
    assert _top(tmp_path, text)[0] == "collective-mismatch"


def test_extension_built_against_another_torch_is_a_build_mismatch(tmp_path):
    # rusty1s/pytorch_sparse#188: an OSError from torch.ops.load_library on a c10:: symbol.
    text = ("OSError: /home/mila/c/chen.sun/gflownet/gfn/lib/python3.7/site-packages/torch_sparse/_version.so: undefined "
            "symbol: _ZN3c106detail12infer_schema20make_function_schemaENS_8ArrayRefINS1_11ArgumentDefEEES4_\n")
    assert _top(tmp_path, text) == ("driver-runtime-mismatch", "extension_build_mismatch")


def test_undefined_symbol_of_another_library_is_not_a_torch_build_mismatch(tmp_path):
    # pytorch/pytorch#2172: a THNN symbol of a stale torch build (the build folder kept), no torch C++ namespace.
    text = ("    from torch._C import *\n"
            "ImportError: /usr/local/lib/python2.7/dist-packages/torch/lib/libATen.so.1: undefined symbol: "
            "THNN_CudaDoubleSpatialClassNLLCriterion_updateGradInput\n")
    assert "driver-runtime-mismatch" not in [f.id for f in _problems(tmp_path, text)]


def test_bundled_triton_kernel_that_does_not_compile_is_a_build_mismatch(tmp_path):
    # Dao-AILab/flash-attention#508: flash-attn 1.x's Triton kernel under Triton 2.0 (`trans_b` was removed).
    text = ('  File "/usr/local/lib/python3.8/dist-packages/triton/compiler.py", line 942, in build_triton_ir\n'
            "    raise CompilationError(fn.src, node) from e\n"
            "triton.compiler.CompilationError: at 118:24:\n"
            "def _fwd_kernel(\n"
            "    Q,\n")
    assert _top(tmp_path, text) == ("driver-runtime-mismatch", "extension_build_mismatch")


def test_caffe_image_smaller_than_the_crop_is_input_data(tmp_path):
    # weiliu89/caffe#751: ssd_pascal.py on records smaller than the 300x300 crop.
    text = "F0929 11:31:04.968252  9653 data_transformer.cpp:194] Check failed: height <= datum_height (300 vs. 237)\n"
    assert _top(tmp_path, text) == ("bad-input-data", "transform_mismatch")


def test_caffe_cropped_image_against_a_mean_file_of_another_size_is_input_data(tmp_path):
    # 01org/caffe#44: a 227 crop checked against the 256x256 ImageNet mean file.
    text = ("F0717 21:13:37.515277  8184 data_transformer.cpp:683] Check failed: cv_cropped_image.rows == "
            "data_mean_.height() (227 vs. 256) \n")
    assert _top(tmp_path, text) == ("bad-input-data", "transform_mismatch")


def test_caffe_cuda_check_out_of_memory_is_not_a_transform_mismatch(tmp_path):
    # weiliu89/caffe#203 (the glog CUDA_CHECK form the signature table cites): a device allocation, not the data.
    text = ("F0305 10:12:01.123456  4242 syncedmem.cpp:56] Check failed: error == cudaSuccess (2 vs. 0)  out of memory\n"
            "*** Check failure stack trace: ***\n")
    assert "bad-input-data" not in [f.id for f in _problems(tmp_path, text)]

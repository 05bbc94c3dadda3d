"""Final errors of MXNet, Theano, DyNet, Caffe, Jittor, PaddlePaddle and CNTK in their own words: which playbook
ranks first, its first cause, and the near misses that stay with another playbook or unclassified."""

from __future__ import annotations

from tests.test_library_final_errors import _problems, _top


def test_mxnet_pooled_storage_cudamalloc_failure_is_cuda_oom(tmp_path):
    # msracver/Flow-Guided-Feature-Aggregation#16: dmlc's logging line, then the `[bt]` stack.
    text = ("[19:45:05] /home/travis/build/dmlc/mxnet-distro/mxnet-build/dmlc-core/include/dmlc/logging.h:308: [19:45:05] "
            "src/storage/./pooled_storage_manager.h:107: cudaMalloc failed: out of memory\n"
            "\n"
            "Stack trace returned 10 entries:\n"
            "[bt] (0) /home/smiles/anaconda2/lib/python2.7/site-packages/mxnet/libmxnet.so(+0x28965c) [0x7fef5294865c]\n")
    assert _top(tmp_path, text)[0] == "cuda-oom"


def test_theano_device_memory_error_is_cuda_oom_not_host_memory(tmp_path):
    # Theano/Theano#3748: Python's MemoryError class, the device's memory in its words and the driver's figures.
    text = ("Error allocating 71323200 bytes of device memory (out of memory). Driver report 10526720 bytes free and "
            "4294770688 bytes total \n"
            "Traceback (most recent call last):\n"
            '  File "train.py", line 12, in <module>\n'
            "    loss = train_fn(x, y)\n"
            "MemoryError: Error allocating 71323200 bytes of device memory (out of memory).\n")
    found = [f.id for f in _problems(tmp_path, text)]
    assert found[0] == "cuda-oom"
    assert "host-memory-exhaustion" not in found


def test_mshadow_cublas_handle_status_1_is_read_as_memory(tmp_path):
    # apache/mxnet#5198 / awslabs/sockeye#897: cublasCreate's status 1 (NOT_INITIALIZED) as a number only.
    text = ("terminate called after throwing an instance of 'dmlc::Error'\n"
            "  what():  [10:39:57] /home/travis/build/dmlc/mxnet-distro/mxnet-build/3rdparty/mshadow/mshadow/./stream_gpu-inl.h:115: "
            "Check failed: err == CUBLAS_STATUS_SUCCESS (1 vs. 0) : Create cublas handle failed\n")
    found = _problems(tmp_path, text)
    assert found[0].id == "cuda-oom"
    assert "could not create its handle" in found[0].summary


def test_mshadow_cublas_handle_without_a_status_is_not_read_as_memory(tmp_path):
    # apache/mxnet#1137: the 2016 check names no status (the script exited before MXNet finished initialising).
    text = ("./dmlc-core/include/dmlc/logging.h:208: [17:19:40] ./mshadow/mshadow/./stream_gpu-inl.h:98: Check failed: "
            "(err) == (CUBLAS_STATUS_SUCCESS) Create cublas handle failed\n"
            "terminate called after throwing an instance of 'dmlc::Error'\n")
    assert "cuda-oom" not in [f.id for f in _problems(tmp_path, text)]


def test_dynet_lookup_one_past_its_table_is_bad_input_not_added_tokens(tmp_path):
    # toru34/zhou_acl_2017#2: a 29999-row LookupParameter asked for id 29999; DyNet has no tokenizer library.
    text = ("[dynet] random seed: 42\n"
            "Traceback (most recent call last):\n"
            '  File "_dynet.pyx", line 1614, in _dynet.Expression.value\n'
            "ValueError: Out-of-bounds attempt to access index 29999 for LookupParameter of size 29999\n")
    found = [f.id for f in _problems(tmp_path, text)]
    assert found[0] == "bad-input-data"
    assert "tokenizer-mismatch" not in found


def test_dynet_pool_exhausted_is_cuda_oom(tmp_path):
    # clab/dynet#292: the C++ API's message, then abort.
    text = ("dynet is out of memory, try increasing with --dynet-mem (current capacity: 178257920)\n"
            "Aborted\n")
    assert _top(tmp_path, text)[0] == "cuda-oom"


def test_caffe_curand_launch_failure_is_an_environment_mismatch(tmp_path):
    # NVIDIA/DIGITS#1264: a Titan X Pascal with the CUDA of its older card.
    text = ("I1112 06:23:06.288074  5120 solver.cpp:429]     Test net output #1: loss = 3.04448 (* 1 = 3.04448 loss)\n"
            "F1112 06:23:06.447123  5120 math_functions.cu:396] Check failed: status == CURAND_STATUS_SUCCESS (201 vs. 0)  "
            "CURAND_STATUS_LAUNCH_FAILURE\n"
            "*** Check failure stack trace: ***\n")
    assert _top(tmp_path, text) == ("driver-runtime-mismatch", "wrong_arch")


def test_curand_launch_failure_after_an_illegal_access_is_not_an_environment_mismatch(tmp_path):
    # Every launch after a kernel fault fails: the fault, not the toolkit, comes first.
    text = ("RuntimeError: CUDA error: an illegal memory access was encountered\n"
            "F1112 06:23:06.447123  5120 math_functions.cu:396] Check failed: status == CURAND_STATUS_SUCCESS (201 vs. 0)  "
            "CURAND_STATUS_LAUNCH_FAILURE\n")
    assert "driver-runtime-mismatch" not in [f.id for f in _problems(tmp_path, text)]


def test_caffe_proto_write_after_a_snapshot_announcement_is_checkpoint_failure(tmp_path):
    # martinkersner/train-CRF-RNN#53: the snapshot folder did not exist.
    text = ("I0521 18:36:08.992463 18350 solver.cpp:571] Iteration 950, lr = 1e-13\n"
            "I0521 18:36:09.160795 18350 solver.cpp:449] Snapshotting to binary proto file models/train_iter_1000.caffemodel\n"
            "F0521 18:36:09.160861 18350 io.cpp:67] Check failed: proto.SerializeToOstream(&output) \n"
            "*** Check failure stack trace: ***\n")
    assert _top(tmp_path, text) == ("checkpoint-failure", "not_writable")


def test_caffe_proto_write_of_a_mean_file_is_not_a_checkpoint(tmp_path):
    # BVLC/caffe#387: compute_image_mean's mean file, no snapshot: the failure stays unclassified.
    text = ("E0504 14:25:36.838109 2025406848 compute_image_mean.cpp:75] Processed 35398 files.\n"
            "F0504 14:25:37.100920 2025406848 io.cpp:69] Check failed: proto.SerializeToOstream(&output) \n"
            "*** Check failure stack trace: ***\n")
    found = [f.id for f in _problems(tmp_path, text)]
    assert "checkpoint-failure" not in found
    assert found[0] == "unclassified-failure"


def test_jittor_no_device_found_is_an_environment_mismatch_with_no_visible_gpu(tmp_path):
    # Jittor/jittor#177: the setter's check wrapped in its `Wrong inputs arguments` RuntimeError.
    text = ("Traceback (most recent call last):\n"
            '  File "train.py", line 10, in main\n'
            "    jt.flags.use_cuda=1\n"
            "RuntimeError: Wrong inputs arguments, Please refer to examples(help(jt.flags)).\n"
            "\n"
            "Failed reason:[f 0201 21:46:46.675946 64 cuda_flags.cc:25] Check failed: count>0  No device found.\n")
    assert _top(tmp_path, text) == ("driver-runtime-mismatch", "no_visible_gpu")


def test_paddle_cudnn_header_library_mismatch_is_a_cudnn_mismatch(tmp_path):
    # PaddlePaddle/Paddle#12965: the maintainer: the wheel's cuDNN differs from the machine's.
    text = ("F0605 01:44:46.962916 26917 hl_cuda_cudnn.cc:171] Check failed: (cudnn_cuh_major < 4 && cudnn_dso_major < 4) || "
            "(cudnn_cuh_major == cudnn_dso_major) [cudnn init] libcudnn v5 with header v7 unmatched!\n"
            "*** Check failure stack trace: ***\n")
    assert _top(tmp_path, text) == ("driver-runtime-mismatch", "cudnn_mismatch")


def test_cntk_nan_training_criterion_is_nan_loss(tmp_path):
    # microsoft/CNTK#399: CPU-only, NaN from the first minibatch.
    text = (" Epoch[ 1 of 10]-Minibatch[   1-  10]: SamplesSeen = 250; TrainLossPerSample =         nan; "
            "EvalErr[0]PerSample = 0.50800000; TotalTime = 0.0769s; SamplesPerSecond = 3251.1\n"
            "EXCEPTION occurred: The training criterion is not a number (NAN).\n")
    assert _top(tmp_path, text)[0] == "nan-loss"

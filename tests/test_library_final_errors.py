"""Final errors in the words of less common libraries (TensorFlow's wrapped OOM, PIL, flash-attn, bitsandbytes,
sentencepiece, load_state_dict's detail lines) and mp.spawn's own-exit report: which playbook ranks first, its first
cause, and what stays quiet."""

from __future__ import annotations

import json

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import analyze
from tests.helpers import ingest_text, log_events


def _problems(tmp_path, text: str) -> list:
    a = analyze(Context(ingest_text(tmp_path, text)))
    return [f for f in a.findings if f.severity > Severity.INFO]


def _top(tmp_path, text: str) -> tuple[str, str]:
    found = _problems(tmp_path, text)
    assert found, "no finding"
    return found[0].id, found[0].causes[0].cause.id


def test_tensorflow_oom_wrapped_after_shape_is_joined_and_read_as_device_oom(tmp_path):
    # tensorflow/nmt#303: the reporter's wrapping put the shape and the device on the next line.
    text = ("ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape\n"
            "[6272,30000] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator \n"
            "GPU_0_bfc [[Node: dynamic_seq2seq/decoder/output_projection/Tensordot/MatMul = MatMul\n")
    ev = log_events(tmp_path / "ev", text)
    oom = ev.filter(ev["code"] == "cuda_oom").row(0, named=True)
    assert (oom["line"], oom["end_line"]) == (1, 2)
    assert json.loads(oom["fields"])["shape"] == "6272,30000"
    assert _top(tmp_path / "a", text)[0] == "cuda-oom"


def test_tensorflow_oom_wrapped_on_the_host_allocator_is_not_a_device_oom(tmp_path):
    # The same wrapping of a CPU allocation (TensorFlow's `cpu` allocator): host memory, which cuda-oom leaves alone.
    text = ("ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape\n"
            "[100,4096,32] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu\n")
    assert "cuda-oom" not in [f.id for f in _problems(tmp_path, text)]


def test_pil_truncated_image_in_a_dataloader_worker_is_bad_input_data(tmp_path):
    # Media-Smart/vedastr#72: the worker's traceback re-raised by the DataLoader.
    text = ("Original Traceback (most recent call last):\n"
            '  File "/root/anaconda3/envs/test/lib/python3.7/site-packages/torch/utils/data/_utils/worker.py", line 202, in _worker_loop\n'
            "    data = fetcher.fetch(index)\n"
            '  File "tools/../vedastr/datasets/lmdb_dataset.py", line 73, in read_data\n'
            "    img = Image.open(buf).convert('RGB')  # for color image\n"
            '  File "/root/anaconda3/envs/test/lib/python3.7/site-packages/PIL/ImageFile.py", line 249, in load\n'
            '    "(%d bytes not processed)" % len(b)\n'
            "OSError: image file is truncated (43 bytes not processed)\n")
    assert _top(tmp_path, text) == ("bad-input-data", "corrupt_samples")


def test_pil_unidentified_image_after_training_progress_is_bad_input_data(tmp_path):
    # lucidrains/lightweight-gan#109: an image of the cats-and-dogs set that is no image, after some progress.
    text = ("G: 2.58 | D: 1.06 | GP: 0.00 | PL: 0.73\n"
            "PIL.UnidentifiedImageError: cannot identify image file '...\\\\Cat\\\\666.jpg'\n")
    assert _top(tmp_path, text) == ("bad-input-data", "corrupt_samples")


def test_flash_attention_on_a_pre_ampere_gpu_is_an_architecture_mismatch(tmp_path):
    # modelscope/ms-swift#1603 / Dao-AILab/flash-attention#762 (a Turing card): the exception line alone.
    assert _top(tmp_path, "RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n") == ("driver-runtime-mismatch", "wrong_arch")


def test_bitsandbytes_cuda_setup_failure_is_a_missing_cuda_library(tmp_path):
    # bitsandbytes-foundation/bitsandbytes#492: rich's traceback, the message wrapped at the terminal width.
    text = ("RuntimeError: \n"
            "        CUDA Setup failed despite GPU being available. Please run the following \n"
            "command to get more information:\n\n        python -m bitsandbytes\n")
    assert _top(tmp_path, text) == ("driver-runtime-mismatch", "cuda_library_not_found")


def test_bitsandbytes_setup_that_found_its_runtime_is_quiet(tmp_path):
    # bitsandbytes-foundation/bitsandbytes#487: the CUDA SETUP lines of a set-up that found libcudart.
    text = ("CUDA SETUP: CUDA runtime path found: /usr/local/cuda-11.8/lib64/libcudart.so.11.0\n"
            "CUDA SETUP: Highest compute capability among GPUs detected: 8.0\n"
            "CUDA SETUP: Detected CUDA version 118\n")
    assert _problems(tmp_path, text) == []


def test_sentencepiece_parse_failure_is_a_model_file_that_is_no_model(tmp_path):
    # InternLM/lmdeploy#122: AutoTokenizer.from_pretrained on a folder whose tokenizer.model is not a model.
    text = ("Traceback (most recent call last):\n"
            '  File "/mnt/lmdeploy/lmdeploy/pytorch/chat.py", line 62, in init_model\n'
            "    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path,\n"
            '  File "/mnt/miniconda/envs/lmdeploy/lib/python3.10/site-packages/sentencepiece/__init__.py", line 310, in LoadFromFile\n'
            "    return _sentencepiece.SentencePieceProcessor_LoadFromFile(self, arg)\n"
            "RuntimeError: Internal: src/sentencepiece_processor.cc(1101) [model_proto->ParseFromArray(serialized.data(), serialized.size())]\n")
    assert _top(tmp_path, text) == ("checkpoint-failure", "not_a_model_file")


def test_size_mismatch_lines_without_their_header_are_a_model_mismatch(tmp_path):
    # FoundationVision/VAR#136: the tail of a long list of mismatched blocks (a config of another depth/width).
    text = "".join(f"\tsize mismatch for blocks.2.ffn.{name}: copying a param with shape torch.Size([{a}]) from checkpoint, "
                   f"the shape in current model is torch.Size([{b}]).\n"
                   for name, a, b in (("fc1.weight", "7680, 1920", "4096, 1024"), ("fc1.bias", "7680", "4096"),
                                      ("fc2.weight", "1920, 7680", "1024, 4096")))
    assert _top(tmp_path, text) == ("checkpoint-failure", "model_mismatch")


def test_header_and_detail_lines_make_one_finding_from_the_header(tmp_path):
    # ali-vilab/AnyDoor#51: the header stands for its list; the detail lines add no evidence of their own.
    text = ("RuntimeError: Error(s) in loading state_dict for DinoVisionTransformer:\n"
            "        size mismatch for blocks.5.norm2.weight: copying a param with shape torch.Size([384]) from checkpoint, the shape in current model is torch.Size([1536]).\n"
            "        size mismatch for blocks.5.norm2.bias: copying a param with shape torch.Size([384]) from checkpoint, the shape in current model is torch.Size([1536]).\n")
    found = _problems(tmp_path, text)
    assert found[0].id == "checkpoint-failure"
    assert [e.line for e in found[0].evidence] == [1]


def test_an_embedding_row_count_alone_is_not_read_as_a_generic_mismatch(tmp_path):
    # The tokenizer-mismatch shape (a vocabulary grown by one token): not a checkpoint of another architecture.
    text = ("\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([32000, 4096]) from checkpoint, "
            "the shape in current model is torch.Size([32001, 4096]).\n")
    ev = log_events(tmp_path / "ev", text)
    assert ev["code"].to_list() == ["embedding_size_mismatch"]


SPAWN = ('Traceback (most recent call last):\n  File "finetune_speaker_v2.py", line 55, in main\n'
         "    mp.spawn(run, nprocs=n_gpus, args=(n_gpus, hps,))\n"
         '  File "/home/.conda/envs/vits/lib/python3.8/site-packages/torch/multiprocessing/spawn.py", line 149, in join\n'
         "    raise ProcessExitedException(\n")


def test_spawn_child_own_exit_status_alone_is_low(tmp_path):
    # Plachtaa/VITS-fast-fine-tuning#284, z-x-yang/CFBI#37: the script's exit() after the last epoch; no child raised.
    found = _problems(tmp_path, SPAWN + "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 1\n")
    assert [(f.id, f.severity) for f in found] == [("unclassified-failure", Severity.LOW)]


def test_spawn_child_windows_crash_status_stays_high(tmp_path):
    # Plachtaa/VITS-fast-fine-tuning#221: 3221225477 is 0xC0000005, an access violation in the child.
    found = _problems(tmp_path, SPAWN + "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 3221225477\n")
    assert found and found[0].severity > Severity.LOW


def test_spawn_exit_after_a_child_error_stays_high(tmp_path):
    # A child that printed its own error before exiting with status 1: that error is a failure sign of its own.
    text = ("RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.\n"
            + SPAWN + "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with exit code 1\n")
    found = _problems(tmp_path, text)
    assert found and all(f.severity > Severity.LOW for f in found[:1])


def test_undecodable_image_a_loader_skipped_while_training_went_on_is_quiet(tmp_path):
    # A skip-bad-samples wrapper printing the caught exception's line and training on (yhenon/pytorch-retinanet's
    # progress format, as in its #93).
    text = ("Epoch: 0 | Iteration: 46941 | Classification loss: 0.39337 | Regression loss: 0.51541 | Running loss: 0.83944\n"
            "OSError: image file is truncated (4 bytes not processed)\n"
            "Epoch: 0 | Iteration: 46942 | Classification loss: 0.26286 | Regression loss: 0.14560 | Running loss: 0.83871\n"
            "Epoch: 0 | Iteration: 46943 | Classification loss: 0.30210 | Regression loss: 0.20114 | Running loss: 0.83850\n")
    assert "bad-input-data" not in [f.id for f in _problems(tmp_path, text)]

"""Signatures the crash playbooks need beyond formats.md §2: vocabulary size mismatch, stuck-process dumps."""

from __future__ import annotations

import json

from tests.helpers import frame, ingest_text


def _events(tmp_path, text):
    return frame(ingest_text(tmp_path, text), "events")


def test_embedding_size_mismatch_fields(tmp_path):
    text = ("RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:\n"
            "\tsize mismatch for model.embed_tokens.weight: copying a param with shape torch.Size([32001, 4096]) from "
            "checkpoint, the shape in current model is torch.Size([32000, 4096]).\n")
    ev = _events(tmp_path, text).filter(code="embedding_size_mismatch")
    assert ev.height == 1 and ev["line"][0] == 2
    f = json.loads(ev["fields"][0])
    assert f["param"] == "model.embed_tokens.weight" and f["ckpt_rows"] == "32001" and f["model_rows"] == "32000"


def test_a_non_embedding_size_mismatch_is_not_a_vocabulary_mismatch(tmp_path):
    text = ("\tsize mismatch for fc.weight: copying a param with shape torch.Size([10, 512]) from checkpoint, "
            "the shape in current model is torch.Size([1000, 512]).\n")
    assert _events(tmp_path, text).filter(code="embedding_size_mismatch").height == 0


def test_faulthandler_and_py_spy_dumps(tmp_path):
    text = ("Timeout (0:10:00)!\n"
            "Thread 0x00007f3a5c9ff700 (most recent call first):\n"
            '  File "/usr/lib/python3.10/threading.py", line 320 in wait\n'
            'Thread 2893 (idle): "MainThread"\n'
            "    wait (threading.py:320)\n"
            "A Timeout (seconds) setting of 30 was used\n")
    ev = _events(tmp_path, text)
    fh = ev.filter(code="faulthandler_timeout")
    assert fh["line"].to_list() == [1] and json.loads(fh["fields"][0])["after"] == "0:10:00"
    spy = ev.filter(code="py_spy_dump")
    assert spy["line"].to_list() == [4] and json.loads(spy["fields"][0]) == {"tid": "2893", "state": "idle", "thread": "MainThread"}

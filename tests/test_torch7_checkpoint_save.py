"""torch7 (Lua) torch.save failures through TH's THDiskFile read as checkpoint-failure; its read errors do not."""

from __future__ import annotations

from tests.helpers import analyze_console

# OpenNMT/OpenNMT#488 (Lua OpenNMT): the checkpoint write stops short of what it had to write.
OPENNMT = [
    "[01/09/18 19:44:38 INFO] Epoch 2 ; Iteration 184/184 ; Optim SGD LR 1.000000 ; Source tokens/s 6556 ; Perplexity 1580.66\t",
    "[01/09/18 19:44:42 INFO] Validation perplexity: 1802.82\t",
    "[01/09/18 19:44:42 INFO] Saving checkpoint to 'model_epoch2_1802.82.t7'...\t",
    "/home/jinyuliu/torch/install/bin/luajit: /home/jinyuliu/torch/install/share/lua/5.1/torch/File.lua:210: write error: "
    "wrote 17092637 blocks instead of 41613820 at /home/jinyuliu/torch/pkg/torch/lib/TH/THDiskFile.c:356",
    "stack traceback:",
    "\t[C]: in function 'write'",
    "\t/home/jinyuliu/torch/install/share/lua/5.1/torch/File.lua:210: in function 'writeObject'",
]


def test_a_short_torch7_write_is_a_failed_save_on_a_full_disk(tmp_path):
    found, _ = analyze_console(tmp_path, OPENNMT)
    top = found[0]
    assert top.id == "checkpoint-failure"
    assert top.evidence[0].line == 4
    assert "save" in top.summary
    assert top.causes[0].cause.id == "disk_full"


def test_a_torch7_read_error_is_not_a_failed_save(tmp_path):
    # karpathy/neuraltalk2#16: a folder passed where the model file was expected; a load, not a checkpoint save.
    lines = [
        "/home/ubuntu/torch-distro/install/bin/luajit: ...ubuntu/torch-distro/install/share/lua/5.1/torch/File.lua:194: "
        "read error: read 0 blocks instead of 1 at /home/ubuntu/torch-distro/pkg/torch/lib/TH/THDiskFile.c:302",
        "stack traceback:",
        "\t[C]: in function 'readInt'",
    ]
    found, events = analyze_console(tmp_path, lines)
    assert events.filter(events["code"] == "checkpoint_write_failed").height == 0
    assert all(f.id != "checkpoint-failure" for f in found)

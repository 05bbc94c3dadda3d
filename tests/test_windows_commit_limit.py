"""host-memory-exhaustion on Windows' commit limit (WinError / os error 1455, `The paging file is too small`), end to end
on real tracebacks, and the loader's other DLL failures (a missing module) that are not memory."""

from __future__ import annotations

from pathlib import Path

from forensics.contracts.context import Context
from forensics.contracts.model import Severity
from forensics.engine import Analysis, analyze
from forensics.ingest import ingest
from tests.helpers import write_run

# zbf1991/WeCLIP#5: a spawned DataLoader worker imports the training script again and torch's DLL loader fails.
SPAWNED_WORKER = r"""Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "D:\Anaconda3\envs\wssam\lib\multiprocessing\spawn.py", line 116, in spawn_main
    exitcode = _main(fd, parent_sentinel)
  File "D:\Anaconda3\envs\wssam\lib\multiprocessing\spawn.py", line 125, in _main
    prepare(preparation_data)
  File "D:\Anaconda3\envs\wssam\lib\multiprocessing\spawn.py", line 236, in prepare
    _fixup_main_from_path(data['init_main_from_path'])
  File "D:\Anaconda3\envs\wssam\lib\multiprocessing\spawn.py", line 287, in _fixup_main_from_path
    main_content = runpy.run_path(main_path,
  File "D:\Anaconda3\envs\wssam\lib\runpy.py", line 265, in run_path
    return _run_module_code(code, init_globals, run_name,
  File "D:\Anaconda3\envs\wssam\lib\runpy.py", line 97, in _run_module_code
    _run_code(code, mod_globals, init_globals,
  File "D:\Anaconda3\envs\wssam\lib\runpy.py", line 87, in _run_code
    exec(code, run_globals)
  File "D:\PycharmProject\WeCLIP\scripts\dist_clip_voc.py", line 10, in <module>
    import torch
  File "D:\Anaconda3\envs\wssam\lib\site-packages\torch\__init__.py", line 124, in <module>
    raise err
OSError: [WinError 1455] 页面文件太小，无法完成操作。 Error loading "D:\Anaconda3\envs\wssam\lib\site-packages\torch\lib\cudnn_cnn_infer64_8.dll" or one of its dependencies.
"""

# Comfy-Org/ComfyUI#7550: safetensors (Rust) mapping a checkpoint; its io::Error prints `(os error 1455)`.
SAFETENSORS_MAP = r"""  File "C:\Users\jijoj\AppData\Local\Programs\@comfyorgcomfyui-electron\resources\ComfyUI\comfy\utils.py", line 68, in load_torch_file
    raise e
  File "C:\Users\jijoj\AppData\Local\Programs\@comfyorgcomfyui-electron\resources\ComfyUI\comfy\utils.py", line 55, in load_torch_file
    with safetensors.safe_open(ckpt, framework="pt", device=device.type) as f:
         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
OSError: The paging file is too small for this operation to complete. (os error 1455)
"""

# chn-lee-yumi/MaterialSearch#105: the same loader's WinError 126, a missing dependency (reinstalling torch fixed it).
MISSING_DLL = r"""Traceback (most recent call last):
  File "E:\MaterialSearch_tmp\MaterialSearchWindows\main.py", line 13, in <module>
    from process_assets import match_text_and_image, process_image, process_text
  File "E:\MaterialSearch_tmp\MaterialSearchWindows\process_assets.py", line 9, in <module>
    import torch
  File "E:\MaterialSearch_tmp\MaterialSearchWindows\lib\site-packages\torch\__init__.py", line 148, in <module>
    raise err
OSError: [WinError 126] 找不到指定的模块。 Error loading "E:\MaterialSearch_tmp\MaterialSearchWindows\lib\site-packages\torch\lib\fbgemm.dll" or one of its dependencies.
"""


def problems(tmp_path: Path, text: str) -> list:
    a: Analysis = analyze(Context(ingest(write_run(tmp_path, {"train.log": text}))))
    return [f for f in a.findings if f.severity > Severity.INFO]


def test_spawned_worker_hitting_the_commit_limit_is_host_memory_with_the_paging_file_as_a_cause(tmp_path):
    top = problems(tmp_path, SPAWNED_WORKER)[0]
    assert top.id == "host-memory-exhaustion"
    assert "commit limit" in top.summary
    causes = [c.cause.id for c in top.causes]
    assert causes[:2] == ["too_many_workers", "small_pagefile"]
    paging = next(c for c in top.causes if c.cause.id == "small_pagefile")
    assert [(e.file, e.line) for e in paging.evidence] == [("train.log", 21)]


def test_rust_os_error_1455_under_a_checkpoint_load_is_memory_not_a_checkpoint_failure(tmp_path):
    found = problems(tmp_path, SAFETENSORS_MAP)
    assert found[0].id == "host-memory-exhaustion"
    assert {(e.file, e.line) for e in found[0].evidence} == {("train.log", 6)}


def test_missing_dll_is_not_memory(tmp_path):
    found = problems(tmp_path, MISSING_DLL)
    assert found and "host-memory-exhaustion" not in {f.id for f in found}

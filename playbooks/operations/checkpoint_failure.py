"""checkpoint-failure: saving or loading a checkpoint failed (permissions, disk full, truncated archive)."""

from __future__ import annotations

import polars as pl
from forensics.playbooks.base import Playbook, declare
from forensics.playbooks.evidence import combine, detection, events, first_message, where, within
from forensics.playbooks.fields import field

from forensics.contracts.context import Context
from forensics.contracts.model import Cause, Detection, Severity

# Specific to checkpoints whatever the context.
CORRUPT_CODES = ("checkpoint_corrupt",)
# torch.load's safe unpickler refused an object of the checkpoint (weights_only=True, the default since 2.6).
WEIGHTS_ONLY_CODES = ("checkpoint_weights_only",)
# `Error(s) in loading state_dict for X:` with its first mismatch (size mismatch / missing / unexpected key), or its
# `size mismatch for …` lines pasted without it (parsers/followups.py drops those under a header).
MISMATCH_CODES = ("state_dict_mismatch",)
# Optimizer.load_state_dict's check of the saved param_groups (form `optimizer`): the optimizer state, not the weights.
OPTIMIZER_FORM = "optimizer"
# sentencepiece could not parse the tokenizer model: the file is no model (a Git LFS pointer, a partial download).
NOT_A_MODEL = "sentencepiece"
SAVE_CODES = ("checkpoint_write_failed", "checkpoint_permission_denied")
# Caffe's WriteProtoToBinaryFile check writes any protobuf (a mean file too): a checkpoint's only when the solver's
# snapshot announcement (`checkpoint_saving`) stands within this many lines before it in the same file.
PROTO_FORM = "caffe_proto"
SNAPSHOT_LINES = 3
# Generic OS errors: they count only inside a save/load context (traceback or path).
OS_CODES = ("permission_denied", "no_space_left")
# Paths as printed on Linux and Windows (`…\site-packages\torch\serialization.py`).
CONTEXT = r"(?i)torch[/\\]serialization\.py|torch\.save|save_pretrained|save_checkpoint|save_model|_save_checkpoint|checkpoint|safetensors|\.pt['\"]|\.pth['\"]|\.bin['\"]|\.ckpt|state_dict|save_file|load_state_dict"
# The run's output folder (logs and checkpoints) could not be created: a PermissionError raised by a directory creation
# (`os.makedirs` / `mkdir` frames, tensorpack's `mkdir_p`) on a folder named for the run's output, by the denied path
# (`Permission denied: '/home/logs'`, matterport/Mask_RCNN#2054; `'./logs'` from `os.makedirs(cfg.TRAIN.LOG_DIR)`,
# STVIR/pysot#53) or by the variable the frames create it from (`logdir`, `output_dir`, `save_dir`). A dataset
# download folder or a library's cache (`./data/MNIST`, `~/.cache/huggingface`) names no output: not this.
DIR_CREATE = r"\bmkdir|\bmakedirs\b|\bmkdir_p\b"
OUTPUT_PATH = r"(?i)(?:^|[/\\])(?:logs?|log_?dirs?|outputs?|checkpoints?|ckpts?|runs|results|saved?_?models?|snapshots?|work_dirs?|exp(?:eriments?)?)(?:[/\\]|$)"
OUTPUT_VARIABLE = r"(?i)\b(?:log_?dir|output_?dir|save_?dir|checkpoint_?dir|ckpt_?dir|work_?dir|exp_?dir)\b"
# pickle's `EOFError: Ran out of input` (an empty or cut file) is a checkpoint only under torch.load's frames: the
# Windows DataLoader's spawned workers raise the same error in multiprocessing/spawn.py.
EOF_CODES = ("pickle_eof",)
LOAD_CONTEXT = r"torch[/\\]serialization\.py|torch\.load\("

PLAYBOOK = declare(
    Playbook(
        id="checkpoint-failure",
        title="Checkpoint save or load failed",
        category="operations",
        severity=Severity.HIGH,
        tables=("events",),
        explains=("nccl-timeout", "silent-hang"),
        codes=("checkpoint_corrupt", "checkpoint_permission_denied", "checkpoint_saving", "checkpoint_write_failed",
               "embedding_size_mismatch", "no_space_left", "permission_denied", "pickle_eof", "state_dict_mismatch", "checkpoint_weights_only"),
        causes=(
            Cause("not_writable", "The checkpoint folder is missing or not writable (permissions, read-only mount, a folder never created)",
                  verify="touch <output_dir>/probe && rm <output_dir>/probe as the job's user",
                  fix="Create output_dir (os.makedirs(..., exist_ok=True)) on a writable location; check it before training starts", prior=0.35),
            Cause("disk_full", "The disk or quota filled up while writing",
                  verify="df -h <output_dir>; quota -s",
                  fix="Free space, keep fewer checkpoints (save_total_limit), write to larger storage", prior=0.35),
            Cause("interrupted_write", "A checkpoint was truncated (job killed mid-write) and now fails to load",
                  verify="python -c \"import zipfile; zipfile.ZipFile('ckpt.pt').testzip()\"; compare the file size with a good checkpoint",
                  fix="Write to a temporary name and rename atomically; resume from the previous checkpoint", prior=0.3),
            Cause("model_mismatch", "The checkpoint belongs to another model: a different config (sizes, vocabulary, "
                  "number of classes) or key names (a `module.` prefix from DDP, a wrapper's prefix)",
                  verify="Compare the first mismatched key's shapes with the config; print list(sd)[:5] against "
                         "list(model.state_dict())[:5]",
                  fix="Build the model with the checkpoint's config; strip or add the key prefix; "
                      "load_state_dict(strict=False) only for heads you mean to re-initialise", prior=0.3),
            Cause("optimizer_mismatch", "The optimizer state in the checkpoint was saved for another set of trainable parameters "
                  "(layers frozen or unfrozen since, another fine-tuning stage, a model whose code changed): its parameter "
                  "groups do not match the optimizer built now",
                  verify="Compare [len(g['params']) for g in checkpoint['optimizer']['param_groups']] with the same list of "
                         "optimizer.param_groups; check which layers the resumed run trains",
                  fix="Resume with the trainable-parameter setup the checkpoint was saved with, or load only the model weights "
                      "and start the optimizer afresh (a fine-tune, not a resume)", prior=0.2),
            Cause("not_a_model_file", "The file loaded is not the model file it is named after: a Git LFS pointer (the "
                  "repository was cloned without git-lfs) or a partial download",
                  verify="ls -l the file (an LFS pointer is ~130 bytes: `head -c 200 tokenizer.model` shows "
                         "`version https://git-lfs…`); compare its sha256 with the hub's",
                  fix="git lfs install && git lfs pull in the model folder, or download the file again", prior=0.2),
            Cause("weights_only_default", "torch.load now unpickles with weights_only=True (the default since PyTorch 2.6) and the "
                  "checkpoint holds other Python objects (numpy arrays, config classes, an optimizer wrapper)",
                  verify="python -c \"import torch; print(torch.__version__)\"; the error names the refused global",
                  fix="torch.load(path, weights_only=False) for checkpoints you trust, or allow the named class with "
                      "torch.serialization.add_safe_globals([...]); save plain tensors/state_dicts", prior=0.3),
        ),
        verify="df -h; a write test in the checkpoint folder; zipfile test of the checkpoint",
        fix="Check the output folder before training; atomic writes (temp file + rename); keep the previous checkpoint",
        thresholds={},
        doc="""\
## Symptom
Saving or loading a checkpoint failed: `PermissionError: [Errno 13] Permission denied` or
`[Errno 28] No space left on device` inside `torch.save` / `save_pretrained`, `Parent directory …
does not exist` from `torch.save`, torch7's (Lua) `write error: wrote N blocks instead of M at …THDiskFile.c` (a
short write of the `.t7`: the disk filled up), Caffe's `Check failed: proto.SerializeToOstream(&output)` right after
`Snapshotting to binary proto file …` (the snapshot folder missing or not writable), `PytorchStreamReader
failed reading zip archive: failed finding central directory`, safetensors header errors, a
legacy archive cut short (`unexpected EOF, expected N more bytes. The file might be corrupted.`), an
unpickling EOF on load (`EOFError: Ran out of input` under torch.load's frames), `Weights only load failed` (torch.load's safe unpickler, the default since
PyTorch 2.6, refusing an object of the checkpoint), or `Error(s) in loading state_dict for X:` with its first `size mismatch for …`
/ `Missing key(s)` / `Unexpected key(s)` line (the checkpoint is whole but belongs to another model), or those
`size mismatch for …` lines pasted without their header; `Optimizer.load_state_dict` refusing the saved parameter
groups on resume (`loaded state dict contains a parameter group that doesn't match the size of optimizer's group`,
`… has a different number of parameter groups`: the optimizer state belongs to another set of trainable parameters); sentencepiece failing to parse its model
(`[model_proto->ParseFromArray(…)]`: the tokenizer file is a Git LFS pointer or a partial download).

## Why it matters
Hours of training are lost when the save fails at the end, and a truncated checkpoint breaks every resume.

## Evidence
`events`: archive/corruption codes always count; OS errors count only when their traceback or path
shows a save/load (serialization frames, checkpoint paths).

A `PermissionError` raised while creating the run's output folder (`os.makedirs` / `mkdir` frames, the denied path or
the variable it is made from naming logs, outputs or checkpoints: `Permission denied: '/home/logs'`) counts too: the
checkpoints of the run go there, and the run stops before its first save.

## Known false positives
A `Permission denied` writing a log file or a cache is not a checkpoint failure; the context check
filters it out. Nor is a denied folder creation that names no output (a dataset's download folder, a library cache).
""",
    )
)


def _in_checkpoint_context(ctx: Context, ev: pl.DataFrame, context: str = CONTEXT) -> pl.DataFrame:
    """Keep OS errors whose own text, or an enclosing traceback block, mentions a save/load."""
    return within(ctx, ev, context)


@PLAYBOOK.detector(("events",))
def detect(ctx: Context, th: dict) -> Detection | None:
    """Corrupt-archive errors, and permission / disk-full errors in a checkpoint context."""
    corrupt = combine(events(ctx, CORRUPT_CODES), _in_checkpoint_context(ctx, events(ctx, EOF_CODES), LOAD_CONTEXT))
    weights_only = events(ctx, WEIGHTS_ONLY_CODES)
    mismatch = _not_vocabulary(events(ctx, MISMATCH_CODES), ctx.events_of("embedding_size_mismatch"))
    dirs = _output_dir_denied(ctx)
    os_err = combine(_announced(ctx, events(ctx, SAVE_CODES)), _in_checkpoint_context(ctx, events(ctx, OS_CODES)), dirs)
    parts = [p for p in (corrupt, weights_only, mismatch, os_err) if p.height]
    if not parts:
        return None
    ev = combine(*parts)
    text = " ".join(ev.get_column("message").to_list()[:20])
    causes: dict[str, float] = {}
    if "Errno 13" in text or "ermission denied" in text or "Read-only" in text or "does not exist" in text:
        causes["not_writable"] = 1.0
    if "Errno 28" in text or "No space left" in text or "quota" in text.lower():
        causes["disk_full"] = 1.0
    elif "unexpected pos" in text or "file write failed" in text or "blocks instead of" in text:
        # The archive writer stopped short of what it wrote (torch7's THDiskFile: `wrote N blocks instead of M`):
        # the device took fewer bytes (full or failing).
        causes["disk_full"] = 0.8
    not_a_model = corrupt.filter(field("form").fill_null("") == NOT_A_MODEL) if corrupt.height else corrupt
    if corrupt.height > not_a_model.height:
        causes["interrupted_write"] = 0.9
    if not_a_model.height:
        # The parser read a file of the wrong kind, not a cut archive of the right one.
        causes["not_a_model_file"] = 1.0
    if weights_only.height:
        # The archive is whole; the unpickler refused a global it does not allow.
        causes["weights_only_default"] = 1.0
    optimizer = mismatch.filter(field("form").fill_null("") == OPTIMIZER_FORM) if mismatch.height else mismatch
    if optimizer.height:
        # The archive was read whole; the optimizer state in it was built over other parameters.
        causes["optimizer_mismatch"] = 1.0
    if mismatch.height > optimizer.height:
        # The archive was read whole; its tensors do not fit the model built here.
        causes["model_mismatch"] = 1.0
    row = ev.row(0, named=True)
    if os_err.height and os_err.height == dirs.height and ev.height == dirs.height:
        return detection(ev, f"the run's output folder could not be created{where(row)}: {first_message(ev)}", causes, confidence=0.9)
    verb = "load" if (corrupt.height or weights_only.height or mismatch.height) and not os_err.height else "save"
    return detection(ev, f"checkpoint {verb} failed{where(row)}: {first_message(ev)}", causes, confidence=0.9)


def _announced(ctx: Context, saves: pl.DataFrame) -> pl.DataFrame:
    """Save failures, keeping a Caffe proto-write failure only right after a snapshot announcement in the same log."""
    if saves.height == 0:
        return saves
    proto = field("form").fill_null("") == PROTO_FORM
    writes = saves.filter(proto)
    if writes.height == 0:
        return saves
    said = ctx.events_of("checkpoint_saving").select("file", pl.col("line").alias("_s"))
    kept = (writes.join(said, on="file")
            .filter((pl.col("_s") < pl.col("line")) & (pl.col("_s") >= pl.col("line") - SNAPSHOT_LINES))
            .select(writes.columns).unique(subset=["file", "line"]))
    return combine(saves.filter(~proto), kept)


def _output_dir_denied(ctx: Context) -> pl.DataFrame:
    """PermissionErrors of a directory creation whose path, or the frames creating it, name the run's output folder."""
    made = within(ctx, events(ctx, ("permission_denied",)), DIR_CREATE)
    if made.height == 0:
        return made
    named = made.filter(field("path").fill_null("").str.contains(OUTPUT_PATH))
    return combine(named, within(ctx, made, OUTPUT_VARIABLE))


def _not_vocabulary(mismatch: pl.DataFrame, vocab: pl.DataFrame) -> pl.DataFrame:
    """State-dict mismatches other than an embedding's vocabulary size (the tokenizer-mismatch playbook's:
    a checkpoint saved before special tokens were added is the right model with another tokenizer)."""
    if mismatch.height == 0 or vocab.height == 0:
        return mismatch
    # The vocabulary line is the header's detail line, or one of the lines right after it.
    near = (mismatch.with_row_index("_m").join(vocab.select("file", pl.col("line").alias("_v")), on="file")
            .filter((pl.col("_v") >= pl.col("line")) & (pl.col("_v") <= pl.col("end_line") + 1)).get_column("_m"))
    return mismatch.with_row_index("_m").filter(~pl.col("_m").is_in(near.implode())).drop("_m")


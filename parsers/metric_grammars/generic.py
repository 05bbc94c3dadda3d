"""Hand-printed metric lines: JSON objects and `key value` / `key: value` / `key=value` sequences.

JSON (JSON-lines files printed to a log, fairseq `--log-format json`, metaseq, MAE `log.txt`,
LLaMA-Factory `trainer_log.jsonl` lines): flat `"key": value` pairs, values numbers, quoted numbers
(fairseq prints `"loss": "8.206"`), bare `NaN`/`Infinity` (Python's json.dumps) — a line is read only
when it has a loss-like or step key, so config dumps are not metrics.

Key/value (`step 120 loss 2.31 lr 3e-4`, `loss=2.31, grad_norm=0.8`, `Epoch 3 | Step 120 | Loss: 2.31`,
`Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.305400`): a line is read only when (a) one key is a loss or a
gradient norm and (b) the pairs cover the line: what is left after removing them and bracketed progress
holds at most RESIDUE_LETTERS letters. So prose that mentions a loss (`the loss went up to 2.3 after
...`) and URLs give nothing. Time keys convert to ms (`ms`/`s` suffix, bare numbers are seconds unless
the key says `ms`), memory with a unit to MiB.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import (
    MEM_TO_MIB,
    NUM,
    TIME_TO_MS,
    Grammar,
    canonical,
    empty_rows,
    num,
    pairs,
    scale_by_unit,
    shape,
)
from forensics.parsers.metric_names import prose_names

STEP_KEYS = ["step", "steps", "iter", "iteration", "it", "global_step", "num_updates", "current_steps", "_step",
             "train/global_step", "trainer/global_step", "update_step", "total_steps_done",
             # PaddleSlim `Total iter: 10, epoch: 0, batch: 10, loss: [nan]`
             "total_iter"]
# Not measurements: progress and Keras' `ETA: 150s` (a remaining time).
SKIP_KEYS = ["total_steps", "percentage", "max_steps", "num_steps", "eta"]
NAMES = {
    "train_loss": "loss",
    "reduced_train_loss": "loss",  # NeMo
    "training_loss": "loss",
    "train/loss": "loss",
    "train/learning_rate": "lr",
    "train_lr": "lr",  # DeiT / MAE / BEiT `log.txt`
    "train/lr": "lr",
    "train/grad_norm": "grad_norm",
    "train/epoch": "epoch",
    "train_epoch": "epoch",
    "training_epoch": "epoch",
    "val_loss": "eval_loss",
    "valid_loss": "eval_loss",
    "validation_loss": "eval_loss",
    "eval/loss": "eval_loss",
    "val/loss": "eval_loss",
    "test_loss": "test_loss",
    "grad": "grad_norm",
    "throughput": "tokens_per_s",
    "total_tokens": "tokens_seen",
    "vram_allocated": "mem_allocated_mib",
    "vram_reserved": "mem_reserved_mib",
    "cuda_gb_allocated": "mem_allocated_mib",
    "cuda_gb_reserved": "mem_reserved_mib",
    "cuda_gb_free": "mem_free_mib",
    "gb_free": "mem_free_mib",
}
# Keys whose values are GiB (LLaMA-Factory `vram_*`, metaseq `cuda_gb_*`, fairseq `gb_free`).
GIB_KEYS = ["vram_allocated", "vram_reserved", "cuda_gb_allocated", "cuda_gb_reserved", "cuda_gb_free", "gb_free"]
# `step-time`: the TensorFlow seq2seq/NMT tutorials' `global step 6000 learning rate 0.1937 step-time 0.67 perplexity 13.56`.
TIME_KEYS = {"time": "step_time_ms", "dt": "step_time_ms", "step_time": "step_time_ms", "step-time": "step_time_ms", "iter_time": "step_time_ms",
             "batch_time": "step_time_ms", "time/step": "step_time_ms", "time/batch": "step_time_ms", "step_time_ms": "step_time_ms",
             "time_ms": "step_time_ms", "iter_time_ms": "step_time_ms", "data_time": "data_time_ms",
             "data_time_ms": "data_time_ms", "dataload_time": "data_time_ms",
             # NeMo: `train_step_timing in s: 0.03146` (seconds)
             "train_step_timing_in_s": "step_time_ms", "train_step_timing": "step_time_ms",
             # open_clip: `Data (t): 0.080 Batch (t): 1.762s`
             "data_(t)": "data_time_ms", "batch_(t)": "step_time_ms"}
# Word rules for timing names no table lists (`load_data_time`, `train_step_time`, `batch_load_time`): a name
# holding `data`/`load` before `time` is the data loader's wait, one holding `step`/`iter`/`batch` the step's time.
DATA_TIME_WORD = r"(?:data|load)[a-z_]*time(?:_(?:ms|s|secs?))?"
STEP_TIME_WORD = r"(?:step|iter|batch)[a-z_]*time(?:_(?:ms|s|secs?))?"
# The same read the other way round, with the unit in parentheses: flashlight's RnnLm example prints
# `Time per iteration (ms): 13.8` ([OBS] flashlight/flashlight#137).
TIME_PER_WORD = r"time_per_(?:step|iter|iteration|batch)(?:_\((?:ms|s|secs?)\))?"
# A duration printed as a clock (`time delta: 0:00:00.208632`, `33:28.61`): h:mm:ss or mm:ss, fraction optional.
CLOCK = r"\d+:\d{2}(?::\d{2})?(?:\.\d+)?"
# A clock under one of these names is the time of one logged interval (a step time); under any other name
# it is a wall clock or a cumulative one (`Elapsed Time:`, `Tot:`, `time now:`), which is no step time.
INTERVAL_WORD = r"delta|interval|per_(?:step|iter|batch)"
GATE = r"(?:^|_)loss$|^grad_norm$|^ppl$"
QUALIFIED_LOSS = r"_loss_(?:before|after)$"
RESIDUE_LETTERS = 8
# A caption before the pairs, up to the first `: ` (`BMN training loss(epoch 0): tem_loss: 1.184, …`,
# JJBOY/BMN-Boundary-Matching-Network#22; OpenNMT-tf's `Evaluation result for step 435000: loss = … ; perplexity = inf`,
# OpenNMT/OpenNMT-tf#744): it names the line, it is no prose around the values. Only the caption is let off the
# residue count: the rest of the line must still be pairs.
CAPTION = r"^\s*[A-Za-z][^:=]{0,60}?:\s"
# A non-finite value printed by a counter the line prints beside its pairs (Marian's `Cost nan : Time 17.18s : nan words/s`,
# marian-nmt/marian-dev#699): a number that went NaN, not words.
CAPTION_STEP = r"^(?:[a-z_]*_)?(?:for|at|after)_((?:global_)?step|iter(?:ation)?|epoch)$"
NONFINITE_WORD = r"(?i)\b(?:nan|inf)\b"

JSON_KEY = r"[\w/.-]*loss[\w/.-]*|step|global_step|iteration|iter|num_updates|current_steps|_step|train/global_step"
JSON_MATCH = rf"\{{\s*\"[^{{}}]*\"(?:{JSON_KEY})\"\s*:"
JSON_PAIR = r"\"(?P<key>[^\"]+)\"\s*:\s*(?P<val>\"[^\"]*\"|[-+\w.]+)"

# Extra key words are lazy: `loss inf lr 0.1` is loss=inf, lr=0.1, not a key `loss inf lr`. A value
# may sit in brackets with its total (`Epoch:[844/1500]`), or be a count with its total and ratio.
# `@` in a key: top-k accuracies (`Prec@1`, `Acc@5`). `secs`: `time: 193.6 secs.`. The value in parentheses
# after a value is the meter's running average (`Time 0.154 (8.010)`, the PyTorch ImageNet example's AverageMeter).
KV_PAIR = (
    r"(?i)(?:^|[\s|,;\[\(\{])(?P<key>[a-z][a-z0-9_./@-]*(?: [a-z][a-z0-9_./@-]*){0,2}?(?: \((?:[a-z]|ms|secs?)\))?)\s*(?:[:=]\s*|\s+)"
    rf"(?P<ob>\[\s*)?(?:(?P<clock>{CLOCK})|(?P<val>{NUM}))(?:\s?(?P<unit>(?:ms|secs?|s|GiB|GB|MiB|MB)\b|%))?(?:\s?/\s?(?P<tot>\d+)(?:=(?P<frac>{NUM}))?)?(?P<cb>\s*\])?"
    rf"(?:\s*\((?P<avg>{NUM})\))?"
)


def rows_from_pairs(kv: pl.DataFrame, source: str) -> pl.DataFrame:
    """(_i, key, val[, unit]) pairs -> rows: step from a step key, names and units canonicalised."""
    # `Avg. Loss` -> `avg_loss`: word-final dots are abbreviation marks, not part of the name.
    key = pl.col("key").str.strip_chars().str.to_lowercase().str.replace_all(r"\.(\s|$)", "$1").str.replace_all(r"\s+", "_")
    # A log level the prefix splitter left before the first key (`INFO Train epoch: 17`) is not part of it.
    key = key.str.replace(r"^(?:info|warning|warn|debug|error)_", "")
    # A caption's step (`Evaluation result for step 435000:`, TF Estimator's `Saving dict for global step 1000:`): the
    # words before it name the line, the step is the step.
    key = key.str.replace(CAPTION_STEP, "$1")
    unit = pl.col("unit").str.to_lowercase() if "unit" in kv.columns else pl.lit(None, pl.String)
    # `acc: 45476/54430=0.8355` (count/total=ratio, [OBS] jiesutd/NCRFpp#100): the ratio is the value.
    val = pl.coalesce("frac", "val") if "frac" in kv.columns else pl.col("val")
    # `Error: 44996/50000` (wrong predictions out of a total, the PyTorch examples' shape): the error rate is the value.
    kv = kv.with_columns(key.alias("_k"), unit.alias("_u"))
    v = num(val)
    if "tot" in kv.columns:
        rate = pl.col("_k").is_in(["error", "err"]) & pl.col("tot").is_not_null()
        v = pl.when(rate).then(v / pl.col("tot").cast(pl.Float64, strict=False)).otherwise(v)
    kv = kv.with_columns(v.alias("_v"))
    step = (
        kv.filter(pl.col("_k").is_in(STEP_KEYS))
        .group_by("_i").agg(pl.col("_v").first().cast(pl.Int64, strict=False).alias("step"))
    )
    batch = _batch_steps(kv)
    if batch.height:
        step = pl.concat([step.join(batch, on="_i", how="anti"), batch.select("_i", "step")])
    # A line that names an epoch but no step is an epoch summary: its bare `time` is the epoch's.
    per_epoch = kv.filter(pl.col("_k").is_in(["epoch", "train_epoch", "training_epoch"])).select("_i").unique()
    per_epoch = per_epoch.join(step, on="_i", how="anti", maintain_order="left").with_columns(pl.lit(True).alias("_per_epoch"))
    kv = kv.join(per_epoch, on="_i", how="left", maintain_order="left")
    # On a batch line (`Epoch: [0][14/5005]  Time 0.154 (8.010)  Data 0.001 (7.720)`) `Data` is the batch's data time.
    on_batch = pl.col("_i").is_in(batch.get_column("_i").implode()) if batch.height else pl.lit(False)
    time_name = pl.when(on_batch & (pl.col("_k") == "data")).then(pl.lit("data_time_ms")).otherwise(
        pl.col("_k").replace_strict(TIME_KEYS, default=None, return_dtype=pl.String))
    time_name = pl.when(pl.col("_per_epoch").fill_null(False) & (pl.col("_k") == "time")).then(pl.lit("epoch_time_ms")).otherwise(time_name)
    time_name = (
        pl.when(time_name.is_not_null()).then(time_name)
        .when(pl.col("_k").str.contains(DATA_TIME_WORD + "$")).then(pl.lit("data_time_ms"))
        .when(pl.col("_k").str.contains(STEP_TIME_WORD + "$") | pl.col("_k").str.contains("^" + TIME_PER_WORD + "$")).then(pl.lit("step_time_ms"))
    )
    # A running average printed under its own name beside the value (mozilla/TTS `LoaderTime:0.02  AvGLoaderTime:0.03`)
    # is the meter's average, not a second value of the same step.
    time_name = pl.when(pl.col("_k").str.contains(r"^(?:avg|average|mean)_?") & time_name.is_in(["step_time_ms", "data_time_ms"])).then(
        time_name.str.replace("_ms$", "_avg_ms")).otherwise(time_name)
    if "clock" in kv.columns:
        # A clock-printed duration is seconds: under an interval name it is the step time of that interval;
        # under any other name (a wall clock, a cumulative `Elapsed`) it gives no row (its value stays null).
        kv = kv.with_columns(_clock_seconds(pl.col("clock")).alias("_c"))
        clocked = pl.col("_c").is_not_null()
        interval = clocked & pl.col("_k").str.contains(INTERVAL_WORD)
        time_name = pl.when(interval).then(pl.lit("step_time_ms")).otherwise(time_name)
        kv = kv.with_columns(pl.when(interval).then(pl.col("_c")).when(clocked).then(None).otherwise(pl.col("_v")).alias("_v"),
                             pl.when(clocked).then(pl.lit("s")).otherwise(pl.col("_u")).alias("_u"))
    is_mem = pl.col("_u").is_in(["gib", "gb", "mib", "mb"])
    time_value = (
        pl.when(pl.col("_u").is_in(["ms", "s", "sec", "secs"])).then(scale_by_unit(pl.col("_v"), pl.col("_u"), TIME_TO_MS))
        .when(pl.col("_k").str.contains("ms")).then(pl.col("_v"))
        .otherwise(pl.col("_v") * 1000.0)
    )
    name = (
        pl.when(time_name.is_not_null()).then(time_name)
        .when(is_mem).then(_mem_name(pl.col("_k")))
        .otherwise(canonical(pl.col("_k"), NAMES))
    )
    value = (
        pl.when(time_name.is_not_null()).then(time_value)
        .when(is_mem).then(scale_by_unit(pl.col("_v"), pl.col("_u"), MEM_TO_MIB))
        .when(pl.col("_k").is_in(GIB_KEYS)).then(pl.col("_v") * 1024.0)
        .otherwise(pl.col("_v"))
    )
    kv = kv.filter(~pl.col("_k").is_in(STEP_KEYS + SKIP_KEYS)).join(step, on="_i", how="left", maintain_order="left")
    rows = kv.select("_i", "step", name.alias("name"), value.alias("value"))
    if "tot" in kv.columns:
        # `epoch: 5/50` on an epoch summary (no step): the epochs the run is set to train, which tells a schedule
        # that ends early from a finished one.
        total = kv.filter((pl.col("_k") == "epoch") & pl.col("tot").is_not_null() & pl.col("_per_epoch").fill_null(False)).select(
            "_i", "step", pl.lit("epoch_total").alias("name"), pl.col("tot").cast(pl.Float64, strict=False).alias("value"))
        rows = pl.concat([rows, total]) if total.height else rows
    if batch.height:
        # The batch within its epoch: dataloader-bottleneck leaves each epoch's first batches (warm-up) out.
        rows = pl.concat([rows, batch.select("_i", "step", pl.lit("epoch_batch").alias("name"), pl.col("batch").cast(pl.Float64).alias("value"))])
    if "avg" in kv.columns:
        # A meter's running average beside a batch time (`Time 0.154 (8.010)`): `step_time_avg_ms`, `data_time_avg_ms`.
        avg_value = pl.when(pl.col("_u").is_in(["ms", "s", "sec", "secs"])).then(
            scale_by_unit(num(pl.col("avg")), pl.col("_u").str.replace(r"^secs?$", "s"), TIME_TO_MS)
        ).otherwise(num(pl.col("avg")) * 1000.0)
        avg = kv.filter(time_name.is_in(["step_time_ms", "data_time_ms"]) & pl.col("avg").is_not_null()).select(
            "_i", "step", time_name.str.replace("_ms$", "_avg_ms").alias("name"), avg_value.alias("value"))
        rows = pl.concat([rows, avg]) if avg.height else rows
    rows = rows.with_columns(pl.col("name").replace(prose_names(rows.get_column("name"))))
    return _mm_modes(shape(rows, source), kv)


def _clock_seconds(clock: pl.Expr) -> pl.Expr:
    """`0:00:00.208632` / `33:28.61` -> seconds (h:mm:ss or mm:ss); null where no clock was printed."""
    g = clock.str.extract_groups(r"^(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+(?:\.\d+)?)$")
    h, m, sec = (g.struct.field(k).cast(pl.Float64, strict=False) for k in ("h", "m", "s"))
    return h.fill_null(0.0) * 3600.0 + m * 60.0 + sec


# The PyTorch ImageNet example and its many forks: `Epoch: [0][14/5005]` = (epoch, batch / batches per epoch),
# 0-based epochs; the global batch `epoch * batches + batch` is the step.
BATCH_HEAD = r"(?i)\bepoch:?\s*\[(\d+)\]\s*\[\s*(\d+)\s*/\s*(\d+)\s*\]"


def _batch_steps(kv: pl.DataFrame) -> pl.DataFrame:
    """(_i, step, batch within the epoch) of the lines with a BATCH_HEAD (one regex per distinct line, not per pair)."""
    if "msg" not in kv.columns:
        return pl.DataFrame(schema={"_i": kv.schema["_i"], "step": pl.Int64, "batch": pl.Int64})
    lines = kv.select("_i", "msg").unique("_i", keep="first").filter(pl.col("msg").str.contains(BATCH_HEAD))
    g = lines.select("_i", pl.col("msg").str.extract_groups(BATCH_HEAD).alias("_g")).unnest("_g")
    e, b, n = (pl.col(c).cast(pl.Int64, strict=False) for c in g.columns[1:4])
    return g.select("_i", (e * n + b).alias("step"), b.alias("batch")).drop_nulls()


def _mm_modes(rows: pl.DataFrame, kv: pl.DataFrame) -> pl.DataFrame:
    """mmcv `log.json` records (`{"mode": "val", "epoch": 2, "iter": 325, "lr": 0.02, "bbox_mAP": 0.296, ..}`):
    a val/test record's metrics take `eval_`/`test_`; its `epoch` and `lr` repeat the training record's and
    give no row. A bare `memory` beside a `mode` is mmcv's `max_memory_allocated` in MB -> `mem_max_mib`."""
    modes = kv.filter(pl.col("_k") == "mode").select("_i", pl.col("val").str.strip_chars(" \"'").str.to_lowercase().alias("_m"))
    if modes.height == 0:
        return rows
    r = rows.join(modes.unique("_i"), on="_i", how="left", maintain_order="left")
    pre = pl.col("_m").replace_strict({"val": "eval_", "test": "test_"}, default=None, return_dtype=pl.String)
    name = pl.col("name")
    name = (
        pl.when(pl.col("_m").is_not_null() & (name == "memory")).then(pl.lit("mem_max_mib"))
        .when(pre.is_not_null() & ~name.str.starts_with(pre)).then(pre + name)
        .otherwise(name)
    )
    repeat = pre.is_not_null() & pl.col("name").is_in(["epoch", "lr"])
    return r.filter(~repeat.fill_null(False)).with_columns(name.alias("name")).drop("_m")


def _mem_name(key: pl.Expr) -> pl.Expr:
    return (
        pl.when(key.str.contains("max|peak")).then(pl.lit("mem_max_mib"))
        .when(key.str.contains("reserv|cache")).then(pl.lit("mem_reserved_mib"))
        .when(key.str.contains("alloc")).then(pl.lit("mem_allocated_mib"))
        .otherwise(key + "_mib")
    )


def extract_json(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Flat numeric pairs of a JSON object printed on one line."""
    body = pl.col("msg").str.extract(r"(\{.*\})", 1)
    return rows_from_pairs(pairs(df, JSON_PAIR, body), "json")


def extract_kv(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Key/value sequences that pass the gate and the coverage test."""
    # A note after the values (`loss: 2.31  <-- jumps here`, `# after warmup`) is no part of them. A numpy/JAX
    # scalar printed with its wrapper (`array([1.23], dtype=float32)`, `Array(5.3125, dtype=bfloat16)`) is its value.
    df = df.with_columns(pl.col("msg").str.replace(COMMENT, "").str.replace_all(ARRAY_SCALAR, "${1}").str.replace(LOGGER_ORIGIN, " ")
                         .str.replace_all(QUOTED_PAIR, "${1}: ${2}${3}"))
    # A count printed before its name (`0 epoch,  152  batch, Discriminator  Loss:  11.18`) is read as `epoch 0, batch 152`,
    # and words of one name spaced by hand (`Discriminator  Loss`) as one name.
    df = df.with_columns(pl.col("msg").str.replace_all(COUNT_FIRST, "${1}${3} ${2}, ${4}").str.replace_all(SPACED_NAME, "${1} ${2}"))
    kv = pairs(df, KV_PAIR)
    if kv.height == 0:
        return empty_rows()
    prose = prose_names(kv.get_column("key").str.strip_chars().str.to_lowercase())
    # The word rules first (`targetspecific_cost` is a loss), then the grammar's own table.
    gate_name = canonical(pl.col("key").str.strip_chars().str.to_lowercase().replace(prose), NAMES)
    # An accuracy alone on its line passes too (`validation accuracy:\t\t10.64 %`): one metric per line is a
    # common hand-printed shape, and the coverage test below still rejects prose.
    is_acc = pl.col("key").str.strip_chars().str.to_lowercase().replace_strict(prose, default="").str.contains(ACC_GATE)
    # So does a Dice coefficient alone on its line (Pytorch-UNet's eval print `Validation Dice Coeff: 0.18`): a bounded
    # score whose value tells masks loaded outside [0, 1] (above 1) from a model that learns.
    is_dice = pl.col("key").str.strip_chars().str.to_lowercase().str.replace_all(r"\s+", "_").str.contains(DICE_GATE)
    is_loss = gate_name.str.contains(GATE) | (gate_name.str.starts_with("loss_") & (gate_name != "loss_scale")) | is_acc | is_dice
    # A loss whose name goes on after the word (`mel_loss_before`, `mel_loss_after`: TensorFlowTTS's Tacotron2 and
    # FastSpeech log the mel loss before and after the postnet).
    is_loss = is_loss | gate_name.str.contains(QUALIFIED_LOSS)
    # A timing-only line (`load_data_time: 19.6173, train_step_time: 0.686`) passes when it names both a data
    # time and a step time: the pair is what the loader's share of each step is read from. So does a data time
    # on a line that names its step (`> Step:5 [...] LoaderTime:120.21 [...]`, a mozilla/TTS line the poster
    # elided, [OBS] mozilla/TTS#407): the loader's wait per step, which a stall of seconds makes a finding alone.
    low = pl.col("key").str.strip_chars().str.to_lowercase().str.replace_all(r"\s+", "_")
    is_data = low.str.contains(DATA_TIME_WORD + "$")
    is_step = ~is_data & low.str.contains(STEP_TIME_WORD + "$")
    ok = is_loss.any() | (is_data.any() & (is_step.any() | low.is_in(STEP_KEYS).any()))
    gated = kv.group_by("_i").agg(ok.alias("_ok")).filter(pl.col("_ok")).select("_i")
    residue = (
        df.join(gated, on="_i", how="semi", maintain_order="left")
        .select("_i", pl.col("msg").str.replace(CAPTION, " ").str.replace_all(KV_PAIR, " ")
                .str.replace_all(r"\[[^\]]*\]|\([^)]*\)", " ").str.replace_all(NONFINITE_WORD, " ").str.replace_all(RATE_UNIT, " ")
                .str.replace_all(r"[^A-Za-z]", "").str.len_chars().alias("_left"))
        .filter(pl.col("_left") <= RESIDUE_LETTERS)
        .select("_i")
    )
    kv = kv.join(residue, on="_i", how="semi", maintain_order="left")
    # Not measurements: a bracketed percentage is progress (`Epoch 1 complete [10%]  Loss: ..`), and a
    # `[file.py line:78]` logging prefix the prefix splitter left in place ([OBS] mira-ai-lab/MUSIC-AVQA-R#1).
    # Nor the index of an evaluation set (`VALID SET 0 LOSS:0.1780`, [OBS] gentaiscool/end2end-asr-pytorch#39).
    # Nor the first item of a list (`loss: [0.52, 0.61]`, one value per head or per group): a bracketed value is
    # one only when the bracket closes right after it (`loss: [10.000229]`, Paddle's one-element arrays).
    kv = kv.filter(~(pl.col("ob").is_not_null() & (pl.col("unit") == "%")).fill_null(False)
                   & ~(pl.col("ob").is_not_null() & pl.col("cb").is_null())
                   & ~pl.col("key").str.contains(r"\.py(?: line)?$") & ~pl.col("key").str.contains(SET_INDEX))
    if kv.height == 0:
        return empty_rows()
    rows = rows_from_pairs(kv, "generic")
    # An evaluation line (`Test set: Average loss: 0.0335, Accuracy: ..`, the PyTorch MNIST example):
    # its names take `eval_` (an average loss there is the evaluation loss).
    evals = df.filter(pl.col("msg").str.contains(EVAL_LINE)).select("_i")
    if evals.height == 0:
        return rows
    is_eval = pl.col("_i").is_in(evals.get_column("_i").implode())
    base = pl.col("name").str.replace(r"^(?:average|avg|mean)_(\w*loss)$", "$1")
    named = pl.when(is_eval & ~pl.col("name").str.starts_with("eval_")).then(pl.lit("eval_") + base).otherwise(pl.col("name"))
    return rows.with_columns(named.alias("name"))


# A one-element numpy array or a 0-d numpy/JAX array as Python prints it: `array([1.23], dtype=float32)`,
# `Array(5.3125, dtype=bfloat16)` ([OBS] google/flax nnx metrics docs, dmlc/keras#12 `array([ nan], dtype=float32)`).
ARRAY_SCALAR = rf"\b[Aa]rray\(\[?\s*({NUM})\s*\]?(?:,\s*dtype=[\w.]+)?\)"
# A value may open with a bracket or an array wrapper: Paddle prints fetched losses as one-element arrays
# (`loss: [10.000229]`, [OBS] PaddlePaddle/PaddleSlim#1582; `Loss = [1.4494681]`, jina-ai/finetuner#2).
OPEN = r"(?:\[\s*|[Aa]rray\(\[?\s*)?"
# The record origin of ESPnet-style logging (`%(asctime)s (%(module)s:%(lineno)d) %(levelname)s: %(message)s`, also
# ParallelWaveGAN's and TensorFlowTTS's: `2020-09-10 11:52:14,448 (base_trainer:831) INFO: (Step: 95400) …`): a module
# and a line number, no metric. Also after a stamp the prefix splitter left inside the line (a progress bar printed
# without its newline before the record).
LOGGER_ORIGIN = r"(?:^\s*|\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s+)\(\w+:\d+\) (?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s"
# A Python dict's items printed without their braces, every value a quoted string: PaddleDetection's static trainer joins
# `str(dict({k: v})).strip('{}')` of its `'{:.6f}'`-formatted stats into the line (`iter: 1860, lr: 0.019983, 'loss_cls':
# 'nan', 'loss': 'nan', eta: …`, ppdet/utils/stats.py TrainingStats.log; [OBS] PaddlePaddle/PaddleDetection#1946, #1507,
# #1512). Read as `key: value`; only a number or nan/inf loses its quotes (a quoted word stays a word).
QUOTED_PAIR = r"(?i)'([a-z_][\w/.@-]*)':\s*'?([-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|\.\d+)|-?nan|-?inf)'?([,\s]|$)"
# The unit of a throughput printed after its value (Paddle's benchmark convention puts `ips: 4.09711 images/sec` last on
# every training line, PaddlePaddle/PaddleDetection#1507; PaddleSeg `ips: 3.7425 samples/sec`, PaddlePaddle/PaddleSeg#928):
# a unit, not prose left over.
RATE_UNIT = r"(?i)\b(?:images|imgs|samples|tokens|sequences|seqs)/s(?:ec)?\b"
# `←` too: hand-annotated trajectories (`step=220  loss=1.43  gnorm=7.7    ← BEST`, paiml/entrenar#274).
COMMENT = r"\s+(?:<-+|←|#+)\s*[A-Za-z].*$"
ACC_GATE = r"^(?:eval_|test_)?acc(?:uracy)?$"
# `Validation Dice Coeff`, `dice_score`, `Dice`: milesial/Pytorch-UNet train.py / eval.py ([OBS] milesial/Pytorch-UNet#56, #78, #84).
DICE_GATE = r"(?:^|_)dice(?:_coeff?|_coefficient|_score)?$"
# A progress count printed before its noun: DeblurGAN-tf's `'%d epoch, %d batch, Discriminator  Loss: %f'` ([OBS]
# LeeDoYup/DeblurGAN-tf#11), and multiffn-nli's `'%d completed epochs, %d batches' + '\tAvg train loss: %f'` (erickrf/
# multiffn-nli src/classifiers/decomposable.py; its issue #2 paste `0 completed epochs, 100 batches Average training batch
# loss: nan  Validation loss: nan`): singular or plural, `completed` allowed before the noun, then a comma, a tab, or the
# capitalised name of the first metric. Read as `epoch 0, batch 100,`, so the counts are pairs, not words left over.
COUNT_FIRST = r"(?i)(^|[\s,])(\d+)\s+(?:completed\s+)?(epoch|batch|iter|iteration|step)(?:e?s)?(?:,|\t|\s+((?-i:[A-Z])))"
# Two words of one name spaced by hand before a loss word (`Discriminator  Loss:`, `Generator  Loss:`).
SPACED_NAME = r"(?i)\b([a-z]+) {2,}(loss\b)"
# Also in brackets (`[TEST] Loss: 2.3440, Error: 8999/10000 (90%)`).
EVAL_LINE = r"(?i)^\s*(?:\[(?:test|val|valid|validation|eval|evaluation)\]|evaluation results? for |saving dict for global step |(?:test|val|valid|validation|eval|evaluation)(?: set)?(?:\s*:| \d+ [a-z]))"
SET_INDEX = r"(?i)^(?:test|val|valid|validation|eval|evaluation|dev) set$"


# Also loss components named `loss_<part>` (VITS/RVC `loss_disc=3.859, loss_gen=..`, [OBS] RVC-Project/
# Retrieval-based-Voice-Conversion-WebUI#507), which the gate takes too (but `loss_scale` alone is no loss).
KV_MATCH = (
    rf"(?i)(?:loss(?:es)?|grad[_ ]norm|gnorm|ppl|perplexity)\s*[:= ]\s*{OPEN}[-+.\d]|(?:loss(?:es)?|grad[_ ]norm|gnorm|ppl|perplexity)\s*[:= ]\s*{OPEN}(?:nan|inf)"
    # TF-era `cost` (`labeling_cost 0.10 targetspecific_cost nan`, `Epoch 1 cost: nan`): a loss by the word rules.
    r"|cost\s*[:= ]\s*(?:[-+.\d]|nan|inf)"
    r"|\bloss_[a-z]\w*=(?:[-+.\d]|nan|inf)|accuracy\s*[:=]\s*[-+.\d]"
    # A quoted loss item of a brace-less dict (PaddleDetection's `'loss': '1.234567'`, see QUOTED_PAIR).
    r"|'\w*loss\w*':\s*'(?:[-+.\d]|nan|inf)"
    # A loss named with a qualifier after the word, spaced around its `=` (TensorFlowTTS base_trainer's
    # `(Step: 95400) train_mel_loss_before = nan.`, Tacotron2/FastSpeech's loss before and after the postnet).
    r"|_loss_(?:before|after)\s*=\s*(?:[-+.\d]|nan|inf)"
    # A Dice coefficient alone on its line (`Validation Dice Coeff: 1.97`, milesial/Pytorch-UNet).
    r"|dice(?: coeff?| coefficient| score)?\s*:\s*[-+.\d]"
    # A split's accuracy with a space for separator, one per epoch (the MLX MNIST example's `Epoch 0: Test accuracy 0.113`,
    # [OBS] ml-explore/mlx#188); only after a split word, so prose (`accuracy 90% on`) still needs the coverage test.
    r"|(?:test|val|valid|validation|eval|train|training) accuracy [-+.\d]"
    rf"|{DATA_TIME_WORD}\s*[:=]\s*[.\d].*{STEP_TIME_WORD}\s*[:=]\s*[.\d]|{STEP_TIME_WORD}\s*[:=]\s*[.\d].*{DATA_TIME_WORD}\s*[:=]\s*[.\d]"
    # A step and the loader's wait alone (mozilla/TTS and Coqui TTS print `StepTime:` and `LoaderTime:`; a paste may keep
    # only the second: `> Step:5 [...] LoaderTime:120.21 [...]`, mozilla/TTS#407).
    rf"|\bstep\s*[:=]\s*\d+\b.*{DATA_TIME_WORD}\s*[:=]\s*[.\d]"
)
JSON_GRAMMAR = Grammar("json", ('{"',), JSON_MATCH, extract_json)
KV_GRAMMAR = Grammar("generic", ("loss", "cost", "grad_norm", "grad norm", "gnorm", "perplexity", "accuracy", "_time", "loadertime", "dice"), KV_MATCH, extract_kv)

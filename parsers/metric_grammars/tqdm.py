"""tqdm progress-bar states (formats.md §1.16, §1.4): postfix metrics and the step context of HF dicts.

A bar state is `{desc}: {pct}%|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}{postfix}]` (or
`{desc}: {n}it [{elapsed}, {rate}{postfix}]` without a total; pasted logs may lose the `|bar|`).
`postfix` is `, k=v, k=v` (Lightning: `v_num=..` and every `prog_bar=True` metric; fairseq tqdm mode:
`loss=.., num_updates=..`; user loops: `set_postfix(...)`). A bar without a postfix gives no metric,
so data-loading / checkpoint-shard bars are silent.

Steps: `num_updates`/`step`/`global_step` in the postfix when present; else for Lightning's
`Epoch N` bars `N * total + n` (the 1-based global batch count of 2.x); else `n`.

No metric read twice: a bar is redrawn many times per step (every `\r`), repeating the same postfix.
Per (rank, bar description with digits masked, metric): of adjacent states with the same step only
the last is kept (it carries the newest postfix: Lightning and `set_postfix` redraw the same `n` with
the new value), a state at `n = 0` (a bar just reset, still showing the previous epoch's postfix) is
skipped, and an `eval_*` value equal to the one kept before it is dropped (Lightning keeps
showing the last `val_loss` for a whole epoch). `state["tqdm_last"]` carries this across chunks.

Bar states without a description (the HF Trainer bar) are also emitted as internal `_bar` rows
(value = n) so that `steps.assign_hf_steps` can give HF console dicts their step; they never reach
the metrics table.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers import shapes
from forensics.parsers.metric_grammars.common import (
    NUM,
    ROW_SCHEMA,
    Grammar,
    canonical,
    canonical_of,
    empty_rows,
    num,
    pairs,
    snake,
    split_pairs,
)
from forensics.parsers.metric_names import postfix_names

# The description holds no run of 3+ spaces but its end (`: ` and the percentage padded to 3): text before such a run is another line glued before the bar
# (a paste that lost the `\r`: `DLL ... learning_rate : 2.9e-05      Iteration:  25%|..`, [OBS]
# NVIDIA/DeepLearningExamples#1107), which metric_lines cuts off and reads like text glued after it.
BAR = (
    r"(?P<desc>(?:\[[^\]\r]*\]:?\s*)?(?:(?:[^\]\[|%\r ]+ {1,2})*?[^\]\[|%\r ]+?)?? {0,3})(?:(?P<pct>\d{1,3})%(?:\|[^|\]]*\||\s)\s*(?P<n>\d+)/(?P<total>\d+)|(?P<n2>\d+)(?:it|\s?[a-z]+)?)"
    r"\s*\[(?P<el>[\d:]+)(?:<[\d:?]+)?,\s*(?P<rate>[^,\]]*?(?:it/s|s/it|/s|s/[a-z]+))(?P<post>(?:, [^\]]*)?)\]"
)
# The description as the bar's whole line head, padding included: YOLO tables print an epoch's values there.
BAR_WIDE = BAR.replace(r"(?:(?:[^\]\[|%\r ]+ {1,2})*?[^\]\[|%\r ]+?)?? {0,3}", r"[^\]\[|%\r]*?", 1)
MATCH = r"(?:\d%(?:\|[^|\]]*\||\s)\s*\d+/\d+|\d+(?:it|\s?[a-z]+)?)\s*\[[\d:]+(?:<[\d:?]+)?,\s*[^,\]]*?(?:it/s|s/it|/s|s/[a-z]+)"
POSTFIX_NAMES = {
    "train_loss": "loss",
    "reduced_train_loss": "loss",  # NeMo
    "train_loss_step": "loss",
    "loss_step": "loss",
    "train/loss": "loss",
    "val_loss": "eval_loss",
    "valid_loss": "eval_loss",
    "validation_loss": "eval_loss",
    "val/loss": "eval_loss",
    "ups": "updates_per_s",
    "clip": "clip_pct",
}
SECONDS_KEYS = {"train_step_timing_in_s", "train_step_timing", "step_time", "iter_time", "batch_time"}
# `total_it`: OpenPCDet's inner bar `pbar.set_postfix(dict(total_it=accumulated_iter))`, the global iteration.
STEP_KEYS = ["num_updates", "step", "global_step", "steps", "total_it"]
SKIP = ["v_num", "batch_idx", "split_idx", *STEP_KEYS]
BAR_NAME = "_bar"


# The `[elapsed<remaining, ` / `[elapsed, ` token that opens every bar state's bracket: counting it
# tells segments holding one state (the usual case once `\r` split the redraws) from glued ones.
_OPEN = r"\[[\d:]+(?:<[\d:?]+)?,"


def bar_states(df: pl.DataFrame, wide: bool = False) -> pl.DataFrame:
    """One row per bar state (several per segment when `\\r` was lost): _i, _b (order), rank, desc, n, total, post.

    wide: descriptions may hold runs of spaces (BAR_WIDE, for YOLO table rows)."""
    BAR = BAR_WIDE if wide else globals()["BAR"]  # noqa: N806
    many = df.get_column("msg").str.count_matches(_OPEN) > 1
    single = df.filter(~many)
    by_shape = shapes.extract_groups(single, BAR)  # once per distinct line shape when it can be
    if by_shape is not None:
        parts = [pl.concat([single.select("_i", "rank", pl.col("line").alias("_line")), by_shape], how="horizontal")]
    else:
        parts = [single.select("_i", "rank", pl.col("line").alias("_line"), pl.col("msg").str.extract_groups(BAR).alias("_s")).unnest("_s")]
    if many.any():
        glued = (
            df.filter(many)
            .select("_i", "rank", pl.col("line").alias("_line"), pl.col("msg").str.extract_all(BAR).alias("_s"))
            .explode("_s")
            .filter(pl.col("_s").is_not_null())
            .select("_i", "rank", "_line", pl.col("_s").str.extract_groups(BAR))
            .unnest("_s")
        )
        parts.append(glued)
    states = pl.concat(parts, how="diagonal_relaxed").filter(pl.col("el").is_not_null()).sort("_i", maintain_order=True).with_row_index("_b")
    tt = df.get_column("msg").str.contains("|Loss: ", literal=True)
    if tt.any():
        # torchtune's `epoch|step|Loss: ..` description: `|` is not part of a captured description.
        steps = df.filter(tt).select("_i", pl.col("msg").str.extract(TORCHTUNE, 2).cast(pl.Int64, strict=False).alias("_tt"))
        states = states.join(steps, on="_i", how="left", maintain_order="left")
    else:
        states = states.with_columns(pl.lit(None, pl.Int64).alias("_tt"))
    return states.select(
        "_i", "_b", "rank", "_line",
        pl.col("desc").str.strip_chars().str.strip_chars_end(":").str.strip_chars().alias("desc"),
        pl.coalesce(pl.col("n"), pl.col("n2")).cast(pl.Int64, strict=False).alias("n"),
        pl.col("total").cast(pl.Int64, strict=False).alias("total"),
        pl.col("post"),
        pl.col("el"),
        "_tt",
    )


def run_offsets(states: pl.DataFrame, state: dict) -> pl.DataFrame:
    """`states` plus `_off`: batches done by earlier runs of the same bar, so that a bar restarted every
    epoch without naming it (`100%|..| 190/190 [.., train_loss=0.945]` once per epoch, [OBS]
    speechbrain/speechbrain PR#2216; `Loss: 0.52: : 11it [..]`, [OBS] primepake/wav2lip_288x288#33) counts
    on (`n + _off`) instead of repeating its steps.

    A bar is (rank, description with digits masked, total). A state starts a new run when its `n` is below
    the previous state's, or when a finished bar (or one without a total) shows the same `n` on another
    physical line with other text (a redraw of one step stays on its line or repeats its text; a finished
    bar printed again with new values is the next epoch's). `state["tqdm_runs"]` carries each bar's last (n, text, offset) across chunks.
    """
    key = ["rank", "_dk", "total"]
    # Only states that give rows read a step from `n`: those with a postfix or a loss in the description
    # (the many bare HF bar states are skipped, and get no offset).
    # Lightning's `Epoch N` bars take their step from N (postfix_rows), not from an offset.
    used = ((pl.col("post").str.len_bytes() > 0) | pl.col("desc").str.contains("oss", literal=True)) & ~pl.col("desc").str.starts_with("Epoch ")
    full_states = states
    states = states.filter(used)
    if states.height == 0:
        return full_states.with_columns(pl.lit(0, pl.Int64).alias("_off"))
    st = states.with_columns(
        pl.col("desc").str.replace_all(r"\d+", "#").alias("_dk"),
        (pl.col("desc") + pl.col("post").fill_null("")).alias("_txt"),
    ).sort("_b")
    runs: dict = state.setdefault("tqdm_runs", {})
    if runs:
        prev = pl.DataFrame(
            [{"rank": k[0], "_dk": k[1], "total": k[2], "_pn": v[0], "_pt": v[1], "_po": v[2]} for k, v in runs.items()],
            schema={"rank": pl.Int32, "_dk": pl.String, "total": pl.Int64, "_pn": pl.Int64, "_pt": pl.String, "_po": pl.Int64},
        )
        st = st.join(prev, on=key, how="left", nulls_equal=True, maintain_order="left")
    else:
        st = st.with_columns(pl.lit(None, pl.Int64).alias("_pn"), pl.lit(None, pl.String).alias("_pt"), pl.lit(None, pl.Int64).alias("_po"))
    first = pl.int_range(pl.len()).over(key) == 0
    pn = pl.when(first).then(pl.col("_pn")).otherwise(pl.col("n").shift(1).over(key))
    pt = pl.when(first).then(pl.col("_pt")).otherwise(pl.col("_txt").shift(1).over(key))
    same_line = pl.when(first).then(False).otherwise(pl.col("_line").shift(1).over(key) == pl.col("_line"))
    # Equal `n` on a new line with new text: the next run only for a finished bar (`n == total`) or one
    # without a total; an unfinished bar is redrawn with its new postfix (diffusers: `update` then `set_postfix`).
    done = pl.col("total").is_null() | (pl.col("n") == pl.col("total"))
    restart = (pl.col("n") < pn) | ((pl.col("n") == pn) & done & ~same_line & (pl.col("_txt") != pt))
    added = pl.when(restart.fill_null(False)).then(pn).otherwise(0)
    st = st.with_columns((added.cum_sum().over(key) + pl.col("_po").fill_null(0).first().over(key)).alias("_off"))
    for r in st.group_by(key).agg(pl.col("n").last(), pl.col("_txt").last(), pl.col("_off").last()).iter_rows():
        runs[(r[0], r[1], r[2])] = (r[3], r[4], r[5])
    off = st.select("_b", "_off")
    return full_states.join(off, on="_b", how="left", maintain_order="left").with_columns(pl.col("_off").fill_null(0))


def postfix_rows(states: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Metric rows of the postfixes of `bar_states`, deduplicated across redraws (see module doc)."""
    # A state at n=0 has done nothing yet: its postfix is what the previous bar (epoch) left there. Unless the bar has
    # been running (elapsed past 00:00): a bar redrawn at n=0 after it started is an outer bar over epochs whose
    # postfix the inner loop sets every step (OpenPCDet and its forks: `tbar = trange(.., desc='epochs')`,
    # `tbar.set_postfix(disp_dict)` then `tbar.refresh()` while tbar stays at the current epoch; [OBS]
    # Haiyang-W/DSVT#31 `epochs:   0%| | 0/24 [00:25<?, ?it/s, loss_hm=nan, loss_loc=nan, loss=nan, ..]`).
    # A bar just reset (a new epoch of Lightning's bar) shows `[00:00<?, ..]`; a bar named by its epoch's number
    # (`Epoch 38:`) is one reset every epoch, and some Lightning versions keep its elapsed time across the reset
    # ([OBS] Lightning-AI/pytorch-lightning#12939), so its n=0 state is never read.
    running = pl.col("el").str.contains(r"[1-9]") & ~pl.col("desc").str.contains(r"\d") if "el" in states.columns else pl.lit(False)
    with_post = states.filter((pl.col("post").str.len_chars() > 0) & ((pl.col("n") > 0) | running))
    if with_post.height == 0:
        return empty_rows()
    # `, k=v, k=v` (tqdm joins set_postfix items with ", " and "="); `set_postfix_str` users write
    # `, Loss: 0.05451, Learning rate: 3.3762e-03` ([OBS] IsoNet-cryoET/IsoNet2#22).
    post = pl.col("post").str.strip_prefix(", ")
    post = pl.when(post.str.contains("=", literal=True)).then(post).otherwise(post.str.replace_all(": ", "=", literal=True))
    kv = split_pairs(with_post, post, ", ", "=")
    step_key = (
        kv.filter(pl.col("key").is_in(STEP_KEYS))
        .group_by("_b").agg(num(pl.col("val")).first().cast(pl.Int64, strict=False).alias("_ps"))
    )
    epoch = pl.col("desc").str.extract(r"^Epoch (\d+)$", 1).cast(pl.Int64, strict=False)
    kv = kv.join(step_key, on="_b", how="left", maintain_order="left").with_columns(
        pl.coalesce(pl.col("_ps"), epoch * pl.col("total") + pl.col("n"), pl.col("n") + _off(kv)).alias("step"),
        pl.col("desc").str.replace_all(r"\d+", "#").alias("_dk"),
    )
    # Lightning <= 1.9 adds a running-mean `loss` beside the logged `train_loss`: when a state holds
    # another key that means the loss, the bare `loss` is that running mean and is named `loss_avg`.
    # GAN losses under short names (`DR=713, DF=nan, G=nan, GP=2.16e+4`) are loss parts (metric_names.toml [postfix]).
    name = canonical_of(kv, "key", {**postfix_names(), **POSTFIX_NAMES})
    other_loss = ((name == "loss") & (pl.col("key") != "loss")).any().over("_b")
    name = pl.when((pl.col("key") == "loss") & other_loss).then(pl.lit("loss_avg")).otherwise(name)
    value = num(pl.col("val").str.strip_prefix("tensor(").str.strip_suffix(")"))
    # Seconds-valued timing keys (NeMo `train_step_timing in s`) -> step_time_ms.
    seconds = name.is_in(list(SECONDS_KEYS))
    rows = kv.filter(~pl.col("key").str.to_lowercase().is_in(SKIP)).select(
        "_i", "_b", "rank", "_dk", "step",
        pl.when(seconds).then(pl.lit("step_time_ms")).otherwise(name).alias("name"),
        pl.when(seconds).then(value * 1000.0).otherwise(value).alias("value"),
    ).filter(pl.col("value").is_not_null())
    return _dedupe(rows.sort("_b"), state)


# A metric in the bar description: torchtune `1|25|Loss: 1.2621808052062988:  26%|..| 26/101 [..]`
# ([OBS] meta-pytorch/torchtune#2620: epoch|global step|loss, set with `set_description` every step),
# user loops `Train Epoch: 16 Loss: 0.35977894: 100% 2785/2785 [..]` ([OBS] InhwanBae/DMRGCN#1).
DESC_PAIR = rf"(?i)(?:^|[\s|,;])(?P<key>[a-z][\w/.]*(?: [a-z][\w/.]*)?)\s*[:=]\s*(?P<val>{NUM})"
TORCHTUNE = r"(?:^|[^\d|])(\d+)\|(\d+)\|Loss: "
DESC_STEP = ["step", "global_step", "iter", "iteration"]


def desc_rows(states: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Metric rows of bar descriptions that hold a loss (`..Loss: 1.23`), deduplicated like postfixes.

    Step: torchtune's global step; else a step key of the description; else `epoch * total + n` when the
    description names an epoch (the same count as Lightning's `Epoch N` bars); else `n`. A validation
    bar (`Valid ...`, `Val ...`, `Eval ...`) counts its own batches: its rows take `eval_` names and no
    step (textlog carries the training step before it)."""
    # A description padded with a run of spaces is another line's text glued before the bar (a paste that
    # lost its `\r`), not a description: not read here.
    d = states.filter(
        pl.col("desc").str.contains(r"(?i)loss\s*[:=]") & (pl.col("n") > 0) & ~pl.col("desc").str.contains("   ", literal=True)
    )
    if d.height == 0:
        return empty_rows()
    kv = pairs(d, DESC_PAIR, pl.col("desc"))
    if kv.height == 0:
        return empty_rows()
    key = snake(pl.col("key"))
    kv = kv.with_columns(key.alias("_k"), num(pl.col("val")).alias("_v"))
    per = kv.group_by("_b").agg(
        pl.col("_v").filter(pl.col("_k").str.ends_with("epoch")).first().alias("_ep"),
        pl.col("_v").filter(pl.col("_k").is_in(DESC_STEP)).first().alias("_st"),
    )
    kv = kv.join(per, on="_b", how="left", maintain_order="left")
    tt = pl.col("_tt") if "_tt" in kv.columns else pl.lit(None, pl.Int64)
    is_eval = pl.col("desc").str.contains(r"(?i)^(?:valid|val\b|eval|test)")
    step = pl.coalesce(tt, pl.col("_st"), pl.col("_ep") * pl.col("total") + pl.col("n"), pl.col("n") + _off(kv)).cast(pl.Int64, strict=False)
    name = pl.when(pl.col("_k").str.ends_with("epoch")).then(pl.lit("epoch")).otherwise(canonical(pl.col("key"), POSTFIX_NAMES))
    rows = (
        kv.filter(
            ~(pl.col("_k").str.ends_with("epoch") | pl.col("_k").is_in(DESC_STEP))
            | (pl.col("_k").str.ends_with("epoch") & ~is_eval & tt.is_null())
        )
        .select(
            "_i", "_b", "rank",
            pl.col("desc").str.replace_all(r"\d+", "#").alias("_dk"),
            step.alias("step"),
            is_eval.alias("_eval"),
            pl.when(is_eval & ~name.str.starts_with("eval_")).then(pl.lit("eval_") + name).otherwise(name).alias("name"),
            pl.col("_v").alias("value"),
        )
        .filter(pl.col("value").is_not_null())
    )
    out = _dedupe(rows.sort("_b"), state, "tqdm_desc", keep=["_eval"])
    return out.with_columns(pl.when(pl.col("_eval")).then(None).otherwise(pl.col("step")).alias("step")).drop("_eval").cast(ROW_SCHEMA)


def _off(df: pl.DataFrame) -> pl.Expr:
    """The run offset of `run_offsets` (0 when the states did not go through it)."""
    return pl.col("_off") if "_off" in df.columns else pl.lit(0, pl.Int64)


def _dedupe(rows: pl.DataFrame, state: dict, source: str = "tqdm_postfix", keep: list[str] | None = None) -> pl.DataFrame:
    """Adjacent redraws of one step keep the last; repeated eval values keep the first (see module doc)."""
    key = ["rank", "_dk", "name"]
    rows = rows.filter(pl.col("step").shift(-1).over(key).ne_missing(pl.col("step")))
    last: dict = state.setdefault("tqdm_last", {})
    if last:
        prev = pl.DataFrame(
            [{"rank": k[0], "_dk": k[1], "name": k[2], "_prev": v} for k, v in last.items()],
            schema={"rank": pl.Int32, "_dk": pl.String, "name": pl.String, "_prev": pl.Float64},
        )
        rows = rows.join(prev, on=key, how="left", nulls_equal=True, maintain_order="left")
    else:
        rows = rows.with_columns(pl.lit(None, pl.Float64).alias("_prev"))
    before = pl.coalesce(pl.col("value").shift(1).over(key), pl.col("_prev"))
    repeated = pl.col("name").str.starts_with("eval_") & (pl.col("value") == before).fill_null(False) & ~pl.col("value").is_nan()
    rows = rows.filter(~repeated)
    for r in rows.group_by(key).agg(pl.col("value").last()).iter_rows():
        last[(r[0], r[1], r[2])] = r[3]
    if keep:
        return rows.select("_i", "step", "name", "value", pl.lit(source).alias("source"), *keep)
    return rows.select("_i", "step", "name", "value", pl.lit(source).alias("source")).cast(ROW_SCHEMA)


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Postfix and description metrics of the claimed bar lines."""
    states = bar_states(df)
    return pl.concat([postfix_rows(states, state), desc_rows(states, state)])


def hf_bar_rows(states: pl.DataFrame) -> pl.DataFrame:
    """Internal `_bar` rows (undescribed bars with a total), from `bar_states` of any candidate line."""
    states = states.filter((pl.col("desc") == "") & pl.col("total").is_not_null())
    return states.select(
        "_i", pl.col("n").alias("step"), pl.lit(BAR_NAME).alias("name"), pl.col("_b").cast(pl.Float64).alias("value"),
        pl.lit("tqdm_bar").alias("source"),
    ).cast(ROW_SCHEMA)


# `gpu_mem`: the YOLO table header above the bars (read by yolo.py from the candidate lines) holds no other needle.
GRAMMAR = Grammar("tqdm", ("it/s", "s/it", "%|", "gpu_mem"), MATCH, extract)

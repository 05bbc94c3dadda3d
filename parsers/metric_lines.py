"""Per-step metric lines of every trainer family into long-form (name, value) rows.

The interface textlog.py calls: NEEDLES (prefilter substrings), SCHEMA, `extract(cand, state)` per
chunk and `finalize(metrics)` per file. The grammars live in parsers/metric_grammars/, one module per
framework family, in precedence order: each grammar runs its regex only on the candidate lines its
own needles select, and a line it claims is not read again by a later grammar. tqdm bar states are
cut out of a line first (read by the tqdm grammar), so what was glued after a bar is still read. Names are canonical
(DESIGN.md: loss, grad_norm, lr, loss_scale, step_time_ms, tokens_per_s, mfu, mem_*_mib,
skipped_steps, epoch, eval_loss, ...); unknown names stay lower-case snake_case. Values are float64
with NaN/Inf kept; memory is in MiB, times in ms, percentages as numbers.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl
from forensics.parsers import shapes
from forensics.parsers.metric_grammars import GRAMMARS, speechbrain
from forensics.parsers.metric_grammars import tqdm as tqdm_grammar
from forensics.parsers.metric_grammars import yolo as yolo_grammar
from forensics.parsers.metric_grammars.common import Grammar
from forensics.parsers.metric_grammars.steps import assign_hf_steps
from forensics.parsers.metric_names import apply_aliases

SCHEMA = {
    "line": pl.Int64,
    "seg": pl.Int32,
    "ts": pl.Datetime("us", "UTC"),
    "rank": pl.Int32,
    "step": pl.Int64,
    "name": pl.String,
    "value": pl.Float64,
    "source": pl.String,
}

# Substrings (case-insensitive) that every metric line of some grammar contains: the union of the
# grammars' needles, minus those another needle already covers (`loss=` is covered by `loss`).
_ALL = sorted({n.lower() for g in [*GRAMMARS, tqdm_grammar.GRAMMAR] for n in g.needles})
NEEDLES = [n for n in _ALL if not any(o != n and o in n for o in _ALL)]


# Claim patterns without their group names: a union of sub-forms may reuse a name, which Rust regex refuses.
_MATCH = {g.name: re.sub(r"\(\?P<\w+>", "(?:", g.match) for g in [*GRAMMARS, tqdm_grammar.GRAMMAR]}


_BAR_ANY = re.sub(r"\(\?P<\w+>", "(?:", tqdm_grammar.BAR)


def _needle_filter(df: pl.DataFrame, needles: tuple[str, ...]) -> pl.DataFrame:
    return df.filter(shapes.contains_any(df, list(needles), ascii_case_insensitive=True))


def _split_bars(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(lines holding tqdm bar states, every line with those states cut out of `msg`).

    Captured logs glue other output onto a bar state (`...2.26it/s, loss=nan][deepscale] OVERFLOW!`,
    `...it/s]{'loss': ...}`): the bar is read by the tqdm grammar, the rest by the other grammars.
    A segment that ends with the bar's `]` and starts with it is only a bar (the usual case) and is not
    cut; text glued before a bar (its `\r` lost) is cut off and read like text glued after it.
    """
    bar_grammar = tqdm_grammar.GRAMMAR
    maybe = _needle_filter(df, bar_grammar.needles)
    if maybe.height == 0:
        return maybe, df
    bars = maybe.filter(shapes.contains(maybe, _MATCH[bar_grammar.name]))
    if bars.height == 0:
        return bars, df
    # Only a bar: ends with its `]` and starts at the first non-space (else text was glued before it).
    msg = bars.get_column("msg")
    only_bar = msg.str.ends_with("]") & (msg.str.find(_BAR_ANY) <= msg.str.find(r"\S")).fill_null(True)
    glued = bars.filter(~only_bar).select("_i", pl.col("msg").str.replace_all(tqdm_grammar.BAR, " ").str.strip_chars().alias("_rest"))
    rest = df.join(bars.filter(only_bar).select("_i"), on="_i", how="anti", maintain_order="left")
    if glued.height:
        rest = (
            rest.join(glued, on="_i", how="left", maintain_order="left")
            .with_columns(pl.coalesce("_rest", "msg").alias("msg"))
            .drop("_rest")
            .filter(pl.col("msg").str.len_bytes() > 0)
        )
        if shapes.SHAPE in rest.columns:  # the cut lines have new text, so new shapes
            rest = shapes.with_shape(rest)
    return bars, rest


def _bars_needed(bars: pl.DataFrame, df: pl.DataFrame) -> pl.DataFrame:
    """The bar segments worth parsing: those with a postfix (`=`), and the ones steps.py may use as an
    HF dict's step: the last before the dict on its line, the first of each of the two lines after,
    the last of each of the two lines above (a long run redraws its bar far more often than it logs),
    and every bar of the chunk's first and last lines (the dict they serve may be in the next chunk)."""
    # `=`: a postfix; `: `: a `set_postfix_str` postfix or a metric in the description (tqdm.desc_rows).
    has_post = bars.get_column("msg").str.contains_any(["=", ": "])
    # A dict on the chunk's last lines takes its step from bars at the start of the next chunk, and a
    # dict on the first lines from bars at the end of the previous one: bars of the two lines at
    # either edge are always kept, so a chunk boundary never changes a step.
    lo, hi = df.get_column("line").min(), df.get_column("line").max()
    edge = bars.get_column("line").is_between(lo, lo + 2) | bars.get_column("line").is_between(hi - 2, hi)
    dicts = df.filter(pl.col("msg").str.contains("{'", literal=True)).select("line", pl.col("seg").alias("_ds"))
    if dicts.height == 0:
        return bars.filter(has_post | edge)
    b = bars.select("_i", "line", "seg")
    per_line = b.group_by("line").agg(pl.col("seg").min().alias("_first"), pl.col("seg").max().alias("_last"))
    lines = dicts.get_column("line")
    after = per_line.filter(pl.col("line").is_in(pl.concat([lines + 1, lines + 2]).implode())).select("line", pl.col("_first").alias("seg"))
    above = per_line.filter(pl.col("line").is_in(pl.concat([lines - 1, lines - 2]).implode())).select("line", pl.col("_last").alias("seg"))
    before = (
        b.join(dicts, on="line").filter(pl.col("seg") <= pl.col("_ds"))
        .group_by("line", "_ds").agg(pl.col("seg").max()).select("line", "seg")
    )
    keys = pl.concat([after, above, before]).unique()
    context = b.join(keys, on=["line", "seg"], how="semi", maintain_order="left").get_column("_i")
    return bars.filter(has_post | edge | pl.col("_i").is_in(context.implode()))


def extract(cand: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Every metric row found in the candidate lines of one chunk (plus internal `_bar` rows)."""
    if cand.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    df = _join_wrapped_records(_unescape_pipes(cand.with_row_index("_i")))
    parts: list[pl.DataFrame] = []
    bars, remaining = _split_bars(df)
    if bars.height:
        # YOLO tables put an epoch's values in the bar description (columns from a header line).
        parts.append(yolo_grammar.table_rows(bars, df, state))
    bars = _bars_needed(bars, df) if bars.height else bars
    if bars.height:
        # Offsets of bars restarted each epoch come before any step is read from `n`.
        states = tqdm_grammar.run_offsets(tqdm_grammar.bar_states(bars), state)
        parts.append(tqdm_grammar.postfix_rows(states, state))
        parts.append(tqdm_grammar.desc_rows(states, state))
        # Bar states of undescribed bars: the step context of HF dicts (see steps.py).
        parts.append(tqdm_grammar.hf_bar_rows(states))
    for grammar in GRAMMARS:
        if remaining.height == 0:
            break
        claimed = _claims(remaining, grammar)
        if claimed is None:
            continue
        # Masks rather than joins on `_i`: the claimed lines leave `remaining` by one filter.
        parts.append(grammar.extract(remaining.filter(claimed), state))
        remaining = remaining.filter(~claimed)
    parts = [p for p in parts if p.height]
    if not parts:
        return pl.DataFrame(schema=SCHEMA)
    # One alias table for every grammar: `grdn` -> grad_norm, `data_s` -> data_time_ms (x1000), ...
    rows = _without_rounded_zero_lr(apply_aliases(pl.concat(parts)), df)
    # `_i` is the row number in `df`: its line, segment, rank and stamp are gathered, not joined.
    meta = df.select("line", "seg", "rank", "ts").gather(rows.get_column("_i"))
    return pl.concat([meta, rows.select("step", "name", "value", "source")], how="horizontal").select(list(SCHEMA)).cast(SCHEMA)


# An LR printed as zero with 2-5 decimals (`lr:0.0000`, `actor/lr:0.000`): a decayed LR rounded by the print format
# (argusswift/YOLOv4-pytorch#91: `lr:0.0000` late in a decay, answered "use {:06f}"), so it says only that the LR is
# below half a unit of its last digit. `0`, `0.0` (Python's repr of an exact zero), 6+ decimals and scientific
# notation (`0.000E+00`) are read as zero.
_ROUNDED_ZERO_LR = r"(?i)(?:^|[^a-z])(?:lr|learning[ _-]?rate)[\w/@.-]*['\"]?\s*[:=]?\s*\[?\s*0\.0{2,5}(?:[^\d.e]|$)"


def _without_rounded_zero_lr(rows: pl.DataFrame, df: pl.DataFrame) -> pl.DataFrame:
    """Drop `lr` rows whose zero is a rounding of the print format: it is no value of the LR."""
    zero = (rows.get_column("name") == "lr") & (rows.get_column("value") == 0)
    if not zero.any():
        return rows
    msg = df.get_column("msg").gather(rows.get_column("_i").filter(zero))
    rounded = pl.Series(np.zeros(rows.height, dtype=bool)).scatter(zero.arg_true(), msg.str.contains(_ROUNDED_ZERO_LR))
    return rows.filter(~rounded)


# A Megatron training record (`iteration N/ M | key: value | ... |`, formats.md §1.2) ends with ` |`; pasted from a page
# or a terminal of fixed width it wraps onto the next lines ([OBS] bigscience-workshop/bigscience
# train/tr11-176B-ml/chronicles.md: `... | learning` / ` rate: 4.475E-05 | ... | number of nan` / `iterations:  0 |
# samples per second: 19.474 | TFLOPs: 149.10 |`).
_WRAPPED_HEAD = r"\biteration\s+\d+/\s*\d+\s*\|"
_WRAP_LINES = 3


def _join_wrapped_records(df: pl.DataFrame) -> pl.DataFrame:
    """A record line that does not end with its closing `|`, followed on the very next lines by text that starts no
    record of its own, gets those lines appended (up to the one that closes it, at most `_WRAP_LINES`); they are then
    read as part of it and not again. A wrap between two words lost its space (`nan` / `iterations`), one inside a
    number never had one: a space is put back unless a digit meets a digit."""
    msg = pl.col("msg")
    open_head = msg.str.contains(_WRAPPED_HEAD) & ~msg.str.strip_chars_end().str.ends_with("|")
    if not df.select(open_head.any()).item():
        return df
    d = df.with_columns(open_head.alias("_open"), msg.str.contains(_WRAPPED_HEAD).alias("_head"),
                        msg.str.strip_chars_end().str.ends_with("|").alias("_closed"))
    # Mark continuation rows: the next line, starting no record, after a row that is an unclosed head or an
    # unclosed continuation. A chain is a few lines long: a fixed number of passes finds it.
    cont = pl.lit(False)
    d = d.with_columns(pl.lit(False).alias("_cont"))
    for _ in range(_WRAP_LINES):
        prev_open = (pl.col("_open") | pl.col("_cont")).shift(1) & ~pl.col("_closed").shift(1)
        cont = ~pl.col("_head") & (pl.col("line") == pl.col("line").shift(1) + 1) & prev_open.fill_null(False)
        d = d.with_columns(cont.alias("_cont"))
    if not d.get_column("_cont").any():
        return df
    grp = (~pl.col("_cont")).cum_sum().alias("_g")
    d = d.with_columns(grp)
    stripped = pl.when(pl.col("_cont")).then(msg.str.strip_chars_start()).otherwise(msg.str.strip_chars_end())
    joined = d.with_columns(stripped.alias("_m")).group_by("_g", maintain_order=True).agg(
        pl.col("_m").str.join("\u0000").alias("_joined"))
    # The separator marks each seam: a space back between words, nothing between the digits of a cut number.
    joined = joined.with_columns(pl.col("_joined").str.replace_all(r"(\d)\x00(\d)", "${1}${2}").str.replace_all("\x00", " "))
    out = d.filter(~pl.col("_cont")).join(joined, on="_g", how="left", maintain_order="left")
    out = out.with_columns(pl.col("_joined").alias("msg")).drop("_open", "_head", "_closed", "_cont", "_g", "_joined")
    out = out.with_row_index("_j").drop("_i").rename({"_j": "_i"}).select(df.columns)
    return shapes.with_shape(out) if shapes.SHAPE in df.columns else out


def _unescape_pipes(df: pl.DataFrame) -> pl.DataFrame:
    """`\\|` -> `|` in `msg`: lines pasted into a GitHub Markdown table (or escaped so the Markdown does
    not make one) hold `10%\\|██ \\| 50/500 [..]`, `iteration 10/ 100 \\| lm loss: ..`. The tqdm bar and the
    pipe-separated grammars read the plain `|`. One literal scan; lines without the escape are untouched."""
    esc = df.get_column("msg").str.contains("\\|", literal=True)
    if not esc.any():
        return df
    df = df.with_columns(pl.when(esc).then(pl.col("msg").str.replace_all("\\|", "|", literal=True)).otherwise(pl.col("msg")).alias("msg"))
    return shapes.with_shape(df) if shapes.SHAPE in df.columns else df


def _claims(df: pl.DataFrame, grammar: Grammar) -> pl.Series | None:
    """Which lines `grammar` claims (its needles, then its match regex on those only); None when none."""
    near = shapes.contains_any(df, list(grammar.needles), ascii_case_insensitive=True)
    if not near.any():
        return None
    pos = near.arg_true()
    hit = shapes.contains(df.gather(pos), _MATCH[grammar.name])
    if not hit.any():
        return None
    return pl.Series(np.zeros(df.height, dtype=bool)).scatter(pos.filter(hit), True)


def finalize(metrics: pl.DataFrame) -> pl.DataFrame:
    """File-level pass once all chunks are read: HF dict steps from the bars, SpeechBrain epoch losses the bar
    already gave, then line order."""
    if metrics.height == 0:
        return metrics
    out = speechbrain.drop_bar_repeats(assign_hf_steps(metrics))
    return out.sort("line", "seg", maintain_order=True)

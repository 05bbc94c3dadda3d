"""jiesutd's sequence-labelling evaluation lines (NCRFpp, LatticeLSTM and their forks): entity counts and span P/R/F.

`evaluate()` in jiesutd/NCRFpp main.py (the same in jiesutd/LatticeLSTM main.py) decodes every sentence, then
utils/metric.py `get_ner_fmeasure` prints the entity counts it found in the gold and the predicted tags,
`gold_num =  992  pred_num =  0  right_num =  0`, and main.py prints the split's line
`Dev: time: 2.86s, speed: 98.30st/s; acc: 0.8030, p: -1.0000, r: 0.0000, f: -1.0000` (token accuracy, span
precision, recall and F1; -1 where nothing was predicted or matched; [OBS] jiesutd/NCRFpp#5, #67, #82).
Rows: `<split>acc`, `<split>precision`, `<split>recall`, `<split>f1`, `<split>sentences` (time x speed: `speed` is
the sentences decoded per second of `time`) and, from the count line just above, `<split>gold_entities`,
`<split>pred_entities`, `<split>right_entities`; the split is `eval_` for Dev, `test_` for Test.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars.common import NUM, Grammar, num, shape

COUNTS = r"\bgold_num\s*=\s*(?P<gold>\d+)\s+pred_num\s*=\s*(?P<pred>\d+)\s+right_num\s*=\s*(?P<right>\d+)"
SPLIT_LINE = (rf"\b(?P<split>Dev|Test): time: (?P<time>{NUM})s, speed: (?P<speed>{NUM})st/s; acc: (?P<acc>{NUM}), "
              rf"p: (?P<p>{NUM}), r: (?P<r>{NUM}), f: (?P<f>{NUM})")
MATCH = f"{COUNTS}|{SPLIT_LINE}"
PREFIX = {"Dev": "eval_", "Test": "test_"}


def extract(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Span scores of each split line, and the entity counts of the count line right above it (same split)."""
    g = df.sort("_i").with_columns(pl.col("msg").str.extract_groups(SPLIT_LINE).alias("_s"),
                                   pl.col("msg").str.extract_groups(COUNTS).alias("_c")).unnest("_s", "_c")
    pre = pl.col("split").replace_strict(PREFIX, default=None, return_dtype=pl.String)
    # A count line belongs to the split line that follows it (get_ner_fmeasure prints before main.py's line).
    g = g.with_columns(pre.alias("_p")).with_columns(pl.col("_p").shift(-1).alias("_next"))
    scores = {"acc": "acc", "p": "precision", "r": "recall", "f": "f1"}
    split_rows = g.filter(pl.col("_p").is_not_null())
    rows = [split_rows.select("_i", pl.lit(None, pl.Int64).alias("step"), (pl.col("_p") + name).alias("name"), num(pl.col(col)).alias("value"))
            for col, name in scores.items()]
    rows.append(split_rows.select("_i", pl.lit(None, pl.Int64).alias("step"), (pl.col("_p") + "sentences").alias("name"),
                                  (num(pl.col("time")) * num(pl.col("speed"))).round(0).alias("value")))
    counts = g.filter(pl.col("gold").is_not_null() & pl.col("_next").is_not_null())
    for col, name in (("gold", "gold_entities"), ("pred", "pred_entities"), ("right", "right_entities")):
        rows.append(counts.select("_i", pl.lit(None, pl.Int64).alias("step"), (pl.col("_next") + name).alias("name"),
                                  pl.col(col).cast(pl.Float64).alias("value")))
    return shape(pl.concat(rows).sort("_i", maintain_order=True), "span_f1")


GRAMMAR = Grammar("span_f1", ("gold_num", "st/s; acc: "), MATCH, extract)

"""Ultralytics (YOLOv8/11) and YOLOv5 (>= v6.2) training tables: a header line, then a tqdm bar per epoch
whose description holds that epoch's running values.

    [OBS] ultralytics#21765, ultralytics#7653:
          Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size
           9/55      9.02G     0.1295      7.585      3.256         16        640: 100%|██████████| 954/954 [11:32<00:00,  1.38it/s]

The columns come from the nearest header line above (detect, segment, pose and classify runs print
different loss columns; YOLOv5 prints `obj_loss`), kept across chunks in `state`. Loss columns keep their
names (`box_loss`, ...; a classify run's single `loss` is the loss); `GPU_mem` is
`memory_reserved() / 1e9` GB -> `mem_reserved_mib`; `Instances` and `Size` (labels in the batch, image
size) are not metrics. Step: `(epoch - 1) * batches + n` (ultralytics prints the epoch from 1; tables with
an objectness column, YOLOv3/v5/v7, from 0: `epoch * batches + n`); redraws of one step keep the last
(tqdm.py's rule).

Older tables (ultralytics/yolov3 and YOLOv5 before v6.2, WongKinYiu/yolov7 `train.py`; [OBS] yolov7#251) print
`('Epoch', 'gpu_mem', 'box', 'obj', 'cls', 'total', 'labels', 'img_size')` (yolov3: `GIoU` for `box`,
`targets` for `labels`; YOLOv5 dropped `total` later), the epoch 0-based as `0/299`: the bare part names are
the loss parts (`box` -> `box_loss`), `total` their sum, the loss; `labels`/`targets` are counts.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.metric_grammars import tqdm as tqdm_grammar
from forensics.parsers.metric_grammars.common import empty_rows, num

HEADER = r"(?i)^\s*Epoch\s+GPU_mem(?:\s+[\w()-]+)+\s*$"
# A bar description that is a table row: `9/55  9.02G  0.1295 ...  640` (the `:` before the bar is cut).
ROW = r"^\s*\d+/\d+\s+[\d.]+G(?:\s+(?:[-+\d.eE]+|nan|inf))+\s*:?\s*\d"
NOT_METRICS = {"epoch", "instances", "size", "labels", "img_size", "targets"}


def table_rows(bars: pl.DataFrame, df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Rows of the YOLO table bars among `bars` (bar segments of a chunk), columns named by the headers in `df`."""
    # Cheap literal tests first: most runs never print a YOLO header, and then nothing else is done.
    headers = df.filter(pl.col("msg").str.contains("(?i)gpu_mem"))
    headers = headers.filter(pl.col("msg").str.contains(HEADER)) if headers.height else headers
    prev = state.get("yolo_header")
    if headers.height:
        state["yolo_header"] = headers.get_column("msg").str.strip_chars().str.split(" ").list.eval(
            pl.element().filter(pl.element() != "")).to_list()[-1]
    elif prev is None:
        return empty_rows()
    rows_bars = bars.filter(pl.col("msg").str.contains(ROW))
    if rows_bars.height == 0:
        return empty_rows()
    states = tqdm_grammar.bar_states(rows_bars, wide=True).join(rows_bars.select("_i", "line"), on="_i", how="left")
    cols = headers.select(
        pl.col("line").alias("_hl"),
        pl.col("msg").str.strip_chars().str.to_lowercase().str.split(" ").list.eval(pl.element().filter(pl.element() != "")).alias("_cols"),
    ).sort("_hl")
    if prev is not None:
        first = pl.DataFrame({"_hl": [-1], "_cols": [[c.lower() for c in prev]]}, schema=cols.schema)
        cols = pl.concat([first, cols])
    vals = states.sort("line").join_asof(cols, left_on="line", right_on="_hl", strategy="backward", check_sortedness=False)
    vals = vals.filter(pl.col("_cols").is_not_null()).with_columns(
        pl.col("desc").str.strip_chars().str.strip_chars_end(":").str.split(" ").list.eval(
            pl.element().filter(pl.element() != "")).alias("_vals"),
    ).filter(pl.col("_vals").list.len() == pl.col("_cols").list.len())
    if vals.height == 0:
        return empty_rows()
    epoch = pl.col("_vals").list.first().str.extract(r"^(\d+)/", 1).cast(pl.Int64, strict=False)
    # Anchor-based tables (YOLOv3/v5/v7: an objectness column) print the epoch from 0 (`0/299`); ultralytics
    # YOLOv8+ prints `epoch + 1`.
    base = pl.when(pl.col("_cols").list.contains("obj") | pl.col("_cols").list.contains("obj_loss")).then(0).otherwise(1)
    vals = vals.with_columns(((epoch - base) * pl.col("total") + pl.col("n")).alias("step"), pl.lit("yolo").alias("_dk"))
    long = vals.select("_i", "_b", "rank", "_dk", "step", "_cols", "_vals").explode("_cols", "_vals")
    long = long.filter(~pl.col("_cols").is_in(list(NOT_METRICS)))
    is_mem = pl.col("_cols") == "gpu_mem"
    raw = num(pl.col("_vals").str.strip_suffix("G"))
    # Old tables name the parts bare (`box`, `obj`, `cls`, `giou`) and their sum `total`.
    name = (
        pl.when(is_mem).then(pl.lit("mem_reserved_mib"))
        .when(pl.col("_cols") == "total").then(pl.lit("loss"))
        .when(~pl.col("_cols").str.contains("loss")).then(pl.col("_cols") + "_loss")
        .otherwise(pl.col("_cols"))
    )
    out = long.select(
        "_i", "_b", "rank", "_dk", "step",
        name.alias("name"),
        pl.when(is_mem).then(raw * 1e9 / 2**20).otherwise(raw).alias("value"),
    ).filter(pl.col("value").is_not_null())
    out = tqdm_grammar._dedupe(out.sort("_b"), state)
    return out.with_columns(pl.lit("yolo").alias("source"))

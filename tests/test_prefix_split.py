"""split_prefixes (column-wise, steps skipped when no row needs them) equals the plain peel-by-peel reading.

The reference below is the straightforward algorithm: peel two rank prefixes, take the time stamp
of the first log-record prefix that matches, strip that prefix, then one more rank prefix or
ProcessGroupNCCL's rank marker. Lines are literal formats.md §0.1/§2.4/§2.5 prefixes.
"""

from __future__ import annotations

import datetime as dt

import polars as pl
from forensics.parsers import prefixes as P
from polars.testing import assert_frame_equal

UTC = dt.timezone.utc


def reference(df: pl.DataFrame, year: int) -> pl.DataFrame:
    out = df.with_columns(pl.col("text").alias("msg"), pl.lit(None, pl.Int32).alias("rank"), pl.lit(None, pl.Int32).alias("_local"))
    for _ in range(2):
        # torchrun's `[defaultN]:` is a local rank: it counts only where nothing else on the line names one.
        found = pl.col("msg").str.extract(P.RANK_PREFIX, 1).cast(pl.Int32, strict=False)
        is_local = pl.col("msg").str.starts_with("[default")
        out = out.with_columns(
            pl.coalesce(pl.col("rank"), pl.when(~is_local).then(found)).alias("rank"),
            pl.coalesce(pl.col("_local"), pl.when(is_local).then(found)).alias("_local"),
            pl.col("msg").str.replace(P.RANK_PREFIX, ""),
        )
    parts = [P._ts_expr(pl.col("msg").str.extract(p, 1), kind, year) for _, p, kind in P.LOG_PREFIXES if kind]
    # DeepSpeed/axolotl `[Rank N]` ending the record prefix's bracket run: cut after it, keep N.
    in_run = pl.col("msg").str.contains(P.DS_RANK_PREFIX)
    out = out.with_columns(
        pl.coalesce(parts).alias("_iso"), pl.col("msg").str.extract(P.DS_RANK_PREFIX, 1).cast(pl.Int32).alias("_ds")
    ).with_columns(
        P.parse_iso(pl.col("_iso")).alias("ts"),
        pl.when(in_run).then(pl.col("msg").str.replace(P.DS_RANK_PREFIX, "")).otherwise(pl.col("msg").str.replace(P.ANY_LOG_PREFIX, "")),
    ).drop("_iso")
    out = out.with_columns(
        pl.coalesce(
            pl.col("rank"),
            pl.col("_ds"),
            pl.col("msg").str.extract(P.RANK_PREFIX, 1).cast(pl.Int32, strict=False),
            pl.col("msg").str.extract(P.INNER_RANK, 1).cast(pl.Int32, strict=False),
            pl.col("msg").str.extract(P.INNER_RANK, 2).cast(pl.Int32, strict=False),
            pl.col("_local"),
        ).alias("rank"),
        pl.col("msg").str.replace(P.RANK_PREFIX, ""),
    )
    return out.drop("_ds", "_local").select(*df.columns, "msg", "rank", "ts")


RANKS = ["", "[rank3]:", "[rank3]: ", "[default5]:", "[Rank 12] ", "[RANK:7] ", "[default0]:[rank0]: ", "[rank99999999999]:"]
RECORDS = [
    "",
    "[2023-04-28 06:51:29,903] [INFO] [loss_scaler.py:188:update_scale] ",
    # axolotl verbose: `[PID:n]` then `[RANK:n]` only for a non-zero LOCAL_RANK (formats.md §0.1 [SRC]).
    "[2025-03-01 10:00:00,123] [INFO] [axolotl.train.train:50] [PID:3153] [RANK:1] ",
    "[2025-03-01 10:00:00,123] [INFO] [logging.py:128:log_dist] [Rank -1] ",
    "[2024-04-10 16:02:56,193] torch.distributed.elastic.multiprocessing.api: [WARNING] ",
    "W0801 13:23:17.366000 32974 torch/distributed/elastic/multiprocessing/api.py:900] ",
    "[E ProcessGroupNCCL.cpp:563] ",
    "[E810 03:04:11.061727749 ProcessGroupNCCL.cpp:683] ",
    "[titan] 2026-02-24 19:46:17,508 - root - INFO - ",
    "2020-07-17 07:11:02 | INFO | train_inner | ",
    "WARNING:torch.distributed.run:",
    # Near misses and zone/fraction variants of the ISO form.
    "2025-03-01T10:00:00.123456789+05:30 - INFO - x: ",
    "2025-03-01 10:00:00-0530",
    "2025-03-01 10:00:00Z ",
    "[2025-13-45 99:99:99] [INFO] ",
    "E810 03:04:11.061727 1 f.cc:1] ",
]
MESSAGES = [
    "[PG 0 Rank 7] Timeout at NCCL work: 1, last enqueued NCCL work: 1, last completed NCCL work: 3452013982.",
    "[PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 808",
    "[Rank 0] step=2000, skipped=1995, lr=[0.001, 0.001], mom=[0.0, 0.0]",
    "step:  4  loss:  7.62585  grad_norm: 26.6250",
    "",
]


def _frame() -> pl.DataFrame:
    texts = [a + b + c + m for a in RANKS for b in RECORDS for c in ("", "[rank2]:") for m in MESSAGES]
    return pl.DataFrame({"line": range(1, len(texts) + 1), "text": texts})


def test_split_prefixes_equals_peel_by_peel_reading():
    df = _frame()
    assert_frame_equal(P.split_prefixes(df, 2025), reference(df, 2025))


def test_split_prefixes_on_frames_where_no_row_has_a_prefix_kind():
    # Steps are skipped when no row needs them; each subset must still give the reference result.
    df = _frame()
    for pattern in ("^\\[rank", "^W0801", "^\\[titan", "PG ID", "^2020"):
        sub = df.filter(pl.col("text").str.contains(pattern))
        assert_frame_equal(P.split_prefixes(sub, 2024), reference(sub, 2024))
    empty = df.head(0)
    assert_frame_equal(P.split_prefixes(empty, 2024), reference(empty, 2024))


def test_split_prefixes_values():
    df = pl.DataFrame({"text": [
        "[rank1]:[E810 03:04:11.061727749 ProcessGroupNCCL.cpp:683] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception",
        "[default0]:[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585",
        "[2023-04-28 06:51:29,903] [INFO] [logging.py:96:log_dist] [Rank 0] step=510, skipped=8",
        "W0801 13:23:17.366000 32974 torch/distributed/elastic/multiprocessing/api.py:900] [PG 0 Rank 7] Timeout",
        "2025-03-01 10:00:00-0530",
    ]})
    out = P.split_prefixes(df, 2024).to_dicts()
    assert [(r["rank"], r["msg"]) for r in out] == [
        (1, "[PG ID 0 PG GUID 0(default_pg) Rank 1] Exception"),
        (0, "step:  4  loss:  7.62585"),
        # DeepSpeed `log_dist`: `[Rank 0]` ends the record prefix's bracket run.
        (0, "step=510, skipped=8"),
        (7, "[PG 0 Rank 7] Timeout"),
        (None, "0530"),
    ]
    assert [r["ts"] for r in out] == [
        dt.datetime(2024, 8, 10, 3, 4, 11, 61727, tzinfo=UTC),
        dt.datetime(2026, 2, 24, 19, 46, 17, 508000, tzinfo=UTC),
        dt.datetime(2023, 4, 28, 6, 51, 29, 903000, tzinfo=UTC),
        dt.datetime(2024, 8, 1, 13, 23, 17, 366000, tzinfo=UTC),
        # The zone is given back to the separator (`-`): the stamp is read without it.
        dt.datetime(2025, 3, 1, 10, 0, 0, tzinfo=UTC),
    ]

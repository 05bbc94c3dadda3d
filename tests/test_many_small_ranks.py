"""A run of hundreds of tiny rank logs: the series helpers read it in batches of whole ranks and decide as rank by rank."""

from __future__ import annotations

import polars as pl
import pytest
from forensics.playbooks import metric_series as M
from forensics.playbooks import timeseries as ts

from forensics.contracts.context import Context
from forensics.engine import analyze
from forensics.ingest import ingest
from tests.helpers import write_run

LONG_RANK = 7


def _run(tmp, spike: float | None, ranks: int = 300):
    """`ranks` one- to three-line rank logs, and one rank with 60 steps whose step 400 is `spike` times its level."""
    files = {}
    for r in range(ranks):
        if r == LONG_RANK:
            lines = [f"step {s * 10} loss {2.0 - s * 0.004 + (0.01 if s % 2 else -0.01):.4f} lr 0.0001" for s in range(60)]
            if spike is not None:
                lines[40] = f"step 400 loss {1.84 * spike:.4f} lr 0.0001"
        else:
            # A short rank may jump 50x: with no baseline of its own, it is no spike of the windowed rule.
            lines = [f"step {r * 10 + k} loss {2.0 * (50 if k == 2 else 1):.4f} lr 0.0001" for k in range(1 + r % 3)]
        files[f"rank{r}.log"] = "\n".join(lines) + "\n"
    return Context(ingest(write_run(tmp, files)))


@pytest.fixture
def small_batches(monkeypatch):
    """Batches and stored pieces of a few dozen rows, so that the ranks of a small run span many of them."""
    monkeypatch.setattr(M, "BATCH_ROWS", 40)
    monkeypatch.setattr(ts, "PART_ROWS", 64)


def test_batches_hold_whole_ranks_in_series_order_and_make_up_the_series(tmp_path, small_batches):
    ctx = _run(tmp_path, spike=None)
    whole = M.series(ctx, M.LOSS, finite=True)
    batches = list(M.series_batches(ctx, M.LOSS, finite=True))
    assert pl.concat(batches).equals(whole)
    assert 3 <= len(batches) < 300  # many ranks to a batch, and more than one batch
    seen = [b.get_column("rank").unique(maintain_order=True).to_list() for b in batches]
    flat = [r for ranks in seen for r in ranks]
    assert flat == sorted(flat) and len(flat) == len(set(flat)) == 300  # no rank cut between two batches
    assert max(b.height for b in batches) < 40 + 60  # a batch ends at the first end of a rank past the size
    ranks = list(M.series_ranks(ctx, M.LOSS, finite=True, cols=("rank", "step", "value")))
    assert [p.get_column("rank").n_unique() for p in ranks] == [1] * 300
    assert pl.concat(ranks).equals(whole.select("rank", "step", "value"))


def test_row_readers_over_batches_give_the_rows_of_the_whole_series(tmp_path, small_batches):
    ctx = _run(tmp_path, spike=None)
    whole = M.series(ctx, M.LOSS, finite=True)
    late = pl.col("step") >= 2500
    got, n = M.series_where(ctx, M.LOSS, late, finite=True)
    assert n == whole.height and got.equals(whole.filter(late)) and got.height > 0
    assert M.series_columns(ctx, M.LOSS, ("rank", "value"), where=late, finite=True).equals(whole.filter(late).select("rank", "value"))
    low, n = M.series_lowest_rank(ctx, M.LOSS, finite=True)
    assert n == whole.height and low.equals(whole.filter(pl.col("rank") == 0))
    again, n = M.series_lowest_rank(ctx, M.LOSS, finite=True)  # found once per run, then read back
    assert n == whole.height and again.equals(low) and again.schema == low.schema
    assert M.series_rank(ctx, M.LOSS, LONG_RANK, finite=True).equals(whole.filter(pl.col("rank") == LONG_RANK))
    assert M.series_rank(ctx, M.LOSS, 12345, finite=True).height == 0


def test_a_spike_on_one_long_rank_is_found_among_hundreds_of_one_line_ranks(tmp_path, small_batches):
    found = {f.id: f for f in analyze(_run(tmp_path, spike=8.0)).findings}
    spike = found["loss-spike"]
    assert spike.ranks == [LONG_RANK]
    assert (spike.facts["first_step"], spike.facts["spikes"]) == (400, 1)
    assert spike.evidence[-1].file == f"rank{LONG_RANK}.log"


def test_short_ranks_that_jump_without_a_baseline_and_a_long_rank_without_a_spike_stay_quiet(tmp_path, small_batches):
    assert "loss-spike" not in {f.id for f in analyze(_run(tmp_path, spike=None)).findings}


def _pieces() -> list[pl.DataFrame]:
    def rank(r, steps):
        return pl.DataFrame({"rank": [r] * len(steps), "step": steps, "value": [1.0] * len(steps)},
                            schema={"rank": pl.Int32, "step": pl.Int64, "value": pl.Float64})
    return [rank(0, [1, 2]), rank(1, [1]), rank(1, [2, 3]), rank(2, []), rank(3, [5]), rank(None, [1, 2, 3])]


def test_joined_puts_ranks_together_but_never_two_pieces_of_one_rank():
    out = list(ts.joined(_pieces(), limit=10))
    # Rank 1 came in two pieces (windows of its steps): they stay apart; the empty piece is left out.
    assert [b.get_column("rank").to_list() for b in out] == [[0, 0, 1], [1, 1, 3, None, None, None]]
    assert [b.get_column("rank").to_list() for b in ts.joined(_pieces(), limit=3)] == [[0, 0, 1], [1, 1, 3], [None] * 3]
    empty = list(ts.joined([_pieces()[3], _pieces()[3]]))
    assert len(empty) == 1 and empty[0].height == 0 and empty[0].columns == ["rank", "step", "value"]


def test_onset_over_batches_of_tiny_ranks_is_the_onset_of_the_whole(tmp_path, small_batches):
    ctx = _run(tmp_path, spike=None)
    hot = pl.col("value") > 50
    want = ts.onset(M.series(ctx, M.LOSS), hot, 1)
    assert want is not None and want.rank == 2  # the first short rank that jumps
    assert ts.onset_over(M.series_ranks(ctx, M.LOSS), hot, 1) == want
    assert ts.onset_over(M.series_ranks(ctx, M.LOSS), hot, 2) is None  # every jump is one point

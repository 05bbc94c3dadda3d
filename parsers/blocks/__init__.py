"""Multi-line blocks as single events: Python tracebacks, C++ frame dumps, torchrun reports, nvidia-smi tables.

Block openers are found among the prefilter's candidate lines (vectorised). The lines that
continue a block carry the same prefix as its opener (`[rank3]: `, `[default0]:`, `stderr: `,
a pdsh host name, or nothing), so blocks of ranks that interleave in one stream are assembled
per prefix. Each opener's block is classified with vectorised string tests over a bounded
window; Python iterates over the (sparse) openers only, never over all lines.

One module per block kind, each a `read(frame, cand, found)` over the opener loop of common.py;
`extract` runs them in order, each seeing the blocks the kinds before it found.
"""

from __future__ import annotations

import polars as pl
from forensics.parsers.blocks import cpp_dumps, notebook, reports, smi_tables, tails, tracebacks
from forensics.parsers.blocks.common import prefix_pattern
from forensics.parsers.blocks.stamps import stamp_from_record_above
from forensics.parsers.signatures import SCHEMA

# Order matters: tails skips exception lines inside the tracebacks read before it.
KINDS = (tracebacks, notebook, tails, cpp_dumps, reports, smi_tables)
# The prefilter's needles: a candidate line holding one of them may open a block.
NEEDLES = [tracebacks.NEEDLE, cpp_dumps.NEEDLE, reports.NEEDLE, smi_tables.NEEDLE]

__all__ = ["KINDS", "NEEDLES", "extract", "prefix_pattern"]


def extract(frame: pl.DataFrame, cand: pl.DataFrame, year: int) -> pl.DataFrame:
    """Block events found in one frame (`cand` holds the prefix-split candidate lines)."""
    rows: list[dict] = []
    for kind in KINDS:
        rows += kind.read(frame, cand, rows)
    if not rows:
        return pl.DataFrame(schema=SCHEMA)
    stamp_from_record_above(frame, rows, year)
    return pl.DataFrame(rows, schema=SCHEMA).sort("line")

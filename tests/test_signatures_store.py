"""TCPStore client failures (rank cannot reach MASTER_ADDR:MASTER_PORT) in a recorded torch 2.13 log.

tests/recordings/store_connect_record.sh runs tests/recordings/store_connect.py: a store client whose
server never comes up, as a non-zero rank with a wrong MASTER_ADDR/PORT sees it.
"""

from __future__ import annotations

import json

import polars as pl

from tests.conftest import ROOT
from tests.helpers import frame, ingest_text

LOG = ROOT / "tests" / "recordings" / "events" / "store_connect_refused.log"


def test_recorded_store_connect_failure(tmp_path):
    run = ingest_text(tmp_path, LOG.read_text(encoding="utf-8"))
    ev = frame(run, "events").filter(pl.col("code").is_in(["store_connect_failed", "dist_network_error"])).sort("line", "code")
    got = [(r["line"], r["code"], r["severity"], json.loads(r["fields"]).get("stage"), json.loads(r["fields"]).get("attempt"))
           for r in ev.iter_rows(named=True)]
    n = LOG.read_text(encoding="utf-8").count("\n")
    assert got == [
        (1, "store_connect_failed", "error", "gave_up", None),  # socket.cpp: this attempt timed out
        (2, "store_connect_failed", "warning", "attempt", "0"),  # TCPStore.cpp: retrying
        (21, "store_connect_failed", "error", "gave_up", None),
        (22, "store_connect_failed", "error", "gave_up", "1"),  # TCPStore.cpp: timed out, no retry left
        # The exception's last line: the store's code and the generic DistNetworkError both.
        (n, "dist_network_error", "error", None, None),
        (n, "store_connect_failed", "error", "gave_up", None),
    ]
    last = ev.filter(pl.col("line") == n).row(0, named=True)
    assert json.loads(last["fields"])["detail"].startswith("The client socket has timed out after 3000ms")
    fields = json.loads(ev.row(1, named=True)["fields"])
    assert (fields["host"], fields["port"], fields["timeout_ms"]) == ("127.0.0.1", "29599", "3000")

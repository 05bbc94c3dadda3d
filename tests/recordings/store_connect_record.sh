#!/usr/bin/env bash
# Record torch's TCPStore client failure (nothing listens on the port): tests/recordings/events/store_connect_refused.log.
set -u
cd "$(dirname "$0")"
PY=${PY:-/work/recvenv/bin/python}
timeout 60 "$PY" store_connect.py 127.0.0.1 > events/store_connect_refused.log 2>&1
echo "store_connect exit $?"

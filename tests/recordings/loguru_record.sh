#!/usr/bin/env bash
# Record tests/recordings/events/loguru_traceback.log (loguru installed apart: pip install --target DIR loguru).
set -u
cd "$(dirname "$0")"
PY=${PY:-/work/recvenv/bin/python}
PYTHONPATH=${LOGURU_DIR:-/tmp/evw/loguru_pkg} "$PY" loguru_record.py > events/loguru_traceback.log 2>&1
echo "exit $?"

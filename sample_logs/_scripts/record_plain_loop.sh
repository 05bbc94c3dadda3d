#!/bin/sh
# Records sample_logs/healthy/plain-loop/train.log with /work/recvenv.
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
out="$here/healthy/plain-loop"
mkdir -p "$out"
OMP_NUM_THREADS=1 /work/recvenv/bin/python "$here/_scripts/record_plain_loop.py" > "$out/train.log" 2>&1

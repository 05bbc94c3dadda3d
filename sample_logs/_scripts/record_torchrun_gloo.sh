#!/bin/sh
# Records sample_logs/healthy/torchrun-gloo/ with /work/recvenv: torchrun's console (console.log,
# `[defaultN]:`-prefixed by --tee) and its --log-dir per-rank files (logs/<run>/attempt_0/<rank>/...).
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
out="$here/healthy/torchrun-gloo"
rm -rf "$out" && mkdir -p "$out"
cd "$out"
OMP_NUM_THREADS=1 /work/recvenv/bin/torchrun --nproc_per_node=2 --master_port=29533 --rdzv-id=gloo-demo \
  --log-dir logs --tee 3 "$here/_scripts/record_torchrun_gloo.py" > console.log 2>&1

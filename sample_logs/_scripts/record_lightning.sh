#!/bin/sh
# Records sample_logs/healthy/lightning/ (console with the tqdm bar, plus CSVLogger metrics.csv) with /work/recvenv.
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
out="$here/healthy/lightning"
rm -rf "$out" && mkdir -p "$out"
PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 /work/recvenv/bin/python "$here/_scripts/record_lightning.py" "$out" > "$out/train.log" 2>&1

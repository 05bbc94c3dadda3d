#!/bin/sh
# Records sample_logs/healthy/hf-trainer/ (console log + trainer_state.json) with /work/recvenv.
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
out="$here/healthy/hf-trainer"
mkdir -p "$out"
PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 /work/recvenv/bin/python "$here/_scripts/record_hf_trainer.py" "$out" > "$out/train.log" 2>&1

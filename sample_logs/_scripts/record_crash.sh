#!/bin/bash
# Re-records the crash-playbook sample folders (sample_logs/<id>*/). Usage: record_crash.sh NAME...
# Needs the recording venv (torch CPU, transformers, peft, accelerate): PY=/work/recvenv/bin/python.
# Every sample is a real run on CPU (gloo for multi-rank); where a playbook's evidence only exists on a
# GPU, the script prints the GPU text at the moment the CPU run hits the equivalent event (see each script).
set -u
S="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$S")"
PY="${PY:-/work/recvenv/bin/python}"
TORCHRUN="$(dirname "$PY")/torchrun"
export PYTHONDONTWRITEBYTECODE=1

fresh() { rm -rf "$ROOT/$1"; mkdir -p "$ROOT/$1"; echo "$ROOT/$1"; }

rec_cuda_oom() {
  # 4 ranks; rank 3 OOMs in step 121 and stays alive (non-daemon thread); ranks 0-2 hit the 10-minute
  # collective timeout and abort like the NCCL watchdog; torchrun reports the ChildFailedError.
  local d; d=$(fresh cuda-oom)
  (cd "$d" && RANK_LOG_DIR="$d" "$TORCHRUN" --nproc_per_node 4 "$S/crash_ddp.py" --scenario oom --gpu-text \
     --steps 200 --fail-rank 3 --fail-step 121 --timeout-s 600 --step-sleep 0.4 > launcher.log 2>&1)
  "$PY" "$S/crash_shift_time.py" "$d" --anchor rank3.log --anchor-pattern 'step: 120 ' --to '2026-11-22 02:11:05'
}

for name in "$@"; do
  "rec_${name//-/_}"
done

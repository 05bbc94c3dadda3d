#!/usr/bin/env bash
# Record real error output for tests/test_*events*: run with the torch CPU recording venv.
# Output: tests/recordings/events/<case>.log (stdout+stderr as a user would capture them).
set -u
cd "$(dirname "$0")"
PY=${PY:-/work/recvenv/bin/python}
TORCHRUN=${TORCHRUN:-/work/recvenv/bin/torchrun}
OUT=events
mkdir -p "$OUT"
if [ -z "${ONLY_TORCHRUN:-}" ]; then
for c in inplace inplace_anomaly embedding_index backward_twice shape_mismatch cpu_alloc \
         dataloader_killed dataloader_exception checkpoint_truncated nan_anomaly recompile; do
  timeout 120 "$PY" events_cases.py "$c" > "$OUT/$c.log" 2>&1
  echo "$c exit $?"
done
TORCH_LOGS=recompiles timeout 120 "$PY" events_cases.py recompile > "$OUT/recompile_logs.log" 2>&1; echo "recompile_logs exit $?"
fi
export OMP_NUM_THREADS=1
port=29611
for mode in raise kill mismatch; do
  rm -rf "$OUT/torchrun_$mode"; mkdir -p "$OUT/torchrun_$mode"
  extra=()
  [ "$mode" = mismatch ] && export TORCH_DISTRIBUTED_DEBUG=DETAIL || unset TORCH_DISTRIBUTED_DEBUG
  MODE=$mode timeout 180 "$TORCHRUN" --nproc-per-node 2 --master-port $port --log-dir "$OUT/torchrun_$mode/logs" \
    --redirects 3 --tee 3 events_ddp.py > "$OUT/torchrun_$mode/console.log" 2>&1 || true
  port=$((port + 1))
  echo "torchrun $mode done"
done
# Plain console (no --tee): the [rankN]: excepthook prefix on interleaved tracebacks.
mkdir -p "$OUT/torchrun_plain"
MODE=raise timeout 180 "$TORCHRUN" --nproc-per-node 2 --master-port $port events_ddp.py > "$OUT/torchrun_plain/console.log" 2>&1 || true
echo "torchrun plain done"

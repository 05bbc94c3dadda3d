#!/bin/sh
# Records the trace samples (torch.profiler / VizTracer on CPU) with a venv holding CPU torch (RECVENV, default /work/recvenv):
# each folder gets the trace plus the run's stdout as train.log.
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
rec() {  # scenario folder
    mkdir -p "$here/$2"
    OMP_NUM_THREADS=1 "${RECVENV:-/work/recvenv}/bin/python" "$here/_scripts/record_traces.py" "$1" "$here/$2" > "$here/$2/train.log" 2>&1
    # VizTracer traces are mostly embedded source text (file_info): store them gzipped.
    if [ -f "$here/$2/viztracer.json" ]; then gzip -9f "$here/$2/viztracer.json"; fi
}
rec dataloader-slow dataloader-bottleneck/profiler-trace
rec dataloader-light dataloader-bottleneck/nearmiss
rec item-sync host-device-sync/cpu-only-trace-nearmiss
rec item-sync-rare host-device-sync/nearmiss
rec healthy healthy/trace-profiler
rec race autograd-race/shared-model-trace
rec race-locked autograd-race/nearmiss
rec viz-healthy healthy/trace-viztracer
rec small-ops kernel-launch-bound/cpu-only-trace-nearmiss
rec gloo-ddp comm-compute-no-overlap/cpu-gloo-trace-nearmiss

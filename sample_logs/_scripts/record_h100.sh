#!/bin/sh
# Records the H100 run folders of record_h100.py on the lent GPU machine (see its docstring), from the
# repo root there:  sh sample_logs/_scripts/record_h100.sh "$OUT"
# Each folder holds the console (stdout+stderr) as its training log and, for the Trainer runs, the
# nvidia-smi samples taken while it ran. The folders come back as one tarball (h100_runs.tar.gz).
out=${1:?output folder}
here=$(cd "$(dirname "$0")" && pwd)
rec="$here/record_h100.py"
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

# nvidia-smi as sites sample it beside a job: CSV every 250 ms, from the job's start to its end.
sample() {
    nvidia-smi --query-gpu=timestamp,index,name,pci.bus_id,driver_version,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.mem,clocks_throttle_reasons.active \
        --format=csv -lms 250 > "$1/nvidia-smi.csv" &
    echo $!
}

run_hf() {
    dir="$work/$1"; mkdir -p "$dir"
    pid=$(sample "$dir")
    sleep 1
    python3 "$rec" "$2" "$work/_out_$1" > "$dir/train.log" 2>&1
    echo "exit status $?" >&2
    sleep 1
    kill "$pid"
}

nvidia-smi > "$work/nvidia-smi-banner.txt" 2>&1
python3 -c "import torch, transformers; print(torch.__version__, torch.version.cuda, transformers.__version__, torch.cuda.get_device_name(0))" > "$work/versions.txt" 2>&1

run_hf h100-hf-oom hf-oom
run_hf h100-hf-clean hf-clean

mkdir -p "$work/h100-device-assert"
python3 "$rec" dsa > "$work/h100-device-assert/train.log" 2>&1
echo "dsa exit status $?" >&2

mkdir -p "$work/h100-nccl-duplicate-gpu"
NCCL_DEBUG=WARN timeout 300 python3 -m torch.distributed.run --nproc-per-node 2 "$rec" nccl-rank \
    > "$work/h100-nccl-duplicate-gpu/torchrun.log" 2>&1
echo "nccl exit status $?" >&2

rm -rf "$work"/_out_*
tar -C "$work" -czf "$out/h100_runs.tar.gz" .
ls -la "$work"/*

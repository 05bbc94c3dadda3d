#!/bin/sh
# Second batch recorded on the lent H100 (see record_h100.py): a real illegal memory access from a
# Triton kernel, and nvidia-smi's other outputs (-q, -q -x, dmon, pmon) taken while a job runs.
# From the repo root there:  sh sample_logs/_scripts/record_h100_more.sh "$OUT"   (add `trace` for the
# Kineto trace alone, `leak` for the leaking loop with dmon beside it).
out=${1:?output folder}
here=$(cd "$(dirname "$0")" && pwd)
rec="$here/record_h100.py"
work=$(mktemp -d)
export PYTHONUNBUFFERED=1
if [ "${2:-}" = leak ]; then
    # The leak run, with dmon sampling every second (`-o DT`: date and time columns) beside it.
    mkdir -p "$work/h100-memory-leak"
    nvidia-smi dmon -s pucvmet -o DT > "$work/h100-memory-leak/dmon.log" 2>&1 &
    mon=$!
    python3 "$rec" leak > "$work/h100-memory-leak/train.log" 2>&1
    echo "leak exit status $?" >&2
    sleep 2
    kill "$mon"
    cp -r "$work/h100-memory-leak" "$out/"
    ls -la "$out"/*
    exit 0
fi
if [ "${2:-}" = trace ]; then
    # A Kineto trace of three bf16 steps of the tiny Llama (torch.profiler, CUDA activities).
    python3 "$rec" trace "$work/h100_llama_bf16.pt.trace.json" > "$work/trace.log" 2>&1
    gzip -9 "$work/h100_llama_bf16.pt.trace.json"
    cp "$work"/h100_llama_bf16.pt.trace.json.gz "$work/trace.log" "$out/"
    ls -la "$out"
    exit 0
fi

mkdir -p "$work/h100-illegal-address" "$work/nvsmi"
python3 "$rec" illegal > "$work/h100-illegal-address/train.log" 2>&1
echo "illegal exit status $?" >&2

# A job to watch: the healthy Trainer run, while dmon/pmon sample and -q snapshots are taken.
python3 "$rec" hf-clean "$work/_hf" > "$work/nvsmi/hf.log" 2>&1 &
job=$!
nvidia-smi dmon -s pucvmet -o DT -c 12 > "$work/nvsmi/dmon.txt" 2>&1 &
nvidia-smi pmon -s um -o DT -c 12 > "$work/nvsmi/pmon.txt" 2>&1 &
sleep 4
nvidia-smi -q > "$work/nvsmi/q.txt" 2>&1
nvidia-smi -q -x > "$work/nvsmi/q.xml" 2>&1
nvidia-smi > "$work/nvsmi/table.txt" 2>&1
wait
rm -rf "$work/_hf"
tar -C "$work" -czf "$out/h100_more.tar.gz" .
ls -la "$work"/*

#!/bin/sh
# Records the training-dynamics samples sample_logs/<playbook-id>/<case>/ (cases.tsv) with /work/recvenv
# (torch CPU, transformers, peft). Usage: dynamics_record.sh [NAME ...]  (default: every sample).
# Each run's stdout+stderr is the sample's train.log (console.log for the torchrun ones); the HF Trainer
# runs add trainer_state.json; nondeterminism runs twice, the second run going to _baselines/<name>/.
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
scripts="$here/_scripts"
py=/work/recvenv/bin/python
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1

# fresh DIR: an empty folder, keeping a case's expect.toml.
fresh() { mkdir -p "$1" && find "$1" -mindepth 1 -maxdepth 1 ! -name expect.toml -exec rm -rf {} +; }
# case_dir NAME: the case folder of a recording scenario (cases.tsv); an unknown name stops the script.
case_dir() {
  awk -F '\t' -v n="$1" '$1 == n { print $2; f = 1 } END { exit !f }' "$scripts/cases.tsv" \
    || { echo "no case folder for $1 in cases.tsv" >&2; kill -TERM $$; exit 2; }
}

# rec NAME SCRIPT ARGS...: one single-process run into its case folder's train.log (a failing run is a sample too).
rec() {
  name=$1; script=$2; shift 2
  out="$here/$(case_dir "$name")"; fresh "$out"
  (cd "$scripts" && "$py" "$script" "$@" > "$out/train.log" 2>&1) || true
}

# dist NAME SCENARIO: a 2-rank gloo run under torchrun, as healthy-torchrun-gloo records it.
dist() {
  out="$here/$(case_dir "$1")"; fresh "$out"
  (cd "$out" && /work/recvenv/bin/torchrun --nproc_per_node=2 --master_port=29561 --rdzv-id="$2" \
     --log-dir logs --tee 3 "$scripts/dynamics_dist.py" "$2" > console.log 2>&1) || true
}

# twice NAME KIND: the nondeterminism run and its baseline (same seed, same config).
twice() {
  out="$here/$(case_dir "$1")"; fresh "$out"; fresh "$here/_baselines/$1"
  (cd "$scripts" && "$py" dynamics_nondeterminism.py "$2" > "$out/train.log" 2>&1)
  (cd "$scripts" && "$py" dynamics_nondeterminism.py "$2" > "$here/_baselines/$1/train.log" 2>&1)
}

# Samples of playbooks that other evidence (traces, nvidia-smi) also feeds carry a suffix naming their
# evidence (-metriclogger, -rss, ...), so they never collide with those folders.
one() {
  nm=""; case "$1" in *-nearmiss) nm="-nearmiss" ;; esac
  case "$1" in
    gradient-explosion*|vanishing-gradient*|clipping-saturation*) rec "$1" dynamics_gradient.py "$1" ;;
    nan-loss-hf) rec "$1" dynamics_numerical.py nan-loss-hf "$here/$(case_dir "$1")" ;;
    nan-loss*|fp16-overflow*|loss-scale-runaway*|loss-spike*|optimizer-state-drift*|logit-saturation*)
      rec "$1" dynamics_numerical.py "$1" ;;
    loss-stagnation*|lora-silent-zero*) rec "$1" dynamics_lm.py "$1" "$here/$(case_dir "$1")" ;;
    lr-schedule-anomaly*|class-imbalance*) rec "$1" dynamics_perf.py "$1" ;;
    dataloader-bottleneck-metriclogger*) rec "$1" dynamics_perf.py "dataloader-bottleneck$nm" ;;
    step-time-regression-bank*) rec "$1" dynamics_perf.py "step-time-regression$nm" ;;
    memory-leak-rss*) rec "$1" dynamics_perf.py "memory-leak$nm" ;;
    sampler-duplication*) dist "$1" "sampler-duplication$nm" ;;
    rank-straggler-gloo*) dist "$1" "rank-straggler$nm" ;;
    gradient-desync-nosync*) dist "$1" "gradient-desync$nm" ;;
    nondeterminism-workers) twice "$1" unseeded ;;
    nondeterminism-workers-nearmiss) twice "$1" seeded ;;
    *) echo "unknown sample $1" >&2; exit 2 ;;
  esac
}

ALL="gradient-explosion gradient-explosion-nearmiss vanishing-gradient vanishing-gradient-nearmiss
clipping-saturation clipping-saturation-nearmiss nan-loss nan-loss-hf nan-loss-nearmiss fp16-overflow
fp16-overflow-nearmiss loss-scale-runaway loss-scale-runaway-nearmiss loss-spike loss-spike-nearmiss
optimizer-state-drift optimizer-state-drift-nearmiss logit-saturation logit-saturation-nearmiss
loss-stagnation loss-stagnation-nearmiss lora-silent-zero lora-silent-zero-nearmiss lr-schedule-anomaly
lr-schedule-anomaly-nearmiss dataloader-bottleneck-metriclogger dataloader-bottleneck-metriclogger-nearmiss
step-time-regression-bank step-time-regression-bank-nearmiss memory-leak-rss memory-leak-rss-nearmiss
class-imbalance class-imbalance-nearmiss sampler-duplication sampler-duplication-nearmiss rank-straggler-gloo
rank-straggler-gloo-nearmiss gradient-desync-nosync gradient-desync-nosync-nearmiss nondeterminism-workers
nondeterminism-workers-nearmiss"

[ $# -eq 0 ] && set -- $ALL
for name in "$@"; do
  echo "recording $name" >&2
  one "$name"
done

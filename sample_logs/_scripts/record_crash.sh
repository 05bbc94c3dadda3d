#!/bin/bash
# Re-records the crash-playbook sample cases (sample_logs/<id>/<case>/, named in cases.tsv). Usage: record_crash.sh NAME...
# Needs the recording venv (torch CPU, transformers, peft, accelerate): PY=/work/recvenv/bin/python.
# Every sample is a real run on CPU (gloo for multi-rank); where a playbook's evidence only exists on a
# GPU, the script prints the GPU text at the moment the CPU run hits the equivalent event (see each script).
set -u
S="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$S")"
PY="${PY:-/work/recvenv/bin/python}"
TORCHRUN="$(dirname "$PY")/torchrun"
export PYTHONDONTWRITEBYTECODE=1

# case_dir NAME: the case folder of a recording scenario (cases.tsv); an unknown name stops the script.
case_dir() {
  awk -F '\t' -v n="$1" '$1 == n { print $2; f = 1 } END { exit !f }' "$S/cases.tsv" \
    || { echo "no case folder for $1 in cases.tsv" >&2; kill -TERM $$; exit 2; }
}
# fresh NAME: empty the case folder (its expect.toml stays) and print its path.
fresh() {
  local d; d="$ROOT/$(case_dir "$1")" || exit 2
  mkdir -p "$d" && find "$d" -mindepth 1 -maxdepth 1 ! -name expect.toml -exec rm -rf {} +
  echo "$d"
}

rec_cuda_oom() {
  # 4 ranks; rank 3 OOMs in step 121 and stays alive (non-daemon thread); ranks 0-2 hit the 10-minute
  # collective timeout and abort like the NCCL watchdog; torchrun reports the ChildFailedError.
  local d; d=$(fresh cuda-oom)
  (cd "$d" && RANK_LOG_DIR="$d" "$TORCHRUN" --nproc_per_node 4 "$S/crash_ddp.py" --scenario oom --gpu-text \
     --steps 200 --fail-rank 3 --fail-step 121 --timeout-s 600 --step-sleep 0.4 > launcher.log 2>&1)
  "$PY" "$S/crash_shift_time.py" "$d" --anchor rank3.log --anchor-pattern 'step: 120 ' --to '2026-11-22 02:11:05'
}

ddp() {  # ddp FOLDER PORT NPROC [torchrun-layout] -- crash_ddp args...
  local d=$1 port=$2 n=$3; shift 3
  if [ "$1" = "--torchrun-logs" ]; then
    shift
    (cd "$d" && "$TORCHRUN" --nproc_per_node "$n" --master-port "$port" --log-dir logs --redirects 3 \
       "$S/crash_ddp.py" "$@" > launcher.log 2>&1)
  else
    (cd "$d" && RANK_LOG_DIR="$d" "$TORCHRUN" --nproc_per_node "$n" --master-port "$port" "$S/crash_ddp.py" "$@" > launcher.log 2>&1)
  fi
}

rec_nccl_timeout() {
  # rank 2 is stuck 11 minutes in a dataset read at step 81; the other ranks' NCCL watchdogs fire after 600 s.
  local d; d=$(fresh nccl-timeout)
  ddp "$d" 29511 4 --scenario straggler --gpu-text --steps 150 --fail-rank 2 --fail-step 81 --stall-s 660 --timeout-s 600 --step-sleep 0.4
}

rec_nccl_timeout_gloo() {
  # the same straggler with gloo's own timeout text (real), torchrun --log-dir layout.
  local d; d=$(fresh nccl-timeout-gloo)
  ddp "$d" 29512 4 --torchrun-logs --scenario straggler --steps 150 --fail-rank 2 --fail-step 81 --stall-s 150 --timeout-s 90 --step-sleep 0.2
}

rec_nccl_timeout_nearmiss() {
  # healthy 4-rank run with NCCL_DEBUG=INFO init lines, the barrier-device warning and a 10-minute timeout configured.
  local d; d=$(fresh nccl-timeout-nearmiss)
  ddp "$d" 29513 4 --scenario healthy --gpu-text --steps 120 --timeout-s 600 --step-sleep 0.1
}

rec_silent_hang() {
  # rank 1 blocks forever in data loading at step 151; the 30-minute collective timeout never fires
  # because the job's 8-minute time limit (timeout -s TERM) kills torchrun first.
  local d; d=$(fresh silent-hang)
  (cd "$d" && RANK_LOG_DIR="$d" timeout -s TERM 480 "$TORCHRUN" --nproc_per_node 4 --master-port 29514 "$S/crash_ddp.py" \
     --scenario hang --steps 400 --fail-rank 1 --fail-step 151 --timeout-s 1800 --step-sleep 0.3 > launcher.log 2>&1)
}

rec_silent_hang_stackdump() {
  # 2 ranks, rank 1 stuck in data loading; faulthandler dumps every rank's stacks after 120 s without a step.
  local d; d=$(fresh silent-hang-stackdump)
  (cd "$d" && timeout -s TERM 300 "$TORCHRUN" --nproc_per_node 2 --master-port 29515 --log-dir logs --redirects 3 "$S/crash_ddp.py" \
     --scenario hang --steps 400 --fail-rank 1 --fail-step 61 --timeout-s 1800 --step-sleep 0.2 --dump-stacks-after 120 > launcher.log 2>&1)
}

rec_silent_hang_nearmiss() {
  # rank 0 evaluates for 150 s at step 100 while rank 1 waits in a barrier; training then finishes.
  local d; d=$(fresh silent-hang-nearmiss)
  ddp "$d" 29516 2 --scenario long-eval --steps 160 --fail-step 100 --stall-s 150 --timeout-s 1800 --step-sleep 0.2
}

one() {  # one FOLDER LOGNAME -- python script args... : a single process, stdout+stderr into FOLDER/LOGNAME
  local d=$1 logname=$2; shift 2
  (cd "$d" && "$PY" "$@" > "$logname" 2>&1)
}

rec_collective_mismatch() {
  local d; d=$(fresh collective-mismatch)
  (cd "$d" && TORCH_DISTRIBUTED_DEBUG=DETAIL RANK_LOG_DIR="$d" "$TORCHRUN" --nproc_per_node 4 --master-port 29521 \
     "$S/crash_collectives.py" --scenario mismatch --steps 120 --fail-step 57 --fail-rank 2 > launcher.log 2>&1)
}
rec_collective_mismatch_nearmiss() {
  local d; d=$(fresh collective-mismatch-nearmiss)
  (cd "$d" && TORCH_DISTRIBUTED_DEBUG=DETAIL RANK_LOG_DIR="$d" "$TORCHRUN" --nproc_per_node 4 --master-port 29522 \
     "$S/crash_collectives.py" --scenario detail-clean --steps 120 --fail-step 57 --fail-rank 2 > launcher.log 2>&1)
}
rec_gradient_desync() {
  local d; d=$(fresh gradient-desync)
  (cd "$d" && RANK_LOG_DIR="$d" "$TORCHRUN" --nproc_per_node 2 --master-port 29523 \
     "$S/crash_collectives.py" --scenario unused --steps 80 --fail-step 41 > launcher.log 2>&1)
}
rec_gradient_desync_info() {  # the same with TORCH_DISTRIBUTED_DEBUG=INFO: the error names the parameters
  local d; d=$(fresh gradient-desync-info)
  (cd "$d" && TORCH_DISTRIBUTED_DEBUG=INFO RANK_LOG_DIR="$d" "$TORCHRUN" --nproc_per_node 2 --master-port 29525 \
     "$S/crash_collectives.py" --scenario unused --steps 80 --fail-step 41 > launcher.log 2>&1)
}
rec_gradient_desync_nearmiss() {
  local d; d=$(fresh gradient-desync-nearmiss)
  (cd "$d" && RANK_LOG_DIR="$d" "$TORCHRUN" --nproc_per_node 2 --master-port 29524 \
     "$S/crash_collectives.py" --scenario unused-clean --steps 80 > launcher.log 2>&1)
}

rec_host_memory_exhaustion() { local d; d=$(fresh host-memory-exhaustion); one "$d" train.log "$S/crash_dataloader.py" --scenario killed --fail-index 3321; }
rec_host_memory_exhaustion_shm() { local d; d=$(fresh host-memory-exhaustion-shm); one "$d" train.log "$S/crash_dataloader.py" --scenario shm --fail-index 2210; }
rec_host_memory_exhaustion_cpu_alloc() { local d; d=$(fresh host-memory-exhaustion-cpu-alloc); one "$d" train.log "$S/crash_dataloader.py" --scenario cpu-alloc --fail-index 1402; }
rec_host_memory_exhaustion_nearmiss() { local d; d=$(fresh host-memory-exhaustion-nearmiss); one "$d" train.log "$S/crash_dataloader.py" --scenario healthy --iters 200; }
rec_bad_input_data_embedding() { local d; d=$(fresh bad-input-data-embedding); one "$d" train.log "$S/crash_dataloader.py" --scenario neg-pad --workers 2 --fail-index 1789; }

gpu() {  # gpu FOLDER SCENARIO [args]: crash_gpu_text.py with its side files written into FOLDER
  local d; d=$(fresh "$1"); local sc=$2; shift 2
  one "$d" train.log "$S/crash_gpu_text.py" --scenario "$sc" --out "$d" "$@"
}
rec_cuda_oom_nearmiss() { gpu cuda-oom-nearmiss oom-caught --steps 200 --fail-step 40 --step-sleep 0.05; }
rec_cuda_oom_other_process() { gpu cuda-oom-other-process oom-other-process --steps 300 --fail-step 180 --step-sleep 0.1; }
rec_allocator_fragmentation() { gpu allocator-fragmentation fragmentation --steps 400 --fail-step 263 --step-sleep 0.05; }
rec_allocator_fragmentation_nearmiss() { gpu allocator-fragmentation-nearmiss oom-tight --steps 300 --fail-step 151 --step-sleep 0.05; }
rec_device_assert() { gpu device-assert illegal-address --steps 300 --fail-step 187 --step-sleep 0.05; }
rec_device_assert_nearmiss() { local d; d=$(fresh device-assert-nearmiss); (cd "$d" && CUDA_LAUNCH_BLOCKING=1 TORCH_USE_CUDA_DSA=1 "$PY" "$S/crash_gpu_text.py" --scenario launch-blocking --steps 200 --step-sleep 0.05 --out "$d" > train.log 2>&1); }
rec_bad_input_data_device_assert() { gpu bad-input-data-device-assert labels-assert --steps 300 --fail-step 142 --step-sleep 0.05; }
rec_driver_runtime_mismatch() { gpu driver-runtime-mismatch driver-old; }
rec_driver_runtime_mismatch_arch() { gpu driver-runtime-mismatch-arch arch-mismatch; }
rec_driver_runtime_mismatch_nearmiss() {
  local d; d=$(fresh driver-runtime-mismatch-nearmiss)
  (cd "$d" && "$PY" -m torch.utils.collect_env > collect_env.txt 2>&1)
  one "$d" train.log "$S/crash_dataloader.py" --scenario healthy --workers 2 --iters 120
}
rec_gpu_hardware_fault_xid() { gpu gpu-hardware-fault-xid xid79 --steps 400 --fail-step 318 --step-sleep 0.05; }
rec_gpu_hardware_fault_clean_nearmiss() { gpu gpu-hardware-fault-clean-nearmiss ecc-clean --steps 200 --step-sleep 0.05; }
rec_cuda_context_corruption_threads() { gpu cuda-context-corruption-threads invalid-handle --steps 300 --fail-step 200 --step-sleep 0.05; }
rec_cuda_context_corruption_spawn_nearmiss() { gpu cuda-context-corruption-spawn-nearmiss spawn-clean --steps 200 --step-sleep 0.05; }
rec_device_mismatch() { gpu device-mismatch device-mismatch --steps 300 --fail-step 1 ; }
rec_device_mismatch_nearmiss() { gpu device-mismatch-nearmiss device-clean --steps 200 --step-sleep 0.05; }

rec_autograd_race_inplace() { local d; d=$(fresh autograd-race-inplace); one "$d" train.log "$S/crash_autograd.py" --scenario inplace; }
rec_autograd_race_backward_twice() { local d; d=$(fresh autograd-race-backward-twice); one "$d" train.log "$S/crash_autograd.py" --scenario backward-twice; }
rec_autograd_race_threads() { local d; d=$(fresh autograd-race-threads); one "$d" train.log "$S/crash_autograd.py" --scenario threads --iters 400; }
rec_autograd_race_anomaly_nearmiss() { local d; d=$(fresh autograd-race-anomaly-nearmiss); one "$d" train.log "$S/crash_autograd.py" --scenario anomaly-clean --iters 60; }

rec_compile_recompilation() { local d; d=$(fresh compile-recompilation); (cd "$d" && TORCH_LOGS=recompiles "$PY" "$S/crash_compile.py" --scenario recompile --iters 16 > train.log 2>&1); }
rec_compile_recompilation_nearmiss() { local d; d=$(fresh compile-recompilation-nearmiss); (cd "$d" && TORCH_LOGS=recompiles "$PY" "$S/crash_compile.py" --scenario once --iters 12 > train.log 2>&1); }

scratch() { local w; w=$(mktemp -d /tmp/crashrec.XXXXXX); chmod 755 "$w"; echo "$w"; }
rec_checkpoint_failure() {  # out/ not writable by the training user
  local d w; d=$(fresh checkpoint-failure); w=$(scratch); mkdir -p "$w/out"; chmod 555 "$w/out"; chmod 777 "$w"
  (cd "$w" && setpriv --reuid=65534 --regid=65534 --clear-groups "$PY" "$S/crash_checkpoint.py" --scenario readonly > "$d/train.log" 2>&1)
  rm -rf "$w"
}
rec_checkpoint_failure_disk_full() {
  local d w; d=$(fresh checkpoint-failure-disk-full); w=$(scratch); mkdir -p "$w/out"; ln -s /dev/full "$w/out/ckpt.pt"
  (cd "$w" && "$PY" "$S/crash_checkpoint.py" --scenario disk-full > "$d/train.log" 2>&1); rm -rf "$w"
}
rec_checkpoint_failure_truncated() {
  local d w; d=$(fresh checkpoint-failure-truncated); w=$(scratch); mkdir -p "$w/out"
  (cd "$w" && "$PY" "$S/crash_checkpoint.py" --scenario healthy --max-iters 255 > /dev/null 2>&1 && truncate -s $(( $(stat -c %s out/ckpt.pt) / 2 )) out/ckpt.pt \
     && "$PY" "$S/crash_checkpoint.py" --scenario truncated > "$d/train.log" 2>&1); rm -rf "$w"
}
rec_checkpoint_failure_trainer() {
  local d w; d=$(fresh checkpoint-failure-trainer); w=$(scratch); mkdir -p "$w/out"; chmod 555 "$w/out"; chmod 777 "$w"
  (cd "$w" && HOME="$w" setpriv --reuid=65534 --regid=65534 --clear-groups "$PY" "$S/crash_hf.py" --scenario readonly --out out > "$d/train.log" 2>&1); rm -rf "$w"
}
rec_checkpoint_failure_nearmiss() {
  local d w; d=$(fresh checkpoint-failure-nearmiss); w=$(scratch)
  (cd "$w" && "$PY" "$S/crash_hf.py" --scenario save-clean --out out > "$d/train.log" 2>&1); rm -rf "$w"
}
hf() { local d w; d=$(fresh "$1"); w=$(scratch); (cd "$w" && "$PY" "$S/crash_hf.py" --scenario "$2" --out out > "$d/train.log" 2>&1); rm -rf "$w"; }
rec_bad_input_data() { BAD_LABELS=123 hf bad-input-data labels; }
rec_bad_input_data_nearmiss() { hf bad-input-data-nearmiss labels-clean; }
rec_tokenizer_mismatch() { BAD_DOCS=123 hf tokenizer-mismatch tokenizer; }
rec_tokenizer_mismatch_nearmiss() { hf tokenizer-mismatch-nearmiss tokenizer-clean; }

# unclassified-failure: sample_logs/unclassified-failure/<case>/ (a plain Python failure; a caught one and Ctrl-C as near misses)
uf() { local d="$ROOT/unclassified-failure/$1"; mkdir -p "$d"; rm -f "$d/train.log"; (cd "$d" && "$PY" "$S/record_unclassified_failure.py" "$2" > train.log 2>&1); }
rec_unclassified_failure() { uf keyerror-in-loss keyerror; uf caught-keyerror-nearmiss caught; uf ctrl-c-nearmiss interrupt; }

for name in "$@"; do
  "rec_${name//-/_}"
done

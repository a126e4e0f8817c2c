#!/usr/bin/env bash
# failed_collective_runs.sh MPIRUN TERNION_TRAIN CONFIG TRAIN_BIN OUT_DIR
# Rank 1 of a 2-rank data-parallel run fails a collective (TERNION_INJECT_COMM_ERROR) while
# its peer is inside it, and the step goes on issuing collectives on that group before anyone
# waits for the failed one:
#   zero: its 3rd reduce_scatter (ZeRO-1's gradient reduction, step 2);
#   buckets: its 50th all_reduce (gradient buckets of 0.01 MB, one all_reduce each).
# The failure breaks the group on rank 1, so MPI never pairs those later operations with the
# peer's pending one (a larger message landing in a smaller buffer: heap corruption, a crash).
# The job must end within 30 s (parallel.comm_timeout_s is 20 s, the backstop), with exit
# status 1, rank 1 naming the failed operation once, and no crash.
set -u
mpirun=$1 train=$2 config=$3 data=$4 out=$5
rm -rf "$out"
mkdir -p "$out"
failed=0
run() {  # NAME INJECT REGEX ARGS...: the run with rank 1's fault, checked
  local name=$1 inject=$2 regex=$3 start end elapsed status count
  shift 3
  start=$(date +%s.%N)
  TERNION_INJECT_COMM_ERROR=$inject $mpirun -np 2 "$train" --config "$config" \
    --set "data.train=$data" --set training.sample_tokens=0 --set training.steps=20 \
    --set parallel.data=2 --set parallel.comm_timeout_s=20 --set "logging.flight_dir=$out/flight" \
    "$@" > "$out/$name.log" 2>&1
  status=$?
  end=$(date +%s.%N)
  elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  echo "$name: the job ended ${elapsed} s after it started, exit status $status"
  local problems=()
  [ "$status" -eq 1 ] || problems+=("exit status $status, expected 1")
  awk -v e="$elapsed" 'BEGIN { exit !(e <= 30) }' || problems+=("took ${elapsed} s, more than 30")
  count=$(grep -cE "$regex" "$out/$name.log")
  [ "$count" -eq 1 ] || problems+=("the failure is named $count times, expected once")
  local crash="corrupt|double free|free\(\)|Segmentation|signal (6|11)|Process received signal"
  grep -qE "$crash|MPI Error in NBC|terminate called" "$out/$name.log" && problems+=("crashed")
  if [ "${#problems[@]}" -gt 0 ]; then
    cat "$out/$name.log"
    printf "FAILED: $name: %s\n" "${problems[@]}"
    failed=1
  fi
}
injected="failed \(injected by TERNION_INJECT_COMM_ERROR\)"
run zero 1:reduce_scatter:3 \
  "^ternion: rank 1: (ternion-train: error: )?reduce_scatter on group 'dp\[0,1\]' .*$injected" \
  --set parallel.zero_stage=1
run buckets 1:all_reduce:50 \
  "^ternion: rank 1: (ternion-train: error: )?all_reduce on group 'dp\[0,1\]' .*$injected" \
  --set parallel.bucket_size_mb=0.01
[ "$failed" -eq 0 ] || exit 1
echo "a failed collective ends the job with its message, no later operation reaching MPI"

#!/usr/bin/env bash
# fault_runs.sh MPIRUN TERNION_TRAIN CONFIG TRAIN_BIN OUT_DIR
# Faults in an 8-rank tensor 2 x pipeline 2 x data 2 run that saves every 2 steps:
#   stop: rank 5 is stopped (SIGSTOP) mid-run. The others' watchdogs must end the job within
#         parallel.comm_timeout_s (5 s) + 10 s, non-zero, each saying which operation on which
#         group timed out; ternion-hang-report on the flight records must name rank 5.
#   kill: rank 5 is killed (SIGKILL) mid-run; the job must end within 30 s, naming rank 5.
#   error: rank 5's 11th pipeline send (in step 6) fails as MPI would fail it
#         (TERNION_INJECT_COMM_ERROR) while its peer waits for it; the job must end within
#         30 s, naming rank 5 and the operation, and so must ternion-hang-report.
# After each, the last checkpoint must resume to the uninterrupted run's losses (1e-5).
# The seconds each fault took to end the job are printed (docs/reliability.md quotes them).
set -u
mpirun=$1 train=$2 config=$3 data=$4 out=$5
rm -rf "$out"
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }
report=$(dirname "$train")/ternion-hang-report
# The faults land a few steps after step 5, later on a loaded machine (a step takes 30 ms):
# the reference runs past any step they could come after.
steps=40
layout=(-np 8 "$train" --config "$config" --set "data.train=$data" --set training.sample_tokens=0
        --set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.data=2
        --set parallel.zero_stage=1 --set parallel.comm_timeout_s=5
        --set optimizer.decay=constant)  # the learning rate does not depend on training.steps
$mpirun "${layout[@]}" --set training.steps=$steps --set "logging.metrics_file=$out/reference.jsonl" \
  > "$out/reference.log" 2>&1 || { cat "$out/reference.log"; fail "the uninterrupted run"; }

pid_of_rank() {  # the pid of world rank $1 of the running job (Open MPI sets the variable)
  for p in $(pgrep -f "$train"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"
  done | head -n 1
}

loss() { sed -E 's/.*"loss": ?([^,]+),.*/\1/' "$1"; }
resume_and_compare() {  # NAME: resume NAME's latest checkpoint to step $steps, compare losses
  local name=$1 latest first
  latest=$(cat "$out/$name/ckpt/latest" 2>/dev/null) || fail "$name: no checkpoint to resume"
  first=$((10#${latest#step_} + 1))
  [ "$first" -le "$steps" ] || fail "$name: the fault came after step $steps"
  $mpirun "${layout[@]}" --set training.steps=$steps --set "checkpoint.save_dir=$out/$name/ckpt" \
    --set checkpoint.load=latest --set "logging.metrics_file=$out/$name/resumed.jsonl" \
    > "$out/$name/resumed.log" 2>&1 || { cat "$out/$name/resumed.log"; fail "$name: the resumed run"; }
  paste <(tail -n +"$first" "$out/reference.jsonl" | loss /dev/stdin) \
        <(loss "$out/$name/resumed.jsonl") | awk -v name="$name" -v first="$first" '
    { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1 || $2 == "") bad++ }
    END { if (n == 0 || bad) { print "FAILED: " name ": " bad " of " n " resumed losses differ"; exit 1 }
          printf "%s: resumed from step %d, steps %d-%d as uninterrupted\n", name, first - 1, first, first + n - 1 }' ||
    exit 1
}

fault() {  # NAME SIGNAL LIMIT_S: start a long run, send SIGNAL to rank 5 after step 4
           # (SIGNAL "error": rank 5 fails a send of step 6 itself)
  local name=$1 signal=$2 limit=$3 job pid start end elapsed
  mkdir -p "$out/$name"
  local inject=
  [ "$signal" = error ] && inject=5:send:11
  TERNION_INJECT_COMM_ERROR=$inject \
  $mpirun "${layout[@]}" --set training.steps=100000 --set "checkpoint.save_dir=$out/$name/ckpt" \
    --set checkpoint.save_interval=2 --set "logging.flight_dir=$out/$name/flight" \
    > "$out/$name/run.log" 2>&1 &
  job=$!
  if [ "$signal" = error ]; then  # timed from the failure's message
    for _ in $(seq 1 1200); do grep -q "injected by" "$out/$name/run.log" && break; sleep 0.05; done
    start=$(date +%s.%N)
  else
    for _ in $(seq 1 1200); do grep -qE "^step +5/" "$out/$name/run.log" && break; sleep 0.05; done
    pid=$(pid_of_rank 5)
    [ -n "$pid" ] || { kill -KILL "$job"; cat "$out/$name/run.log"; fail "$name: no rank 5 found"; }
    start=$(date +%s.%N)
    kill "-$signal" "$pid"
  fi
  wait "$job"
  status=$?
  end=$(date +%s.%N)
  pkill -KILL -f "$out/$name/ckpt" 2>/dev/null  # a stopped rank left behind
  elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  local what="SIG$signal to rank 5"
  [ "$signal" = error ] && what="rank 5's error"
  echo "$name: the job ended ${elapsed} s after $what, exit status $status"
  [ "$status" -ne 0 ] || fail "$name: the job exited 0"
  awk -v e="$elapsed" -v l="$limit" 'BEGIN { exit !(e <= l) }' ||
    { tail -n 20 "$out/$name/run.log"; fail "$name: took ${elapsed} s, more than $limit"; }
}

fault stop STOP 15
grep -qE "^ternion: rank [0-9]+: communication timed out: [a-z_]+ #[0-9]+ on group '[^']+' has not completed after [0-9]+ s" \
  "$out/stop/run.log" || { cat "$out/stop/run.log"; fail "stop: no timeout message"; }
"$report" "$out/stop/flight" > "$out/stop/report.txt" 2>&1 || { cat "$out/stop/report.txt"; fail "stop: the hang report"; }
cat "$out/stop/report.txt"
grep -q "^ternion-hang-report: behind: rank 5 " "$out/stop/report.txt" || fail "stop: the report does not name rank 5"
resume_and_compare stop

fault kill KILL 30
grep -qiE "rank 5 .*signal 9|process rank 5" "$out/kill/run.log" ||
  { cat "$out/kill/run.log"; fail "kill: rank 5 is not named"; }
resume_and_compare kill

fault error error 30
grep -qE "^ternion: rank 5: (ternion-train: error: )?send on group .*failed \(injected by TERNION_INJECT_COMM_ERROR\)" \
  "$out/error/run.log" || { cat "$out/error/run.log"; fail "error: rank 5 and its send are not named"; }
"$report" "$out/error/flight" > "$out/error/report.txt" 2>&1 || { cat "$out/error/report.txt"; fail "error: the hang report"; }
cat "$out/error/report.txt"
grep -qE "^ternion-hang-report: failed: rank 5: send #[0-9]+ on group" "$out/error/report.txt" &&
  grep -qE "^ternion-hang-report: behind: rank 5 \(it failed" "$out/error/report.txt" ||
  fail "error: the report does not name rank 5's failed send"
resume_and_compare error
echo "faults end the job, name the rank, and the last checkpoints resume"

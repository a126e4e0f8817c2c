#!/usr/bin/env bash
# time_limit_late_rank.sh MPIRUN TERNION_TRAIN CONFIG OUT_DIR: training.time_limit_minutes on
# two ranks whose clocks disagree. Rank 1 starts 3 s after rank 0, whose clock (started at its
# own launch) counts the wait in MPI's start-up: rank 0 passes a 2 s limit at step 1, rank 1
# not for many steps. The ranks must agree to stop after step 1 together (a rank going on
# alone would wait in a collective the other never joins), save, and exit 0.
set -u
mpirun=$1 train=$2 config=$3 out=$4
rm -rf "$out"
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }
# shellcheck disable=SC2016
$mpirun -np 2 sh -c '[ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ] && sleep 3; exec "$@"' sh \
  "$train" --config "$config" --set parallel.data=2 --set training.steps=200 \
  --set training.sample_tokens=0 --set training.time_limit_minutes=0.0333 \
  --set "checkpoint.save_dir=$out/ckpt" --set parallel.comm_timeout_s=60 > "$out/run.log" 2>&1
status=$?
[ "$status" -eq 0 ] || { cat "$out/run.log"; fail "exit status $status"; }
grep -q "^ternion: stopped after step 1: training.time_limit_minutes (0.0333) has passed$" \
  "$out/run.log" || { cat "$out/run.log"; fail "the run did not stop after step 1"; }
[ "$(cat "$out/ckpt/latest")" = step_0000001 ] || fail "latest is not step 1"
echo "time_limit_late_rank: both ranks stopped after step 1, the step rank 0's clock passed"

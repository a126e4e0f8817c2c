#!/usr/bin/env bash
# ternion_run_signal.sh RUN TRAIN CONFIG DATA SCRATCH: launch/ternion-run on 2 ranks, stopped
# by SIGINT (a terminal's Ctrl-C) and then by SIGTERM (a batch system's): each time the ranks
# finish their step, save, and ternion-run exits 0, as ternion-train on one rank does.
set -u
run=$1 train=$2 config=$3 data=$4 scratch=$5
rm -rf "$scratch"
mkdir -p "$scratch"
fail() { echo "FAILED: $*"; exit 1; }
for signal in INT TERM; do
  out=$scratch/$signal
  # A job of its own (set -m): a background job of a script would ignore SIGINT.
  set -m
  TERNION_TRAIN=$train "$run" -np 2 "$config" --set parallel.data=0 --set "data.train=$data" \
    --set training.steps=1000000 --set training.sample_tokens=0 \
    --set "checkpoint.save_dir=$out/ckpt" > "$out.log" 2>&1 &
  pid=$!
  set +m
  for _ in $(seq 1 600); do grep -qE "^step +3/" "$out.log" && break; sleep 0.05; done
  kill -"$signal" "$pid"
  wait "$pid"
  status=$?
  cat "$out.log" | grep -v "^step"
  [ "$status" -eq 0 ] || fail "ternion-run exited $status after SIG$signal"
  grep -q "^ternion: stopped by a signal after step" "$out.log" || fail "no clean stop after SIG$signal"
  [ -f "$out/ckpt/latest" ] || fail "no checkpoint after SIG$signal"
done
echo "ternion_run_signal: SIGINT and SIGTERM stop cleanly with status 0"
rm -rf "$scratch"

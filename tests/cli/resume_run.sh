#!/usr/bin/env bash
# resume_run.sh MPIRUN TERNION_TRAIN CONFIG TRAIN_BIN OUT_DIR
# 1. trains CONFIG for 10 steps on one rank (the reference);
# 2. trains again saving every 5 steps, and resumes from step 5 on 2 ranks as tensor 2:
#    the resumed run must log steps 6..10 with the reference's losses (1e-5 relative), and
#    the save and the load the same megabytes;
#    ternion-generate on the last checkpoint prints the trainer's own final sample;
#    ternion-export writes GPT-2's names and layouts (checked by tests/cli/check_hf_export.py);
# 3. starts a long run, sends it SIGTERM after step 3: without a save_dir it must say that
#    nothing was saved and exit 1; with one it must save, say so, exit 0, and the checkpoint
#    must resume;
# 4. a run saving every step is SIGKILLed: `latest` still loads, and the run resumed from it
#    keeps the killed run's metrics up to its step (each step once, the same values);
# 5. checkpoint.keep prunes a run that saves every step, and a resumed one; keep_every's
#    milestones stay besides.
set -u
mpirun=$1 train=$2 config=$3 data=$4 out=$5
rm -rf "$out"
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }
common=(--config "$config" --set "data.train=$data" --set training.steps=10 --set training.sample_tokens=0)
"$train" "${common[@]}" --set "logging.metrics_file=$out/reference.jsonl" > "$out/reference.log" 2>&1 ||
  { cat "$out/reference.log"; fail "the reference run"; }
"$train" "${common[@]}" --set "checkpoint.save_dir=$out/ckpt" --set checkpoint.save_interval=5 \
  --set training.sample_tokens=24 > "$out/saving.log" 2>&1 || { cat "$out/saving.log"; fail "the saving run"; }
[ -f "$out/ckpt/step_0000005/checkpoint.json" ] || fail "no checkpoint of step 5"
# ternion-generate on the final checkpoint samples what the trainer sampled at its end.
generate=$(dirname "$train")/ternion-generate
"$generate" --checkpoint "$out/ckpt" --prompt "The " --max-tokens 24 --seed 1234 > "$out/generated.txt" ||
  fail "ternion-generate"
[ "$(cat "$out/generated.txt")" = "$(sed -n '/^ternion: sample/,$p' "$out/saving.log" | tail -n +2)" ] ||
  { cat "$out/generated.txt"; fail "ternion-generate's text differs from the trainer's sample"; }
$mpirun -np 2 "$train" "${common[@]}" --set parallel.tensor=2 \
  --set "checkpoint.load=$out/ckpt/step_0000005" --set "logging.metrics_file=$out/resumed.jsonl" \
  > "$out/resumed.log" 2>&1 || { cat "$out/resumed.log"; fail "the resumed run"; }
grep -q "resumed from $out/ckpt/step_0000005 after step 5" "$out/resumed.log" || fail "no resume line"
# Both say what they moved, each element once: the save of one rank and the load into
# tensor 2 count the same megabytes.
saved_mb=$(sed -n 's/^ternion: saved the checkpoint of step 5 in .* (\([0-9.]*\) MB in [0-9.]* s, [0-9]* MB\/s)$/\1/p' "$out/saving.log")
loaded_mb=$(sed -n 's/^ternion: resumed from .* after step 5 (\([0-9.]*\) MB in [0-9.]* s, [0-9]* MB\/s)$/\1/p' "$out/resumed.log")
[ -n "$saved_mb" ] && [ "$saved_mb" = "$loaded_mb" ] ||
  fail "the save's and the load's megabytes: '$saved_mb' and '$loaded_mb'"
[ "$(head -n 1 "$out/resumed.jsonl" | sed -E 's/^\{"step": ?([0-9]+),.*/\1/')" = 6 ] || fail "the resumed run does not start at step 6"
loss() { sed -E 's/.*"loss": ?([^,]+),.*/\1/' "$1"; }
paste <(tail -n 5 "$out/reference.jsonl" | loss /dev/stdin) <(loss "$out/resumed.jsonl") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; printf "step %d: uninterrupted %s, resumed %s\n", n + 5, $1, $2
    if (d > 1e-5 * $1) bad++ }
  END { if (n != 5 || bad) { print "FAILED: resumed losses differ"; exit 1 } }' || exit 1

# ternion-export: GPT-2's names and layouts, read back by a second safetensors reader.
"$(dirname "$train")/ternion-export" --checkpoint "$out/ckpt" --output "$out/hf" > /dev/null ||
  fail "ternion-export"
python3 "$(dirname "$0")/check_hf_export.py" "$out/ckpt/step_0000010" "$out/hf" || exit 1

# term_after_step_3 LOG ARG...: a long run with ARGs, sent SIGTERM once it logged step 3; sets
# `status` to its exit status.
term_after_step_3() {
  local log=$1 pid
  shift
  "$train" --config "$config" --set "data.train=$data" --set training.steps=100000 \
    --set training.sample_tokens=0 "$@" > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do grep -qE "^step +3/" "$log" && break; sleep 0.05; done
  kill -TERM "$pid"
  wait "$pid"
  status=$?
}
# SIGTERM without a save_dir: the run stops after its step, saves nothing, and says so with a
# non-zero status (a scheduler must not take it for a finished run).
term_after_step_3 "$out/term_nosave.log"
[ "$status" -eq 1 ] || { cat "$out/term_nosave.log"; fail "exit status $status after SIGTERM, not 1"; }
grep -q "^ternion: the run did not finish and nothing was saved" "$out/term_nosave.log" ||
  { cat "$out/term_nosave.log"; fail "no line saying nothing was saved"; }
# SIGTERM: save and stop cleanly.
term_after_step_3 "$out/term.log" --set "checkpoint.save_dir=$out/term"
[ "$status" -eq 0 ] || { cat "$out/term.log"; fail "exit status $status after SIGTERM"; }
grep -q "stopped by a signal" "$out/term.log" || fail "no stop line"
grep -q "^ternion: signal received: stopping after this step and saving a checkpoint" "$out/term.log" ||
  fail "the signal was not acknowledged"
latest=$(cat "$out/term/latest") || fail "no latest after SIGTERM"
# The checkpoint is of the step the run stopped at: the last step it logged, the one it names.
last_step=$(grep -oE "^step +[0-9]+/" "$out/term.log" | tail -n 1 | grep -oE "[0-9]+")
grep -q "^ternion: stopped by a signal after step $last_step\$" "$out/term.log" ||
  { grep "stopped by" "$out/term.log"; fail "the stop line does not name step $last_step, the last logged"; }
[ "$latest" = "$(printf 'step_%07d' "$last_step")" ] ||
  fail "SIGTERM saved $latest, but the run stopped after step $last_step"
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["step"])' \
      "$out/term/$latest/checkpoint.json")" = "$last_step" ] || fail "$latest/checkpoint.json is not of step $last_step"
"$train" --config "$config" --set "data.train=$data" --set training.steps=100000 \
  --set training.sample_tokens=0 --set "checkpoint.save_dir=$out/term" --set checkpoint.load=latest \
  --dry-run > /dev/null 2>&1 || fail "the SIGTERM checkpoint does not load"

# A save killed midway (SIGKILL at some moment of a run that saves every step): `latest`
# always names a complete checkpoint.
"$train" --config "$config" --set "data.train=$data" --set training.steps=100000 \
  --set training.sample_tokens=0 --set "checkpoint.save_dir=$out/kill" --set checkpoint.save_interval=1 \
  --set "logging.metrics_file=$out/kill.jsonl" > "$out/kill.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -qE "^step +5/" "$out/kill.log" && break; sleep 0.02; done
kill -KILL "$pid"
wait "$pid" 2>/dev/null
"$train" --config "$config" --set "data.train=$data" --set training.steps=100000 \
  --set training.sample_tokens=0 --set "checkpoint.save_dir=$out/kill" --set checkpoint.load=latest \
  --dry-run > "$out/kill-load.log" 2>&1 || { cat "$out/kill-load.log"; fail "latest does not load after SIGKILL"; }
[ -f "$out/kill.jsonl.partial" ] || fail "the killed run left no kill.jsonl.partial"
cp "$out/kill.jsonl.partial" "$out/killed.jsonl"
kill_latest=$(cat "$out/kill/latest")
last=$((10#${kill_latest#step_} + 2))
"$train" --config "$config" --set "data.train=$data" --set training.steps=$last \
  --set training.sample_tokens=0 --set "checkpoint.save_dir=$out/kill" --set checkpoint.load=latest \
  --set "logging.metrics_file=$out/kill.jsonl" > "$out/kill-resume.log" 2>&1 ||
  { cat "$out/kill-resume.log"; fail "the run resumed after SIGKILL"; }
[ "$(sed -E 's/^\{"step": ?([0-9]+),.*/\1/' "$out/kill.jsonl")" = "$(seq 1 $last)" ] ||
  { cat "$out/kill.jsonl"; fail "the resumed run's metrics are not steps 1..$last, each once"; }
# The kept lines are the killed run's own, values and all.
kept=$((10#${kill_latest#step_}))
[ "$(head -n "$kept" "$out/kill.jsonl")" = "$(head -n "$kept" "$out/killed.jsonl")" ] ||
  fail "the metrics of steps 1..$kept differ from the killed run's"

# Pruning through real runs: keep 2 of a run saving every step, then of a resumed run (which
# keeps the checkpoint it resumed from until it has saved two of its own).
prune=(--config "$config" --set "data.train=$data" --set training.sample_tokens=0
       --set "checkpoint.save_dir=$out/prune" --set checkpoint.save_interval=1 --set checkpoint.keep=2)
saved() { (cd "$out/prune" && ls -d step_* | tr '\n' ' '); }
"$train" "${prune[@]}" --set training.steps=5 > "$out/prune.log" 2>&1 || { cat "$out/prune.log"; fail "the pruned run"; }
[ "$(saved)" = "step_0000004 step_0000005 " ] || fail "keep 2 after 5 saves left $(saved)"
[ "$(cat "$out/prune/latest")" = step_0000005 ] || fail "latest is not step 5 after pruning"
"$train" "${prune[@]}" --set training.steps=6 --set checkpoint.load=latest > "$out/prune6.log" 2>&1 ||
  { cat "$out/prune6.log"; fail "the pruned run resumed"; }
[ "$(saved)" = "step_0000005 step_0000006 " ] || fail "keep 2 after resuming and saving step 6 left $(saved)"
# Milestones: keep_every 3 never deletes steps 3 and 6; keep 1 is the newest save, step 7.
rm -rf "$out/prune"
"$train" "${prune[@]}" --set training.steps=7 --set checkpoint.keep=1 \
  --set checkpoint.keep_every=3 > "$out/milestones.log" 2>&1 ||
  { cat "$out/milestones.log"; fail "the run with milestones"; }
[ "$(saved)" = "step_0000003 step_0000006 step_0000007 " ] ||
  fail "keep 1, keep_every 3 after 7 saves left $(saved)"
echo "resumed on another layout with the same losses; SIGTERM saved $latest; a killed save left"
echo "the last good checkpoint loadable, and the resumed run kept the killed run's metrics"

#!/usr/bin/env bash
# eval_only_runs.sh MPIRUN BIN_DIR CONFIG OUT_DIR
# --eval-only gives the loss the training run logged for the same weights:
# 1. CONFIG trains 6 steps on one rank, evaluating at step 6, and saves step 6;
# 2. --eval-only on that checkpoint prints the step's val loss, on one rank, on tensor 2 and on
#    pipeline 2 (each layout's log shows it ran; the last through checkpoint.load: latest, with
#    the training config's trace settings), and trains, writes and reads from data.train
#    nothing (the last two runs set it empty and to a file that is not there);
# 3. checkpoint.load: latest where there is none is refused, creating nothing, unless
#    model.init_from names weights to start from: the checkpoint's, exported, evaluate alike.
set -u
mpirun=$1 bin=$2 config=$3 out=$4
rm -rf "$out"
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }
"$bin/ternion-prepare" --builtin --bytes 60000 --output "$out/data" > /dev/null ||
  fail "ternion-prepare"
common=(--config "$config" --set "data.train=$out/data/train.bin" --set "data.val=$out/data/val.bin"
        --set training.steps=6 --set training.eval_batches=2 --set training.sample_tokens=0)
"$bin/ternion-train" "${common[@]}" --set training.eval_interval=6 \
  --set "logging.metrics_file=$out/metrics.jsonl" --set "checkpoint.save_dir=$out/ckpt" \
  > "$out/train.log" 2>&1 || { cat "$out/train.log"; fail "the training run"; }
want=$(python3 -c 'import json, sys
print([json.loads(l) for l in open(sys.argv[1])][-1]["val_loss"])' "$out/metrics.jsonl") ||
  fail "no val_loss at step 6"
echo "the training run's val loss at step 6: $want"
ls -R "$out/ckpt" > "$out/ckpt_before.txt"

evaluate() {  # NAME RANKS [--set ...]: runs --eval-only, prints its loss
  local name=$1 ranks=$2
  shift 2
  local run=("$bin/ternion-train")
  [ "$ranks" -eq 1 ] || run=($mpirun -np "$ranks" "$bin/ternion-train")
  "${run[@]}" "${common[@]}" --set "checkpoint.load=$out/ckpt/step_0000006" \
    --set "logging.metrics_file=$out/eval_$name.jsonl" "$@" --eval-only > "$out/eval_$name.log" 2>&1 ||
    { cat "$out/eval_$name.log"; fail "--eval-only ($name)"; }
  grep -q "ternion: evaluation of the checkpoint of step 6 on 16 sequences of 32 tokens of data.val: val loss" \
    "$out/eval_$name.log" || { cat "$out/eval_$name.log"; fail "no evaluation line ($name)"; }
  ! grep -q "^step " "$out/eval_$name.log" || fail "--eval-only trained ($name)"
  ! grep -q "data.train" "$out/eval_$name.log" || fail "--eval-only read data.train ($name)"
  [ ! -e "$out/eval_$name.jsonl" ] && [ ! -e "$out/eval_$name.jsonl.partial" ] ||
    fail "--eval-only wrote a metrics file ($name)"
}
evaluate one 1
# data.train is not read: empty, or a file that is not there.
evaluate tensor 2 --set parallel.tensor=2 --set data.train=
grep -q "layout tensor 2 x pipeline 1 x data 1" "$out/eval_tensor.log" || fail "tensor 2 did not run"
evaluate pipeline 2 --set parallel.pipeline=2 --set checkpoint.load=latest \
  --set "data.train=$out/no_such_file.bin" \
  --set "checkpoint.save_dir=$out/ckpt" --set "logging.trace_file=$out/trace.json" \
  --set logging.trace_step=3
grep -q "layout tensor 1 x pipeline 2 x data 1" "$out/eval_pipeline.log" || fail "pipeline 2 did not run"
[ ! -e "$out/trace.json" ] || fail "--eval-only wrote a trace"

"$bin/ternion-train" "${common[@]}" --set checkpoint.load=latest \
  --set "checkpoint.save_dir=$out/no_such_dir" --eval-only > "$out/eval_none.log" 2>&1
status=$?
cat "$out/eval_none.log"
[ "$status" -eq 1 ] || fail "--eval-only with no checkpoint to load exited $status, not 1"
grep -q "error: --eval-only: checkpoint.load: latest: no checkpoint in '$out/no_such_dir'.*there is no model to evaluate" \
  "$out/eval_none.log" || fail "--eval-only with no checkpoint: the message"
[ ! -e "$out/no_such_dir" ] || fail "--eval-only created checkpoint.save_dir"

# With model.init_from, a latest that finds no checkpoint evaluates those weights, as a run
# would start from them: the step-6 weights, exported, give the step's loss again.
"$bin/ternion-export" --checkpoint "$out/ckpt" --output "$out/hf" > /dev/null || fail "ternion-export"
"$bin/ternion-train" "${common[@]}" --set checkpoint.load=latest --set "model.init_from=$out/hf" \
  --set "checkpoint.save_dir=$out/no_such_dir" --eval-only > "$out/eval_init.log" 2>&1 ||
  { cat "$out/eval_init.log"; fail "--eval-only from model.init_from"; }
grep -q "evaluation of '$out/hf' on 16 sequences" "$out/eval_init.log" ||
  { cat "$out/eval_init.log"; fail "--eval-only from model.init_from: the evaluation line"; }
ls -R "$out/ckpt" | cmp -s - "$out/ckpt_before.txt" || fail "--eval-only changed the checkpoints"

for name in one tensor pipeline init; do
  got=$(sed -n 's/.*val loss \([0-9.]*\), perplexity.*/\1/p' "$out/eval_$name.log")
  python3 -c 'import sys
want, got = float(sys.argv[1]), float(sys.argv[2])
print("%s: val loss %s (perplexity in the log)" % (sys.argv[3], got))
sys.exit(abs(got - want) > 1e-5 * want + 1e-6)' "$want" "$got" "$name" ||
    fail "--eval-only on $name gives $got, the training run logged $want"
done
echo "--eval-only: the training run's val loss on one rank, tensor 2 and pipeline 2"

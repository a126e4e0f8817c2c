#!/usr/bin/env bash
# llama_resume_export.sh MPIRUN TERNION_TRAIN CONFIG TRAIN_BIN OUT_DIR
# A Llama run across layouts and out to Hugging Face's format:
# 1. trains CONFIG for 10 steps on one rank (the reference);
# 2. trains as pipeline 2, saving every 5 steps, and resumes from step 5 as tensor 2 x data 2
#    with ZeRO-1: steps 6..10 must log the reference's losses (1e-5 relative); a resume that
#    would trace a step before it is refused, and through 'latest' (a requeue) said;
# 3. ternion-export writes the final checkpoint as a LlamaForCausalLM directory; a second
#    reader (llama_reference.py: the published formulas in double precision) computes the
#    logits of a prompt from it, and they must equal ternion-generate's on the checkpoint;
# 4. the same for a model with Llama 3's rotary scaling.
set -u
mpirun=$1 train=$2 config=$3 data=$4 out=$5
bin=$(dirname "$train")
rm -rf "$out"
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }
common=(--config "$config" --set "data.train=$data" --set training.steps=10 --set training.sample_tokens=0)
"$train" "${common[@]}" --set "logging.metrics_file=$out/reference.jsonl" > "$out/reference.log" 2>&1 ||
  { cat "$out/reference.log"; fail "the reference run"; }
$mpirun -np 2 "$train" "${common[@]}" --set parallel.pipeline=2 \
  --set "checkpoint.save_dir=$out/ckpt" --set checkpoint.save_interval=5 > "$out/saving.log" 2>&1 ||
  { cat "$out/saving.log"; fail "the saving run (pipeline 2)"; }
[ -f "$out/ckpt/step_0000005/checkpoint.json" ] || fail "no checkpoint of step 5"
$mpirun -np 4 "$train" "${common[@]}" --set parallel.tensor=2 --set parallel.data=2 \
  --set parallel.zero_stage=1 --set "checkpoint.load=$out/ckpt/step_0000005" \
  --set "logging.metrics_file=$out/resumed.jsonl" > "$out/resumed.log" 2>&1 ||
  { cat "$out/resumed.log"; fail "the resumed run (tensor 2 x data 2, ZeRO-1)"; }
grep -q "resumed from $out/ckpt/step_0000005 after step 5" "$out/resumed.log" || fail "no resume line"
grep -q "layout tensor 2 x pipeline 1 x data 2" "$out/resumed.log" || fail "the resumed run's layout"
# A trace of a step the checkpoint has already run would never be written: refused, once.
$mpirun -np 2 "$train" "${common[@]}" --set parallel.pipeline=2 \
  --set "checkpoint.load=$out/ckpt/step_0000005" --set "logging.trace_file=$out/trace.json" \
  --set logging.trace_step=3 > "$out/trace.log" 2>&1 &&
  fail "a trace of step 3 in a run resumed after step 5 was not refused"
[ "$(grep -c "logging.trace_step: step 3 comes before this run's first step 6" "$out/trace.log")" = 1 ] ||
  { cat "$out/trace.log"; fail "the trace of a step before the resume: not refused once"; }
# The same through 'latest' is a restart of the traced run's command: it trains on, and says so.
cp -r "$out/ckpt" "$out/requeued"
$mpirun -np 2 "$train" "${common[@]}" --set training.steps=12 --set parallel.pipeline=2 \
  --set "checkpoint.save_dir=$out/requeued" --set checkpoint.load=latest \
  --set "logging.trace_file=$out/trace.json" --set logging.trace_step=3 > "$out/requeued.log" 2>&1 ||
  { cat "$out/requeued.log"; fail "a requeued run (load: latest) past its traced step"; }
grep -q "logging.trace_step: step 3 comes before this run's first step 11 .*: no step is traced in this run" \
  "$out/requeued.log" || { cat "$out/requeued.log"; fail "the requeued run does not say it traces nothing"; }
loss() { sed -E 's/.*"loss": ?([^,]+),.*/\1/' "$1"; }
paste <(tail -n 5 "$out/reference.jsonl" | loss /dev/stdin) <(loss "$out/resumed.jsonl") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; printf "step %d: one rank %s, saved as pp 2 and resumed as tp 2 x dp 2 %s\n", n + 5, $1, $2
    if (d > 1e-5 * $1) bad++ }
  END { if (n != 5 || bad) { print "FAILED: resumed losses differ"; exit 1 } }' || exit 1

"$bin/ternion-export" --checkpoint "$out/ckpt" --output "$out/hf" > "$out/export.log" 2>&1 ||
  { cat "$out/export.log"; fail "ternion-export"; }
prompt="First Citizen: we"
"$bin/ternion-generate" --checkpoint "$out/ckpt" --prompt "$prompt" --max-tokens 0 \
  --logits "$out/logits.json" > /dev/null || fail "ternion-generate --logits"
tokens=$(python3 -c 'import sys; print(",".join(str(b) for b in sys.argv[1].encode()))' "$prompt")
python3 "$(dirname "$0")/llama_reference.py" "$out/hf" --tokens "$tokens" \
  --logits "$out/logits.json" --tolerance 1e-4 || fail "the export's logits from the second reader"

# The same with Llama 3's rotary scaling (an original context of 16 puts this model's head of 8
# in all three bands), written to config.json as rope_scaling and read back by the reader.
"$train" "${common[@]}" --set training.steps=3 --set model.rope_scaling_factor=8 \
  --set model.rope_scaling_original_context=16 --set "checkpoint.save_dir=$out/scaled" \
  > "$out/scaled.log" 2>&1 || { cat "$out/scaled.log"; fail "the scaled-rotary run"; }
"$bin/ternion-export" --checkpoint "$out/scaled" --output "$out/hf_scaled" > /dev/null 2>&1 ||
  fail "ternion-export of the scaled-rotary model"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["rope_scaling"]
sys.exit(not (r["rope_type"] == "llama3" and isinstance(r["factor"], float) and r["factor"] == 8.0))' "$out/hf_scaled/config.json" ||
  fail "config.json has no llama3 rope_scaling"
"$bin/ternion-generate" --checkpoint "$out/scaled" --prompt "$prompt" --max-tokens 0 \
  --logits "$out/logits_scaled.json" > /dev/null || fail "ternion-generate --logits (scaled)"
python3 "$(dirname "$0")/llama_reference.py" "$out/hf_scaled" --tokens "$tokens" \
  --logits "$out/logits_scaled.json" --tolerance 1e-4 ||
  fail "the scaled export's logits from the second reader"
echo "resumed across layouts with the same losses; the export's logits are ours"

#!/usr/bin/env bash
# bpe_shards_run.sh MPIRUN BIN_DIR CONFIG OUT_DIR [TEXT]
# Text through a trained byte-level BPE, in shards, end to end:
# 1. ternion-prepare trains a tokenizer of 512 tokens on TEXT (default: 200 kB of the built-in
#    corpus) and writes train and validation shards of at most 40,000 tokens beside it;
# 2. CONFIG trains 10 steps on one rank from the shards (globs) with evaluation: the reference;
#    its end-of-training sample is text, not ids;
# 3. a run on pipeline 2 saves at step 5, and a run on data 2 resumes from it: steps 6..10 give
#    the reference's losses (1e-5 relative);
# 4. the checkpoint holds the tokenizer; ternion-generate on it prints the trainer's sample, and
#    ternion-export puts the tokenizer beside the model.
set -u
mpirun=$1 bin=$2 config=$3 out=$4 text=${5:-}
rm -rf "$out"
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }
input=(--builtin --bytes 200000)
[ -z "$text" ] || input=(--input "$text")
"$bin/ternion-prepare" "${input[@]}" --output "$out/data" --train-tokenizer \
  --vocab-size 512 --shard-tokens 40000 --threads 2 > "$out/prepare.log" 2>&1 ||
  { cat "$out/prepare.log"; fail "ternion-prepare"; }
cat "$out/prepare.log"
shards=$(ls "$out"/data/train_*.bin | wc -l)
[ "$shards" -ge 2 ] || fail "expected several training shards, got $shards"
[ -f "$out/data/val_000000.bin" ] || fail "no validation shard"
[ -f "$out/data/tokenizer.json" ] || fail "no tokenizer.json beside the shards"

common=(--config "$config" --set "data.train=$out/data/train_*.bin" --set "data.val=$out/data/val_*.bin"
        --set "data.tokenizer=$out/data/tokenizer.json" --set model.vocab_size=512
        --set training.steps=10 --set training.eval_interval=5 --set training.eval_batches=2
        --set training.sample_tokens=24 --set "training.sample_prompt=The ")
train=$bin/ternion-train
"$train" "${common[@]}" --set "logging.metrics_file=$out/reference.jsonl" > "$out/reference.log" 2>&1 ||
  { cat "$out/reference.log"; fail "the reference run"; }
grep -q "tokenizer byte-level BPE (512 tokens)" "$out/reference.log" ||
  { cat "$out/reference.log"; fail "the run does not say it uses the BPE tokenizer"; }
sed -n '/^ternion: sample/,$p' "$out/reference.log" | tail -n +2 > "$out/sample.txt"
echo "sample: $(cat "$out/sample.txt")"
[ -s "$out/sample.txt" ] || fail "no sample in the reference log"
! grep -qE '<[0-9]+>' "$out/sample.txt" || fail "the sample shows token ids, not text"
python3 -c 'import sys; open(sys.argv[1], encoding="utf-8").read()' "$out/sample.txt" ||
  fail "the sample is not UTF-8 text"

$mpirun -np 2 "$train" "${common[@]}" --set parallel.pipeline=2 --set training.sample_tokens=0 \
  --set "checkpoint.save_dir=$out/ckpt" --set checkpoint.save_interval=5 > "$out/saving.log" 2>&1 ||
  { cat "$out/saving.log"; fail "the saving run (pipeline 2)"; }
[ -f "$out/ckpt/step_0000005/tokenizer.json" ] || fail "the checkpoint lacks the tokenizer"
$mpirun -np 2 "$train" "${common[@]}" --set parallel.data=2 \
  --set "checkpoint.load=$out/ckpt/step_0000005" --set "checkpoint.save_dir=$out/ckpt" \
  --set "logging.metrics_file=$out/resumed.jsonl" > "$out/resumed.log" 2>&1 ||
  { cat "$out/resumed.log"; fail "the resumed run (data 2)"; }
grep -q "layout tensor 1 x pipeline 1 x data 2" "$out/resumed.log" || fail "the resumed run's layout"
loss() { sed -E 's/^\{"step": ?[0-9]+, ?"loss": ?([^,]+),.*/\1/' "$1"; }
paste <(loss "$out/reference.jsonl" | tail -n 5) <(loss "$out/resumed.jsonl") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; printf "step %d: one rank %s, saved as pp 2 and resumed as dp 2 %s\n", n + 5, $1, $2
    if (d > 1e-5 * $1) bad++ }
  END { if (n != 5 || bad) { print "FAILED: resumed losses differ"; exit 1 } }' || exit 1

"$bin/ternion-generate" --checkpoint "$out/ckpt" --prompt "The " --max-tokens 24 > "$out/generated.txt" ||
  fail "ternion-generate"
cmp "$out/generated.txt" "$out/sample.txt" ||
  { cat "$out/generated.txt"; fail "ternion-generate's text differs from the trainer's sample"; }
"$bin/ternion-export" --checkpoint "$out/ckpt" --output "$out/hf" > "$out/export.log" 2>&1 ||
  { cat "$out/export.log"; fail "ternion-export"; }
cmp "$out/hf/tokenizer.json" "$out/ckpt/step_0000010/tokenizer.json" ||
  fail "the export's tokenizer.json is not the checkpoint's"
echo "BPE in shards: trained, sampled text, resumed across layouts with the same losses"

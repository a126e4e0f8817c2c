#!/usr/bin/env bash
# sample_agrees.sh TRAIN GENERATE CONFIG SCRATCH: ternion-generate on a run's checkpoint, with
# only the prompt and length given, prints the sample the training run printed (its seed,
# temperature, top-k and top-p default to the checkpoint's).
set -u
train=$1 generate=$2 config=$3 scratch=$4
rm -rf "$scratch"
mkdir -p "$scratch"
fail() { echo "FAILED: $*"; exit 1; }
"$train" --config "$config" --set checkpoint.save_dir="$scratch/ckpt" --set training.sample_tokens=24 \
  --set training.sample_prompt=The --set training.sample_top_p=0.9 > "$scratch/train.log" 2>&1 || fail "training failed: $(cat "$scratch/train.log")"
# The sample is everything after the "ternion: sample ..." line.
sed -n '/^ternion: sample/,$p' "$scratch/train.log" | tail -n +2 > "$scratch/trained.txt"
[ -s "$scratch/trained.txt" ] || fail "no sample in the training log"
"$generate" --checkpoint "$scratch/ckpt" --prompt The --max-tokens 24 > "$scratch/generated.txt" 2>&1 ||
  fail "ternion-generate failed: $(cat "$scratch/generated.txt")"
cmp "$scratch/trained.txt" "$scratch/generated.txt" || fail "the samples differ"
echo "sample_agrees: the same sample"
rm -rf "$scratch"

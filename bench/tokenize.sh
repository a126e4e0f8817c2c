#!/usr/bin/env bash
# Byte-level BPE encoding speed: ternion-prepare against Hugging Face `tokenizers` on the same
# text, the same tokenizer.json and the same cores, alternating, RUNS times each.
#   [REPEAT=N] bash bench/tokenize.sh TEXT_FILE [BUILD_DIR] [VOCAB] [RUNS]
# The tokenizer is a GPT-2-style byte-level BPE of VOCAB tokens (default 8192) trained by
# `tokenizers` on the text. Timed: ternion-prepare's encoding on 1 thread and on every core
# (its "encoded ... in X s" line: the tokenizer alone, not the file writes); `tokenizers`'
# encode_batch over the text's lines on every core (Rust threads, RAYON_NUM_THREADS) and its
# encode of the whole text on one. Prints each median in MB/s and the ratios. REPEAT=N times
# the text N times over (a 1 MB text encodes in tens of milliseconds: too short to time well).
set -euo pipefail
cd "$(dirname "$0")/.."
text=${1:?usage: bench/tokenize.sh TEXT_FILE [BUILD_DIR] [VOCAB] [RUNS]}
build=${2:-build}
vocab=${3:-8192}
runs=${4:-5}
py=$(tools/python-with-tokenizers)
cores=$(env -u OMP_NUM_THREADS nproc)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((i = 0; i < ${REPEAT:-1}; i++)); do cat "$text"; done > "$out/text.txt"
source_name=$(basename "$text")
text=$out/text.txt
"$py" - "$text" "$vocab" "$out/tokenizer.json" <<'PY'
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=int(sys.argv[2]), special_tokens=["<|endoftext|>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                              show_progress=False)
tok.train([sys.argv[1]], trainer)
tok.save(sys.argv[3])
PY
ours() {  # THREADS -> MB/s
  "$build/ternion-prepare" --input "$text" --output "$out/data" --tokenizer "$out/tokenizer.json" \
    --threads "$1" | sed -nE 's/^encoded .* \(([0-9.e+]+) MB\/s.*/\1/p'
}
theirs() {  # batch|whole -> MB/s
  RAYON_NUM_THREADS=$cores "$py" - "$text" "$out/tokenizer.json" "$1" <<'PY'
import sys, time
from tokenizers import Tokenizer
text = open(sys.argv[1], encoding="utf-8").read()
tok = Tokenizer.from_file(sys.argv[2])
lines = text.splitlines(keepends=True)
start = time.perf_counter()
if sys.argv[3] == "batch":
    tok.encode_batch(lines, add_special_tokens=False)
else:
    tok.encode(text, add_special_tokens=False)
print(len(text.encode()) / 1e6 / (time.perf_counter() - start))
PY
}
for ((r = 0; r < runs; r++)); do
  echo "$(ours 1) $(ours "$cores") $(theirs batch) $(theirs whole)"
done > "$out/times"
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -v c="$1" '{ print $c }' "$out/times" | median; }
one=$(col 1) all=$(col 2) batch=$(col 3) whole=$(col 4)
echo "$source_name x ${REPEAT:-1}, $(wc -c < "$text") bytes, vocabulary $vocab, $cores cores, median of $runs:"
printf '  ternion-prepare, 1 thread          %8.2f MB/s\n' "$one"
printf '  ternion-prepare, %d threads         %8.2f MB/s\n' "$cores" "$all"
printf '  tokenizers encode_batch (lines)    %8.2f MB/s\n' "$batch"
printf '  tokenizers encode (whole text)     %8.2f MB/s\n' "$whole"
awk -v a="$all" -v b="$batch" -v w="$whole" -v o="$one" -v c="$cores" 'BEGIN {
  printf "  ternion %d threads / tokenizers batch: %.2f; ternion 1 thread / tokenizers whole text: %.2f\n", c, a / b, o / w }'

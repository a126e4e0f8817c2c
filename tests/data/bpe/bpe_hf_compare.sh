#!/usr/bin/env bash
# bpe_hf_compare.sh SOURCE_DIR TERNION_BPE_TOOL WORK_DIR
# Our byte-level BPE against Hugging Face's `tokenizers` (bpe_hf_compare.py says what is
# compared) on the built-in corpus, tests/data/multilingual.txt and, where present, Tiny
# Shakespeare ($TERNION_TINY_SHAKESPEARE, by default ../shared/data/tinyshakespeare.txt beside
# the source directory). Exits 77 (skipped) where no Python has `tokenizers`.
set -u
src=$1 tool=$2 work=$3
if ! py=$("$src/tools/python-with-tokenizers"); then
  echo "SKIPPED: no Python with Hugging Face's tokenizers here (tools/python-with-tokenizers" \
       "installs one; tests do not)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
"$tool" builtin 1000000 "$work/builtin.txt" || { echo "FAILED: the built-in corpus"; exit 1; }
texts=(--text "builtin=$work/builtin.txt" --text "multilingual=$src/tests/data/multilingual.txt")
shakespeare=${TERNION_TINY_SHAKESPEARE:-$src/../shared/data/tinyshakespeare.txt}
if [ -f "$shakespeare" ]; then
  texts+=(--text "tinyshakespeare=$shakespeare")
else
  echo "note: no Tiny Shakespeare at $shakespeare (TERNION_TINY_SHAKESPEARE names it): compared without it"
fi
exec "$py" "$src/tests/data/bpe/bpe_hf_compare.py" --tool "$tool" --work "$work" "${texts[@]}"

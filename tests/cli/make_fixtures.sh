#!/usr/bin/env bash
# make_fixtures.sh PREPARE_BINARY DIR: good and bad token files and configs for the CLI tests.
set -eu
prepare=$1 dir=$2
rm -rf "$dir"
mkdir -p "$dir"
"$prepare" --builtin --bytes 60000 --output "$dir/good" >/dev/null
# Bad magic: the right size, the wrong first word.
cp "$dir/good/train.bin" "$dir/bad_magic.bin"
printf '\x00\x00\x00\x00' | dd of="$dir/bad_magic.bin" bs=1 count=4 conv=notrunc status=none
# Truncated: the header promises more tokens than the file holds.
head -c 5000 "$dir/good/train.bin" > "$dir/truncated.bin"
# Too short for even a header.
printf 'abc' > "$dir/tiny.bin"
base="model:
  seq_len: 32
  n_layer: 1
  n_head: 2
  d_model: 32
parallel:
  micro_batch_size: 2
training:
  steps: 2
  global_batch_size: 4
  sample_tokens: 8
data:
  train: $dir/good/train.bin"
printf '%s\n' "$base" > "$dir/good.yaml"
printf '%s\n' "$base" | sed "s#$dir/good/train.bin#$dir/bad_magic.bin#" > "$dir/bad_magic.yaml"
printf '%s\n' "$base" | sed "s#$dir/good/train.bin#$dir/truncated.bin#" > "$dir/truncated.yaml"
printf '%s\n' "$base" | sed "s#$dir/good/train.bin#$dir/tiny.bin#" > "$dir/tiny.yaml"
printf '%s\n' "$base" | sed "s#$dir/good/train.bin#$dir/missing.bin#" > "$dir/missing_data.yaml"
printf '%s\n' "$base" | sed 's/n_head: 2/n_head: 3/' > "$dir/bad_heads.yaml"
printf '%s\n' "$base" | sed 's/n_layer: 1/n_layer: one/' > "$dir/bad_type.yaml"
printf '%s\n' "$base" | sed 's/  n_layer: 1/  n_layer: 1\n  n_layers: 2/' > "$dir/unknown_key.yaml"
printf '%s\n' "$base" | sed 's/  seq_len: 32/  seq_len: [32/' > "$dir/broken.yaml"
printf '%s\n' "$base" | sed 's/seq_len: 32/seq_len: 100000/' > "$dir/too_long.yaml"
# A second byte-level text to blend with the first: the corpus's words, one a line.
"$prepare" --input "$dir/good/words.txt" --output "$dir/words" --val-fraction 0 >/dev/null
# Byte-level BPE in shards: a tokenizer of 300 tokens trained on the good corpus.
"$prepare" --input "$dir/good/corpus.txt" --output "$dir/bpe" --train-tokenizer --vocab-size 300 \
  --shard-tokens 12000 >/dev/null
# A smaller tokenizer trained on the same text: the shards above hold tokens it lacks.
"$prepare" --input "$dir/good/corpus.txt" --output "$dir/bpe280" --train-tokenizer --vocab-size 280 \
  --val-fraction 0 >/dev/null
# Shards of both widths side by side: a uint32 copy (version 7) of a uint16 shard's tokens.
mkdir -p "$dir/mixed"
cp "$dir/good/val.bin" "$dir/mixed/a.bin"
python3 - "$dir/good/val.bin" "$dir/mixed/b.bin" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<i", data, 8)[0]
tokens = struct.unpack_from("<%dH" % n, data, 1024)
header = struct.pack("<3i", 20240801, 7, n) + bytes(1024 - 12)
open(sys.argv[2], "wb").write(header + struct.pack("<%dI" % n, *tokens))
PY
printf 'abc\xff\xfe def\n' > "$dir/not_utf8.txt"
printf '{"version": "1.0", "model": {"type": "WordPiece", "vocab": {}}}\n' > "$dir/wordpiece.json"
# Documents in JSON Lines: a good file, and one whose third line lacks "text" (all have "body").
printf '{"text": "One doc."}\n{"text": "Two."}\n' > "$dir/docs.jsonl"
printf '{"text": "A single document, which no split can cut in two."}\n' > "$dir/one_doc.jsonl"
# Documents in three files, as a corpus ships them: gzip, plain, and gzip of two members (as
# `cat a.gz b.gz` makes); and a gzip file cut short.
rm -rf "$dir/doc_parts" "$dir/text_parts" && mkdir -p "$dir/doc_parts" "$dir/text_parts"
printf 'Fine text.\n' > "$dir/text_parts/a.txt"
printf 'ab\377cd\n' > "$dir/text_parts/b.txt"
python3 - "$dir/doc_parts" <<'PY'
import gzip, sys
d = sys.argv[1]
line = lambda text: ('{"text": "%s"}\n' % text).encode()
open(d + "/part_0.jsonl.gz", "wb").write(gzip.compress(line("First.") + line("Second.")))
open(d + "/part_1.jsonl", "wb").write(line("Third, plain."))
open(d + "/part_2.jsonl.gz", "wb").write(gzip.compress(line("Fourth.")) +
                                        gzip.compress(line("Fifth, in a second member.")))
whole = gzip.compress(line("Cut short.") * 50)
open(d + "/../cut.jsonl.gz", "wb").write(whole[:len(whole) // 2])
PY
printf '{"text": "a", "body": "x"}\n{"text": "b", "body": "y"}\n{"body": "z"}\n' > "$dir/bad_docs.jsonl"
# The BPE above without its added tokens: nothing to separate documents with.
python3 - "$dir/bpe/tokenizer.json" "$dir/no_eot.json" <<'PY'
import json, sys
tokenizer = json.load(open(sys.argv[1]))
tokenizer["added_tokens"] = []
json.dump(tokenizer, open(sys.argv[2], "w"))
PY
# The same BPE with Llama 3's document markers in place of <|endoftext|>, and its
# post-processor: <|begin_of_text|> before a text encoded with add_special_tokens.
python3 - "$dir/bpe/tokenizer.json" "$dir/llama3_markers.json" <<'PY'
import json, sys
tokenizer = json.load(open(sys.argv[1]))
past = max(tokenizer["model"]["vocab"].values()) + 1
begin = dict(tokenizer["added_tokens"][0], id=past, content="<|begin_of_text|>")
end = dict(begin, id=past + 1, content="<|end_of_text|>")
tokenizer["added_tokens"] = [begin, end]
special = {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}
template = {"type": "TemplateProcessing",
            "single": [special, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [special, {"Sequence": {"id": "A", "type_id": 0}},
                     special, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [past],
                                                     "tokens": ["<|begin_of_text|>"]}}}
tokenizer["post_processor"] = {"type": "Sequence",
                               "processors": [tokenizer["post_processor"], template]}
json.dump(tokenizer, open(sys.argv[2], "w"))
PY

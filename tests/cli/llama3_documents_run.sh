#!/usr/bin/env bash
# llama3_documents_run.sh BIN_DIR LLAMA_CONFIG TOKENIZER OUT_DIR
# Documents with a Llama 3 tokenizer (TOKENIZER: its markers and its post-processor's template,
# <|begin_of_text|> before a text) end to end:
# 1. ternion-prepare --jsonl puts each document between <|begin_of_text|> and <|end_of_text|>;
# 2. a Llama trained on them is prompted as transformers' tokenizer(prompt) encodes the prompt,
#    after <|begin_of_text|>: ternion-generate's logits of the prompt "x" equal those a second
#    reader (llama_reference.py) computes from the export for exactly [<|begin_of_text|>, x],
#    and an empty prompt is that token alone;
# 3. the export's tokenizer.json keeps the template, and its configs name both markers.
set -u
bin=$1 config=$2 tokenizer=$3 out=$4
rm -rf "$out"
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }
python3 - "$out/docs.jsonl" <<'PY'
import json, random, sys
random.seed(7)
words = ["the cat", "a dog", "sat", "ran", "on the mat", "far away", "and then", "slept"]
with open(sys.argv[1], "w") as f:
    for i in range(400):
        text = " ".join(random.choice(words) for _ in range(random.randint(1, 4))) + "."
        f.write(json.dumps({"text": text}) + "\n")
PY
"$bin/ternion-prepare" --input "$out/docs.jsonl" --jsonl --tokenizer "$tokenizer" \
  --output "$out/data" --val-fraction 0 > "$out/prepare.log" 2>&1 ||
  { cat "$out/prepare.log"; fail "ternion-prepare --jsonl"; }
read -r begin end x vocab < <(python3 - "$tokenizer" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ids = {a["content"]: a["id"] for a in t["added_tokens"]}
vocab = max(list(t["model"]["vocab"].values()) + list(ids.values())) + 1
print(ids["<|begin_of_text|>"], ids["<|end_of_text|>"], t["model"]["vocab"]["x"], vocab)
PY
) || fail "reading $tokenizer"
python3 - "$out/data/train.bin" "$begin" "$end" <<'PY' || fail "the token file's markers"
import struct, sys
data = open(sys.argv[1], "rb").read()
begin, end = int(sys.argv[2]), int(sys.argv[3])
n = struct.unpack_from("<i", data, 8)[0]
tokens = struct.unpack_from("<%dH" % n, data, 1024)
starts = [i for i, t in enumerate(tokens) if t == begin]
ends = [i for i, t in enumerate(tokens) if t == end]
if len(starts) != 400 or len(ends) != 400 or starts[0] != 0 or ends[-1] != n - 1:
    sys.exit("expected 400 documents between the markers: %d begin, %d end"
             % (len(starts), len(ends)))
if any(e >= s for e, s in zip(ends, starts[1:])) or any(s >= e for s, e in zip(starts, ends)):
    sys.exit("the markers do not alternate")
print("token files: 400 documents between <|begin_of_text|> (%d) and <|end_of_text|> (%d)" %
      (begin, end))
PY

"$bin/ternion-train" --config "$config" --set "data.train=$out/data/train.bin" \
  --set "data.tokenizer=$tokenizer" --set "model.vocab_size=$vocab" --set model.dropout=0 \
  --set training.steps=6 --set training.sample_tokens=8 --set "training.sample_prompt=x" \
  --set "checkpoint.save_dir=$out/ckpt" > "$out/train.log" 2>&1 ||
  { cat "$out/train.log"; fail "training on the documents"; }
"$bin/ternion-generate" --checkpoint "$out/ckpt" --prompt x --max-tokens 0 \
  --logits "$out/logits.json" > /dev/null || fail "ternion-generate --logits"
# An empty prompt is [<|begin_of_text|>]: the model starts a document, as generate does.
"$bin/ternion-generate" --checkpoint "$out/ckpt" --prompt "" --max-tokens 0 \
  --logits "$out/logits_empty.json" > /dev/null || fail "ternion-generate --prompt ''"
python3 -c 'import json, sys; sys.exit(len(json.load(open(sys.argv[1]))) != 1)' \
  "$out/logits_empty.json" || fail "an empty prompt is not one token"
"$bin/ternion-export" --checkpoint "$out/ckpt" --output "$out/hf" > "$out/export.log" 2>&1 ||
  { cat "$out/export.log"; fail "ternion-export"; }
python3 "$(dirname "$0")/llama_reference.py" "$out/hf" --tokens "$begin,$x" \
  --logits "$out/logits.json" --tolerance 1e-4 ||
  fail "the prompt's logits are not those of [<|begin_of_text|>, x]"

python3 - "$out/hf" "$begin" "$end" <<'PY' || fail "the export's tokenizer files"
import json, sys
d, begin, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
config = json.load(open(d + "/config.json"))
if (config["bos_token_id"], config["eos_token_id"]) != (begin, end):
    sys.exit("config.json: bos %s, eos %s" % (config["bos_token_id"], config["eos_token_id"]))
names = json.load(open(d + "/tokenizer_config.json"))
if (names["bos_token"], names["eos_token"]) != ("<|begin_of_text|>", "<|end_of_text|>"):
    sys.exit("tokenizer_config.json: %s, %s" % (names["bos_token"], names["eos_token"]))
processors = json.load(open(d + "/tokenizer.json"))["post_processor"]["processors"]
if processors[1]["special_tokens"]["<|begin_of_text|>"]["ids"] != [begin]:
    sys.exit("the exported tokenizer.json lost the template")
PY
echo "llama 3 documents: between their markers; a prompt starts after <|begin_of_text|>"

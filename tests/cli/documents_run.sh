#!/usr/bin/env bash
# documents_run.sh BIN_DIR CONFIG OUT_DIR
# Documents in JSON Lines end to end:
# 1. ternion-prepare --jsonl trains a BPE on 600 short documents and writes their tokens, each
#    document after <|endoftext|>: the token files hold exactly one such id a document, and
#    each file starts with one (the validation split takes whole documents, where a cut at
#    --val-fraction 0.15 of the tokens would fall inside one);
# 2. CONFIG trains on them and saves; ternion-generate stops where the model samples the end of
#    text: its text is --ignore-eos's text cut before the first <|endoftext|>, which the
#    trainer's own sample, drawn the same way, is too;
# 3. ternion-export names that id as Hugging Face's bos_token_id and eos_token_id, and its text
#    in tokenizer_config.json; an export of a bytes model into the same folder removes both
#    tokenizer files.
set -u
bin=$1 config=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }
python3 - "$out/docs.jsonl" <<'PY'
import json, random, sys
random.seed(5)
words = ["the cat", "a dog", "sat", "ran", "on the mat", "far away", "and then", "slept"]
with open(sys.argv[1], "w") as f:
    for i in range(600):
        text = " ".join(random.choice(words) for _ in range(random.randint(1, 4))) + "."
        f.write(json.dumps({"id": i, "text": text}) + "\n")
PY
"$bin/ternion-prepare" --input "$out/docs.jsonl" --jsonl --output "$out/data" \
  --train-tokenizer --vocab-size 300 --val-fraction 0.15 > "$out/prepare.log" 2>&1 ||
  { cat "$out/prepare.log"; fail "ternion-prepare --jsonl"; }
cat "$out/prepare.log"
grep -q "600 documents, each after <|endoftext|>" "$out/prepare.log" ||
  fail "ternion-prepare does not report the documents"
python3 - "$out/data" <<'PY' || fail "the token files' end-of-text ids"
import json, struct, sys
d = sys.argv[1]
added = json.load(open(d + "/tokenizer.json"))["added_tokens"]
eot = [t["id"] for t in added if t["content"] == "<|endoftext|>"][0]
count = 0
for split in ("train", "val"):
    data = open("%s/%s.bin" % (d, split), "rb").read()
    n = struct.unpack_from("<i", data, 8)[0]
    tokens = struct.unpack_from("<%dH" % n, data, 1024)
    if tokens[0] != eot:  # the validation split too: it takes whole documents
        sys.exit("%s.bin does not start with <|endoftext|> (%d)" % (split, eot))
    count += tokens.count(eot)
print("token files: %d <|endoftext|> ids (id %d)" % (count, eot))
sys.exit(0 if count == 600 else "expected 600 <|endoftext|> ids, one a document")
PY

"$bin/ternion-train" --config "$config" --set "data.train=$out/data/train.bin" \
  --set "data.tokenizer=$out/data/tokenizer.json" --set model.vocab_size=300 \
  --set training.steps=40 --set training.sample_tokens=60 --set "training.sample_prompt=the cat" \
  --set "checkpoint.save_dir=$out/ckpt" --set checkpoint.save_interval=40 > "$out/train.log" 2>&1 ||
  { cat "$out/train.log"; fail "training on the documents"; }
sed -n '/^ternion: sample/,$p' "$out/train.log" | tail -n +2 > "$out/sample.txt"

generate=("$bin/ternion-generate" --checkpoint "$out/ckpt" --prompt "the cat" --max-tokens 60)
"${generate[@]}" --ignore-eos > "$out/through.txt" || fail "ternion-generate --ignore-eos"
"${generate[@]}" > "$out/stopped.txt" || fail "ternion-generate"
echo "--ignore-eos: $(head -c 200 "$out/through.txt")"
echo "stopped:      $(cat "$out/stopped.txt")"
python3 - "$out/through.txt" "$out/stopped.txt" "$out/sample.txt" <<'PY' || exit 1
import sys
through, stopped, sample = (open(p, encoding="utf-8").read() for p in sys.argv[1:])
at = through.find("<|endoftext|>")
if at < len("the cat"):
    sys.exit("FAILED: no <|endoftext|> in 60 tokens after the prompt: nothing was tested")
if stopped != through[:at] + "\n":
    sys.exit("FAILED: ternion-generate did not stop before the first <|endoftext|>")
if sample != stopped:
    sys.exit("FAILED: the trainer's sample did not stop where ternion-generate does")
print("generation stops before <|endoftext|> at character %d" % at)
PY

"$bin/ternion-export" --checkpoint "$out/ckpt" --output "$out/hf" > "$out/export.log" 2>&1 ||
  { cat "$out/export.log"; fail "ternion-export"; }
python3 - "$out/hf" <<'PY' || fail "the exported config's token ids"
import json, sys
config = json.load(open(sys.argv[1] + "/config.json"))
added = json.load(open(sys.argv[1] + "/tokenizer.json"))["added_tokens"]
eot = [t["id"] for t in added if t["content"] == "<|endoftext|>"][0]
got = (config.get("bos_token_id"), config.get("eos_token_id"))
print("config.json: bos_token_id %s, eos_token_id %s" % got)
if got != (eot, eot):
    sys.exit("expected both to be %d" % eot)
tokenizer_config = json.load(open(sys.argv[1] + "/tokenizer_config.json"))
names = (tokenizer_config["bos_token"], tokenizer_config["eos_token"])
print("tokenizer_config.json: bos_token %s, eos_token %s, model_max_length %s" %
      (names + (tokenizer_config["model_max_length"],)))
sys.exit(0 if names == ("<|endoftext|>",) * 2 and tokenizer_config["model_max_length"] == 32
         else "tokenizer_config.json names other tokens or another context")
PY
"$bin/ternion-prepare" --builtin --bytes 20000 --output "$out/bytes" > /dev/null || fail "bytes data"
"$bin/ternion-train" --config "$config" --set "data.train=$out/bytes/train.bin" \
  --set training.steps=2 --set training.sample_tokens=0 --set "checkpoint.save_dir=$out/bytes_ckpt" \
  > "$out/bytes.log" 2>&1 || { cat "$out/bytes.log"; fail "the bytes run"; }
"$bin/ternion-export" --checkpoint "$out/bytes_ckpt" --output "$out/hf" > "$out/export.log" 2>&1 ||
  { cat "$out/export.log"; fail "ternion-export of the bytes model"; }
[ ! -e "$out/hf/tokenizer.json" ] && [ ! -e "$out/hf/tokenizer_config.json" ] ||
  fail "the bytes model's export left the earlier export's tokenizer files"
python3 -c 'import json, sys
c = json.load(open(sys.argv[1]))
sys.exit(c["bos_token_id"] is not None or c["eos_token_id"] is not None)' "$out/hf/config.json" ||
  fail "a bytes model's config.json names token ids"
echo "documents: prepared with one <|endoftext|> each; generation stops there; export names it"

"""Our byte-level BPE against Hugging Face's `tokenizers`, token for token.

1. Tokenizers encoded by both (add_special_tokens=False), the ids must be equal:
  gpt2          GPT-2-style ByteLevel BPE trained by tokenizers on the texts (all 256 bytes);
  gpt2_legacy   the same file with its merges written as "a b" strings;
  gpt2_partial  trained by tokenizers on the built-in corpus alone without the byte alphabet:
                bytes it never saw are dropped;
  gpt2_unk      likewise with unk_token "<unk>" and fuse_unk: they become one <unk>;
  llama3        Llama-3-style: Split(Llama 3's pattern, Isolated) then ByteLevel without regex,
                ignore_merges, trained by tokenizers, with added tokens matched in the raw text
                (special) and in the normalized text (not special), and a TemplateProcessing;
  ours          trained by our `train` and written by us: tokenizers must load it.
   Each text is encoded whole (ours on 1, 2 and 5 threads, which must not matter), the
   multilingual one line by line too, and 3000 random strings of awkward characters (Unicode
   spaces, contractions, scripts, combining marks, emoji, pieces of added tokens) one by one.
   Decoding ours gives the text back (and tokenizers' decode does) where every byte has a token.
2. Our trainer against tokenizers' BpeTrainer (min_frequency 2): on text where both count the
   same words (tokenizers counts each line apart, so: no blank lines, no spaces at line ends, no
   special token's text), the merges must be the same, in the same order.

  bpe_hf_compare.py --tool TERNION_BPE_TOOL --work DIR --text NAME=PATH [--text NAME=PATH ...]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB = 2000


def train_gpt2(files, path, alphabet=True, unk=False):
    model = models.BPE(unk_token="<unk>", fuse_unk=True) if unk else models.BPE()
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    specials = ["<unk>", "<|endoftext|>"] if unk else ["<|endoftext|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=specials, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet() if alphabet else [])
    tok.train(files, trainer)
    tok.save(path)


def train_llama3(files, path):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train(files, trainer)
    tok.add_special_tokens(["<|endoftext|>"])
    # Matched in the normalized text, after the special tokens: "ext|>mo" never wins over
    # "<|endoftext|>", though it begins further left inside it in "...endoftext|>more".
    tok.add_tokens([AddedToken("Hello wor", normalized=True), AddedToken("ext|>mo", normalized=True)])
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 0)])
    tok.save(path)


def check_trainer(tool, work, corpus, failures):
    text = ""
    for path in corpus:
        with open(path, encoding="utf-8", newline="") as f:
            text += f.read()
    # tokenizers' trainer counts special tokens' text as words, ours cuts it out: none here.
    for special in ("<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>"):
        text = text.replace(special, "")
    lines = [line.strip() for line in text.split("\n")]
    text = "".join(line + "\n" for line in lines if line)
    text_path = os.path.join(work, "same_words.txt")
    with open(text_path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, min_frequency=2, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([text_path], trainer)
    theirs = json.loads(tok.to_str())["model"]
    ours_path = os.path.join(work, "ours_same_words.json")
    run_tool(tool, "train", text_path, str(VOCAB), ours_path, "<|endoftext|>")
    with open(ours_path, encoding="utf-8") as f:
        ours = json.load(f)["model"]
    same_model("trainer", theirs, ours, failures)

    # Llama 3's style: its Split pattern, its markers, and its template, which tokenizers must
    # apply to our file as to its own.
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, min_frequency=2, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([text_path], trainer)
    ours_path = os.path.join(work, "ours_llama3_same_words.json")
    run_tool(tool, "train-llama3", text_path, str(VOCAB), ours_path, *specials)
    with open(ours_path, encoding="utf-8") as f:
        ours = json.load(f)["model"]
    same_model("trainer (llama3)", json.loads(tok.to_str())["model"], ours, failures)
    loaded = Tokenizer.from_file(ours_path)
    sample = lines[0] if lines else "x"
    if loaded.encode(sample).ids != [0] + tok.encode(sample).ids:
        failures.append("trainer (llama3): our file does not put <|begin_of_text|> before a text")


def same_model(name, theirs, ours, failures):
    merges = theirs["merges"], ours["merges"]
    n = next((i for i, (a, b) in enumerate(zip(*merges)) if a != b), min(map(len, merges)))
    if merges[0] != merges[1]:
        failures.append(f"{name}: {len(merges[0])} merges by tokenizers, {len(merges[1])} ours; "
                        f"first difference at {n}: {merges[0][n:n + 2]} against {merges[1][n:n + 2]}")
    elif theirs["vocab"] != ours["vocab"]:
        failures.append(f"{name}: the same merges but another vocabulary")
    else:
        print(f"  {name}: the same {len(merges[0])} merges as tokenizers' BpeTrainer")


AWKWARD = (list("abcXYZ'sStTdDmMlLrReEvV 0123456789\t\n\r\x0b\x0c!?.,-_<|>") +
           ["\u00a0", "\u0085", "\u2028", "\u2029", "\u3000", "\u180e", "\u200b", "\u2009", "\u1680",
            "\u202f", "\u205f", "\x1c", "\x1f", "\x00", "\x7f", "\u00e9", "e\u0301", "\u00df", "\u017f",
            "\u212a", "\u0130", "\u0131", "\u4e2d", "\u6587", "\ud55c", "\u0645", "\u0939", "\u093f",
            "\u0416", "\u03a9", "\U0001F600", "\U0001F44D\U0001F3FD", "\u200d", "\U0001F1EB\U0001F1F7",
            "\u00bd", "\u00b2", "\u0663", "\u0967", "\u216b", "\u2460", "\u2019", "\u201c",
            "<|endoftext|>", "<|end", "ext|>mo", "Hello wor", "<|begin_of_text|>"])


def random_strings(count, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(AWKWARD) for _ in range(rng.randint(0, 30))) for _ in range(count)]


def compare_each(tool, work, name, path, tok, strings, failures):
    strings_path = os.path.join(work, "strings.json")
    with open(strings_path, "w", encoding="utf-8") as f:
        json.dump(strings, f)
    out, _ = run_tool(tool, "encode-each", path, strings_path)
    bad = 0
    for text, line in zip(strings, out.split("\n")):
        hf = tok.encode(text, add_special_tokens=False).ids
        if ids_of(line) != hf:
            bad += 1
            if bad <= 3:
                failures.append(first_difference(f"{name} on {text!r}", hf, ids_of(line), tok))
    print(f"  {name} on {len(strings)} random strings: {bad} differ")


def legacy_merges(source, path):
    with open(source, encoding="utf-8") as f:
        data = json.load(f)
    data["model"]["merges"] = [" ".join(pair) for pair in data["model"]["merges"]]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)


def run_tool(tool, *args):
    result = subprocess.run([tool, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if result.returncode != 0:
        sys.exit(f"FAILED: {os.path.basename(tool)} {' '.join(args)}: {result.stderr.decode()}")
    return result.stdout.decode(), result.stderr.decode()


def ids_of(line):
    return [int(x) for x in line.split()]


def first_difference(name, hf, ours, tok):
    n = next((i for i, (a, b) in enumerate(zip(hf, ours)) if a != b), min(len(hf), len(ours)))
    show = lambda ids: [tok.id_to_token(i) for i in ids[max(0, n - 3):n + 4]]
    return (f"{name}: tokenizers gives {len(hf)} ids, ours {len(ours)}; first difference at "
            f"{n}: tokenizers {hf[max(0, n - 3):n + 4]} {show(hf)}, ours {ours[max(0, n - 3):n + 4]} {show(ours)}")


def split_lines(text):
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return [line for line in lines if line]


def compare(tool, work, name, path, tok, texts, threads, failures):
    for text_name, text_path in texts:
        with open(text_path, encoding="utf-8", newline="") as f:
            text = f.read()
        label = f"{name} on {text_name}"
        hf = tok.encode(text, add_special_tokens=False).ids
        for count in threads:
            out, _ = run_tool(tool, "encode", path, text_path, str(count))
            ours = ids_of(out)
            if ours != hf:
                failures.append(first_difference(f"{label} ({count} threads)", hf, ours, tok))
        if text_name == "multilingual":
            out, _ = run_tool(tool, "encode-lines", path, text_path)
            hf_lines = [tok.encode(line, add_special_tokens=False).ids for line in split_lines(text)]
            ours_lines = [ids_of(line) for line in out.split("\n")[:-1]]
            for i, (a, b) in enumerate(zip(hf_lines, ours_lines)):
                if a != b:
                    failures.append(first_difference(f"{label}, line {i + 1}", a, b, tok))
            if len(hf_lines) != len(ours_lines):
                failures.append(f"{label}: {len(hf_lines)} lines, ours {len(ours_lines)}")
        # Decoding: ours gives back the bytes the ids stand for; with every byte in the
        # vocabulary, that is the text (and tokenizers' decode agrees).
        ids_path = os.path.join(work, "ids.txt")
        decoded_path = os.path.join(work, "decoded.txt")
        with open(ids_path, "w") as f:
            f.write(" ".join(map(str, hf)))
        run_tool(tool, "decode", path, ids_path, decoded_path)
        with open(decoded_path, "rb") as f:
            decoded = f.read()
        hf_decoded = tok.decode(hf, skip_special_tokens=False)
        if name in ("gpt2_partial", "gpt2_unk"):
            if "\ufffd" not in hf_decoded and "<unk>" not in hf_decoded and decoded != hf_decoded.encode():
                failures.append(f"{label}: our decode differs from tokenizers'")
        else:
            if decoded != text.encode():
                failures.append(f"{label}: our decode does not give the text back")
            if hf_decoded != text:
                failures.append(f"{label}: tokenizers' decode does not give the text back")
        print(f"  {label}: {len(hf)} tokens, {len(text.encode())} bytes: same ids")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--text", action="append", required=True, help="NAME=PATH")
    args = parser.parse_args()
    texts = [tuple(item.split("=", 1)) for item in args.text]
    work = args.work
    os.makedirs(work, exist_ok=True)

    # The multilingual text a hundred times: long enough to be cut among several threads.
    multilingual = dict(texts)["multilingual"]
    with open(multilingual, encoding="utf-8", newline="") as f:
        repeated = f.read() * 100
    repeated_path = os.path.join(work, "multilingual_x100.txt")
    with open(repeated_path, "w", encoding="utf-8", newline="") as f:
        f.write(repeated)
    texts.append(("multilingual_x100", repeated_path))
    corpus = [path for _, path in texts if not path.endswith("_x100.txt")]
    builtin = [path for name, path in texts if name == "builtin"]

    start = time.perf_counter()
    paths = {name: os.path.join(work, name + ".json")
             for name in ("gpt2", "gpt2_legacy", "gpt2_partial", "gpt2_unk", "llama3", "ours")}
    train_gpt2(corpus, paths["gpt2"])
    legacy_merges(paths["gpt2"], paths["gpt2_legacy"])
    train_gpt2(builtin, paths["gpt2_partial"], alphabet=False)
    train_gpt2(builtin, paths["gpt2_unk"], alphabet=False, unk=True)
    train_llama3(corpus, paths["llama3"])
    training_text = os.path.join(work, "training_text.txt")
    with open(training_text, "wb") as out:
        for path in corpus:
            with open(path, "rb") as f:
                out.write(f.read())
    _, log = run_tool(args.tool, "train", training_text, str(VOCAB), paths["ours"], "<|endoftext|>")
    print(f"tokenizers trained in {time.perf_counter() - start:.1f} s; ours: {log.strip()}")

    failures = []
    check_trainer(args.tool, work, corpus, failures)
    for name, path in paths.items():
        tok = Tokenizer.from_file(path)
        if name == "ours" and tok.get_vocab_size() != VOCAB:
            failures.append(f"ours: tokenizers reads {tok.get_vocab_size()} tokens, not {VOCAB}")
        compare(args.tool, work, name, path, tok, texts, (1, 2, 5), failures)
        compare_each(args.tool, work, name, path, tok, random_strings(3000, 1), failures)
    if failures:
        print("FAILED:\n" + "\n".join(failures))
        sys.exit(1)
    print("all tokenizers: our ids are tokenizers' ids")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""llama_reference.py HF_DIR --tokens 1,2,3 [--logits FILE.json] [--tolerance 1e-4]
llama_reference.py --self-test

A second, independent reader of a Hugging Face Llama directory (config.json and an F32
model.safetensors; standard library only): the logits of one token sequence, in double precision,
from the published formulas (transformers' modeling_llama.py):
  RMSNorm        x * rsqrt(mean(x^2) + eps) * w
  rotary         rotate-half on q and k of each head, inv_freq_i = 1 / theta^(2i / head_dim),
                 positions 0..T-1
  attention      grouped-query: query head h reads key/value head h // (H / G); causal softmax
                 of q.k / sqrt(head_dim)
  MLP            down(silu(gate(x)) * up(x))
  head           lm_head.weight, or embed_tokens.weight where tie_word_embeddings
With --logits (a JSON array of T rows of vocab_size floats, as Ternion writes them) it compares
and exits 1 naming the largest difference where it exceeds the tolerance; without, it prints
the logits as JSON.
"""
import argparse
import json
import math
import struct
import sys


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def read_safetensors(path):
    """name -> (shape, flat list of floats); F32 only."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            fail("%s: %s is %s; this reader takes F32 only" % (path, name, entry["dtype"]))
        begin, end = entry["data_offsets"]
        tensors[name] = (entry["shape"], struct.unpack("<%df" % ((end - begin) // 4), data[begin:end]))
    return tensors


class Llama:
    def __init__(self, config, tensors):
        self.c = config["hidden_size"]
        self.n_head = config["num_attention_heads"]
        self.n_kv = config.get("num_key_value_heads") or self.n_head
        self.hs = config.get("head_dim") or self.c // self.n_head
        self.n_layer = config["num_hidden_layers"]
        self.vocab = config["vocab_size"]
        self.ff = config["intermediate_size"]
        self.eps = config.get("rms_norm_eps", 1e-6)  # LlamaConfig's defaults
        # transformers 4.x: top-level rope_theta and rope_scaling; 5.x: rope_parameters.
        rope = config.get("rope_parameters") or config.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in ("default", "llama3"):
            fail("rope_type %r: this reference computes plain and llama3 rotary embeddings only"
                 % rope_type)
        theta = rope.get("rope_theta", config.get("rope_theta", 10000.0))
        self.inv_freq = inverse_frequencies(self.hs, theta, rope if rope_type == "llama3" else None)
        self.tied = config.get("tie_word_embeddings", False)
        self.tensors = tensors

    def matrix(self, name, rows, cols):
        shape, flat = self.tensors[name]
        if shape != [rows, cols]:
            fail("%s is %s, config.json implies %s" % (name, shape, [rows, cols]))
        return [flat[r * cols:(r + 1) * cols] for r in range(rows)]

    def vector(self, name):
        shape, flat = self.tensors[name]
        if shape != [self.c]:
            fail("%s is %s, config.json implies %s" % (name, shape, [self.c]))
        return flat

    def logits(self, tokens):
        c, hs = self.c, self.hs
        embed = self.matrix("model.embed_tokens.weight", self.vocab, c)
        x = [list(embed[t]) for t in tokens]
        for layer in range(self.n_layer):
            p = "model.layers.%d." % layer
            h = [rms_norm(row, self.vector(p + "input_layernorm.weight"), self.eps) for row in x]
            wq = self.matrix(p + "self_attn.q_proj.weight", self.n_head * hs, c)
            wk = self.matrix(p + "self_attn.k_proj.weight", self.n_kv * hs, c)
            wv = self.matrix(p + "self_attn.v_proj.weight", self.n_kv * hs, c)
            q = [rotate_heads(matvec(wq, row), pos, self.inv_freq) for pos, row in enumerate(h)]
            k = [rotate_heads(matvec(wk, row), pos, self.inv_freq) for pos, row in enumerate(h)]
            v = [matvec(wv, row) for row in h]
            attn = attention(q, k, v, self.n_head, self.n_kv, hs)
            wo = self.matrix(p + "self_attn.o_proj.weight", c, self.n_head * hs)
            x = [add(row, matvec(wo, a)) for row, a in zip(x, attn)]

            h = [rms_norm(row, self.vector(p + "post_attention_layernorm.weight"), self.eps) for row in x]
            gate = self.matrix(p + "mlp.gate_proj.weight", self.ff, c)
            up = self.matrix(p + "mlp.up_proj.weight", self.ff, c)
            down = self.matrix(p + "mlp.down_proj.weight", c, self.ff)
            x = [add(row, matvec(down, [silu(g) * u for g, u in zip(matvec(gate, r), matvec(up, r))]))
                 for row, r in zip(x, h)]
        x = [rms_norm(row, self.vector("model.norm.weight"), self.eps) for row in x]
        head = embed if self.tied else self.matrix("lm_head.weight", self.vocab, c)
        return [matvec(head, row) for row in x]


def matvec(w, x):
    """w [out][in] (nn.Linear's layout) times x [in]."""
    return [math.fsum(a * b for a, b in zip(row, x)) for row in w]


def add(a, b):
    return [p + q for p, q in zip(a, b)]


def silu(z):
    return z / (1.0 + math.exp(-z))


def rms_norm(x, w, eps):
    scale = 1.0 / math.sqrt(math.fsum(v * v for v in x) / len(x) + eps)
    return [v * scale * wi for v, wi in zip(x, w)]


def inverse_frequencies(hs, theta, llama3):
    """theta^(-2i/hs) for each pair i of a head; with llama3 (its rope_scaling fields), Llama
    3.1's scaling: wavelengths 2 pi / f below original / high_freq_factor kept, above original /
    low_freq_factor divided by factor, between them blended linearly in original / wavelength."""
    freqs = [theta ** (-2.0 * i / hs) for i in range(hs // 2)]
    if not llama3:
        return freqs
    factor, low, high = llama3["factor"], llama3["low_freq_factor"], llama3["high_freq_factor"]
    original = llama3["original_max_position_embeddings"]
    out = []
    for f in freqs:
        wavelength = 2 * math.pi / f
        if wavelength < original / high:
            out.append(f)
        elif wavelength > original / low:
            out.append(f / factor)
        else:
            smooth = (original / wavelength - low) / (high - low)
            out.append((1 - smooth) * f / factor + smooth * f)
    return out


def rotate_heads(x, pos, inv_freq):
    """Rotary embedding (rotate-half) of every head of x at position pos: feature i of a head
    pairs with feature i + hs/2, turned by pos * inv_freq[i]."""
    out = list(x)
    half = len(inv_freq)
    hs = 2 * half
    for base in range(0, len(x), hs):
        for i in range(half):
            angle = pos * inv_freq[i]
            cos, sin = math.cos(angle), math.sin(angle)
            a, b = x[base + i], x[base + half + i]
            out[base + i] = a * cos - b * sin
            out[base + half + i] = b * cos + a * sin
    return out


def attention(q, k, v, n_head, n_kv, hs):
    """Causal grouped-query attention; q [T][n_head * hs], k and v [T][n_kv * hs]."""
    group = n_head // n_kv
    out = [[0.0] * (n_head * hs) for _ in q]
    for h in range(n_head):
        qs, ks = slice(h * hs, (h + 1) * hs), slice((h // group) * hs, (h // group + 1) * hs)
        keys, values = [row[ks] for row in k], [row[ks] for row in v]
        for i in range(len(q)):
            scores = [math.fsum(a * b for a, b in zip(q[i][qs], keys[j])) / math.sqrt(hs)
                      for j in range(i + 1)]
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            total = math.fsum(weights)
            for d in range(hs):
                out[i][h * hs + d] = math.fsum(w * values[j][d] for j, w in enumerate(weights)) / total
    return out


def self_test():
    """The building blocks on cases worked by hand."""
    def close(label, got, want):
        if any(abs(g - w) > 1e-12 for g, w in zip(got, want)) or len(got) != len(want):
            fail("%s: %s, expected %s" % (label, got, want))
    # mean(x^2) of [3, 4] is 12.5.
    close("rms_norm", rms_norm([3.0, 4.0], [1.0, 2.0], 0.0), [3 / math.sqrt(12.5), 8 / math.sqrt(12.5)])
    close("rms_norm eps", rms_norm([1.0, 1.0], [1.0, 1.0], 3.0), [0.5, 0.5])
    # Head of 4 at position 1, theta 100: pair (0, 2) turns by 1 radian, pair (1, 3) by 0.1.
    close("rotary", rotate_heads([1.0, 0.0, 0.0, 1.0], 1, inverse_frequencies(4, 100.0, None)),
          [math.cos(1), -math.sin(0.1), math.sin(1), math.cos(0.1)])
    close("rotary at 0", rotate_heads([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], 0, inverse_frequencies(4, 1e4, None)),
          [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    # Position 2 of a second head: each pair turns by 2 * its frequency.
    close("rotary second head", rotate_heads([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0], 2, inverse_frequencies(4, 100.0, None))[4:],
          [0.0, math.cos(0.2), 0.0, math.sin(0.2)])
    # Llama 3 scaling, head 4, theta 100 (frequencies 1 and 0.1), original context 16 with
    # factors 1 and 4: wavelength 2 pi (between 4 and 16) blends, 20 pi (above 16) divides.
    llama3 = {"factor": 2.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 16}
    smooth = (16 / (2 * math.pi) - 1) / 3
    close("llama3 scaling", inverse_frequencies(4, 100.0, llama3), [(1 - smooth) / 2 + smooth, 0.05])
    close("silu", [silu(0.0), silu(1.0)], [0.0, 1 / (1 + math.exp(-1))])
    # Two query heads over one key/value head: the first token sees only itself; the second,
    # with equal scores, averages the two values.
    q = [[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    k = [[1.0, 0.0], [2.0, 0.0]]
    v = [[1.0, 2.0], [3.0, 6.0]]
    close("attention", sum(attention(q, k, v, 2, 1, 2), []), [1.0, 2.0, 1.0, 2.0, 2.0, 4.0, 2.0, 4.0])
    # Four query heads over two key/value heads: heads 0 and 1 read the first, 2 and 3 the second.
    close("grouping", attention([[0.0] * 8], [[0.0] * 4], [[1.0, 2.0, 3.0, 4.0]], 4, 2, 2)[0],
          [1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0])
    # Query head 1 reads key/value head 1 (of 2): scores 0 and 10 / sqrt(2) for token 1.
    q = [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 10.0, 0.0]]
    k = [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
    v = [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    w = 1 / (1 + math.exp(10 / math.sqrt(2)))
    close("softmax", attention(q, k, v, 2, 2, 2)[1], [0.0, 0.0, w, 1 - w])
    print("llama_reference self-test: passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hf_dir", nargs="?")
    parser.add_argument("--tokens", help="comma-separated token ids")
    parser.add_argument("--logits", help="Ternion's logits, a JSON array of T rows of vocab_size floats")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.hf_dir or not args.tokens:
        parser.error("HF_DIR and --tokens are needed")
    config = json.load(open(args.hf_dir + "/config.json"))
    if config.get("model_type", "llama") != "llama":
        fail("config.json gives model_type %r, not llama" % config["model_type"])
    model = Llama(config, read_safetensors(args.hf_dir + "/model.safetensors"))
    tokens = [int(t) for t in args.tokens.split(",")]
    if not all(0 <= t < model.vocab for t in tokens):
        fail("a token is outside the vocabulary of %d" % model.vocab)
    reference = model.logits(tokens)
    if not args.logits:
        json.dump(reference, sys.stdout)
        print()
        return
    theirs = json.load(open(args.logits))
    if len(theirs) != len(tokens) or any(len(row) != model.vocab for row in theirs):
        fail("%s is not %d rows of %d logits" % (args.logits, len(tokens), model.vocab))
    # A NaN counts as an infinite difference.
    diff, where = max((abs(a - b) if abs(a - b) == abs(a - b) else math.inf, (t, i))
                      for t, (ra, rb) in enumerate(zip(theirs, reference))
                      for i, (a, b) in enumerate(zip(ra, rb)))
    if diff > args.tolerance:
        fail("logits differ from the reference by %.3g (token %d, logit %d; tolerance %g)"
             % (diff, where[0], where[1], args.tolerance))
    print("llama_reference: %d x %d logits agree, max abs difference %.3g"
          % (len(tokens), model.vocab, diff))


if __name__ == "__main__":
    main()

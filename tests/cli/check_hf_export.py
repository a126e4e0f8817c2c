#!/usr/bin/env python3
"""check_hf_export.py CHECKPOINT_STEP_DIR EXPORT_DIR

A second, independent reader of the safetensors format (standard library only) checks what
ternion-export wrote: every GPT-2 tensor with the shape config.json implies, the embedding
equal to the checkpoint's unpadded `wte`, and an MLP weight equal to the transpose of ours.
"""
import json
import struct
import sys


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32", (name, entry["dtype"])
        begin, end = entry["data_offsets"]
        values = struct.unpack("<%df" % ((end - begin) // 4), data[begin:end])
        tensors[name] = (entry["shape"], values)
    return tensors


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def main():
    step_dir, export_dir = sys.argv[1], sys.argv[2]
    config = json.load(open(export_dir + "/config.json"))
    exported = read_safetensors(export_dir + "/model.safetensors")
    c, v, t, layers = config["n_embd"], config["vocab_size"], config["n_positions"], config["n_layer"]
    ff = config["n_inner"] or 4 * c
    want = {"transformer.wte.weight": [v, c], "transformer.wpe.weight": [t, c],
            "transformer.ln_f.weight": [c], "transformer.ln_f.bias": [c]}
    for i in range(layers):
        p = "transformer.h.%d." % i
        want.update({p + "ln_1.weight": [c], p + "ln_1.bias": [c], p + "ln_2.weight": [c], p + "ln_2.bias": [c],
                     p + "attn.c_attn.weight": [c, 3 * c], p + "attn.c_attn.bias": [3 * c],
                     p + "attn.c_proj.weight": [c, c], p + "attn.c_proj.bias": [c],
                     p + "mlp.c_fc.weight": [c, ff], p + "mlp.c_fc.bias": [ff],
                     p + "mlp.c_proj.weight": [ff, c], p + "mlp.c_proj.bias": [c]})
    if set(exported) != set(want):
        fail("tensor names differ: %s" % sorted(set(exported) ^ set(want)))
    for name, shape in want.items():
        if exported[name][0] != shape:
            fail("%s is %s, GPT-2 wants %s" % (name, exported[name][0], shape))
    # The checkpoint's own pieces (one rank saved it).
    index = json.load(open(step_dir + "/rank_00000.json"))
    pieces = read_safetensors(step_dir + "/rank_00000.safetensors")
    ours = {p["tensor"]: (p["global_shape"], pieces[p["key"]][1]) for p in index["pieces"]}
    wte_shape, wte = ours["model/wte"]
    if list(exported["transformer.wte.weight"][1]) != list(wte[:v * c]):
        fail("transformer.wte.weight is not the checkpoint's wte (unpadded)")
    (out_f, in_f), fc = ours["model/h.0.mlp.fc.weight"]
    transposed = [fc[o * in_f + i] for i in range(in_f) for o in range(out_f)]
    if list(exported["transformer.h.0.mlp.c_fc.weight"][1]) != transposed:
        fail("transformer.h.0.mlp.c_fc.weight is not the transpose of h.0.mlp.fc.weight")
    print("ternion-export: %d GPT-2 tensors with the right shapes and values" % len(exported))


if __name__ == "__main__":
    main()

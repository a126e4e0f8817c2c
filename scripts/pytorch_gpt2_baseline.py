#!/usr/bin/env python3
"""GPT-2 124M training steps in plain PyTorch: the GPU check's baseline for Ternion's tokens/s.

    python3 scripts/pytorch_gpt2_baseline.py [--steps 6] [--warmup 2] [--micro-batch 16]
                                             [--accum 32] [--no-compile]

The way nanoGPT trains GPT-2 on one GPU: f32 weights under bf16 autocast, fused AdamW,
scaled_dot_product_attention (flash attention), torch.compile, TF32 allowed for f32 matmuls,
gradient accumulation over micro-batches and clipping to norm 1. The shape is Ternion's
configs/gpu/gpt2-124m-bf16.yaml: 12 layers, width 768, 12 heads, context 1024, vocabulary
50257 padded to 50304, tied LM head, tanh GELU, no dropout; 16 x 1024 tokens a micro-batch,
32 micro-batches (0.5M tokens) a step. Tokens are random (the speed does not depend on them).

Prints one line per step and, last, the line the GPU check reads:
    pytorch gpt2-124m: <tokens/s> tokens/s, <ms> ms/step (median of <n> steps after <w> warm-up)
"""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, context, layers, d, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the LM head tied to the embedding
        # autocast runs the cross-entropy in f32, as nanoGPT leaves it
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first (compilation)")
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--accum", type=int, default=32, help="micro-batches per step")
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("pytorch_gpt2_baseline: no CUDA device")

    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    vocab, context = 50304, 1024
    model = GPT(vocab, context, layers=12, d=768, heads=12).cuda()
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = model if args.no_compile else torch.compile(model)

    b, t = args.micro_batch, context
    tokens = torch.randint(0, 50257, (args.accum, b, t + 1), device="cuda")
    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for m in range(args.accum):
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = step_model(tokens[m, :, :-1], tokens[m, :, 1:]) / args.accum
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        torch.cuda.synchronize()
        ms = 1000 * (time.perf_counter() - t0)
        if step >= args.warmup:
            times.append(ms)
        print(f"step {step + 1}: loss {loss.item() * args.accum:.4f}, grad norm {norm.item():.3f}, "
              f"{ms:.1f} ms{' (warm-up)' if step < args.warmup else ''}", flush=True)
    ms = statistics.median(times)
    tok_s = args.accum * b * t / (ms / 1000)
    peak = torch.cuda.max_memory_allocated() / 1e9
    print(f"pytorch {torch.__version__}, {torch.cuda.get_device_name()}, {params / 1e6:.1f}M "
          f"parameters, peak allocated {peak:.1f} GB, compiled: {not args.no_compile}")
    print(f"pytorch gpt2-124m: {tok_s:.0f} tokens/s, {ms:.1f} ms/step "
          f"(median of {len(times)} steps after {args.warmup} warm-up)")


if __name__ == "__main__":
    main()

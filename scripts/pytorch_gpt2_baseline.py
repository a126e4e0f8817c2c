#!/usr/bin/env python3
"""GPT-2 124M training steps in plain PyTorch: the baseline for Ternion's tokens/s.

    python3 scripts/pytorch_gpt2_baseline.py [--device cuda|cpu] [--steps 6] [--warmup 2]
                                             [--micro-batch N] [--seq N] [--accum N]
                                             [--threads N] [--no-compile]

On a GPU (the GPU check's baseline), the way nanoGPT trains GPT-2 on one GPU: f32 weights
under bf16 autocast, fused AdamW, scaled_dot_product_attention (flash attention),
torch.compile, TF32 allowed for f32 matmuls, gradient accumulation over micro-batches and
clipping to norm 1. The shape is Ternion's configs/gpu/gpt2-124m-bf16.yaml: 12 layers, width
768, 12 heads, context 1024, vocabulary 50257 padded to 50304, tied LM head, tanh GELU, no
dropout; 16 x 1024 tokens a micro-batch, 32 micro-batches (0.5M tokens) a step.

On the CPU (bench/cpu_vs_pytorch.sh's baseline), bench_gpt_step's step: the same model in
f32, eager, 4 x 64 tokens, one micro-batch, AdamW with foreach, clipping to norm 1, --threads
intra-op threads. Tokens are random (the speed does not depend on them).

Prints one line per step and, last, the line the callers read:
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--steps", type=int, default=6, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first (compilation)")
    ap.add_argument("--micro-batch", type=int, help="sequences a micro-batch (cuda 16, cpu 4)")
    ap.add_argument("--seq", type=int, help="tokens a sequence (cuda 1024, cpu 64)")
    ap.add_argument("--accum", type=int, help="micro-batches per step (cuda 32, cpu 1)")
    ap.add_argument("--threads", type=int, help="intra-op threads on the CPU")
    ap.add_argument("--no-compile", action="store_true", help="eager (always so on the CPU)")
    args = ap.parse_args()
    gpu = args.device == "cuda"
    if gpu and not torch.cuda.is_available():
        sys.exit("pytorch_gpt2_baseline: no CUDA device")
    micro_batch = args.micro_batch or (16 if gpu else 4)
    seq = args.seq or (1024 if gpu else 64)
    accum = args.accum or (32 if gpu else 1)
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(1234)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    vocab = 50304
    model = GPT(vocab, seq, layers=12, d=768, heads=12).to(args.device)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8,
                            **({"fused": True} if gpu else {"foreach": True}))
    compiled = gpu and not args.no_compile
    step_model = torch.compile(model) if compiled else model

    def synchronize():
        if gpu:
            torch.cuda.synchronize()

    b, t = micro_batch, seq
    tokens = torch.randint(0, 50257, (accum, b, t + 1), device=args.device)
    times = []
    for step in range(args.warmup + args.steps):
        synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for m in range(accum):
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=gpu):
                loss = step_model(tokens[m, :, :-1], tokens[m, :, 1:]) / accum
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        synchronize()
        ms = 1000 * (time.perf_counter() - t0)
        if step >= args.warmup:
            times.append(ms)
        print(f"step {step + 1}: loss {loss.item() * accum:.4f}, grad norm {norm.item():.3f}, "
              f"{ms:.1f} ms{' (warm-up)' if step < args.warmup else ''}", flush=True)
    ms = statistics.median(times)
    tok_s = accum * b * t / (ms / 1000)
    if gpu:
        where = (f"{torch.cuda.get_device_name()}, peak allocated "
                 f"{torch.cuda.max_memory_allocated() / 1e9:.1f} GB")
    else:
        where = f"CPU, {torch.get_num_threads()} threads, f32"
    print(f"pytorch {torch.__version__}, {where}, {params / 1e6:.1f}M parameters, "
          f"{b} x {t} tokens x {accum} micro-batches, compiled: {compiled}")
    print(f"pytorch gpt2-124m: {tok_s:.0f} tokens/s, {ms:.1f} ms/step "
          f"(median of {len(times)} steps after {args.warmup} warm-up)")


if __name__ == "__main__":
    main()

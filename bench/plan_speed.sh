#!/usr/bin/env bash
# How long ternion-plan takes to rank every layout of large GPT models on thousands of GPUs:
# GPT-3 175B on 1,024 A100s and on 4,096 H100s, and the 1T model of Narayanan et al. 2021 on
# 3,072 A100s (where no layout fits: the least need is still found). Each row: wall seconds,
# and the plan's summary line (or its refusal).
#   bash bench/plan_speed.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# name preset nodes heads hidden layers batch
rows="175B dgx-a100 128 96 12288 96 1536
175B dgx-h100 512 96 12288 96 2048
1T dgx-a100 384 160 25600 128 3072"
while read -r name preset nodes heads hidden layers batch; do
  sed "s/nodes: 4/nodes: $nodes/" "configs/clusters/$preset.yaml" > "$out/cluster.yaml"
  start=$(date +%s.%N)
  "$build/ternion-plan" --config configs/gpt2-124m.yaml --cluster "$out/cluster.yaml" \
    --set model.vocab_size=51200 --set model.seq_len=2048 --set model.n_head="$heads" \
    --set model.d_model="$hidden" --set model.n_layer="$layers" \
    --set training.global_batch_size="$batch" --set training.precision=bf16 \
    --set training.recompute=full --top 1 > "$out/plan.txt" 2>&1 || true
  end=$(date +%s.%N)
  printf '%-5s on %5d GPUs of %-9s %6.2f s  %s\n' "$name" $((nodes * 8)) "$preset" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" \
    "$(head -1 "$out/plan.txt" | sed 's/.*GPUs ([^)]*); //')"
done <<< "$rows"

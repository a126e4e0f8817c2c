#!/usr/bin/env bash
# How much of the data-parallel gradient reduction hides behind backward: a GPT-2 124M-shaped
# model (12 x 768, vocabulary 50257) on 2 data-parallel ranks, 4 sequences of 64 tokens per
# rank, 25 MB buckets, with the reduction overlapped (each bucket starts as soon as backward
# completes it) and not (every bucket starts after backward). The time the optimizer step then
# waits for the reductions is the communication left exposed.
#   bash bench/grad_overlap.sh [BUILD_DIR]   (needs runs/builtin from the quickstart)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
for overlap in true false; do
  OMP_NUM_THREADS=1 mpirun --oversubscribe -np 2 "$build/ternion-train" --config configs/gpt2-124m.yaml \
    --set data.train=runs/builtin/train.bin --set data.val= --set model.seq_len=64 \
    --set parallel.data=2 --set parallel.micro_batch_size=4 --set training.global_batch_size=8 \
    --set training.steps=4 --set training.eval_interval=0 --set optimizer.warmup_steps=0 \
    --set parallel.overlap_grad_reduce=$overlap --set logging.metrics_file="$out/$overlap.jsonl" \
    > "$out/$overlap.log" 2>&1 || { cat "$out/$overlap.log"; exit 1; }
done
wait_ms() { tail -n 3 "$out/$1.jsonl" | sed -E 's/.*"grad_reduce_wait_ms": ?([0-9.e+-]+).*/\1/' | sort -g | sed -n 2p; }
step_ms() { tail -n 3 "$out/$1.jsonl" | sed -E 's/.*"ms_per_step": ?([0-9.e+-]+).*/\1/' | sort -g | sed -n 2p; }
early=$(tail -n 1 "$out/true.jsonl" | sed -E 's/.*"buckets_reduced_early": ?([0-9]+).*/\1/')
echo "overlapped:   step $(step_ms true) ms, waiting for reductions $(wait_ms true) ms ($early buckets started during backward)"
echo "after backward: step $(step_ms false) ms, waiting for reductions $(wait_ms false) ms"
awk -v a="$(wait_ms true)" -v b="$(wait_ms false)" \
  'BEGIN { printf "hidden behind backward: %.0f%% of the reduction time (medians of steps 2-4)\n", 100 * (1 - a / b) }'
rm -rf "$out"

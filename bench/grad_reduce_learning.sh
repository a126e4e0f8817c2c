#!/usr/bin/env bash
# What cheaper gradient reduction costs in learning: configs/shakespeare.yaml's model (4 x 128)
# on 4 data-parallel ranks, STEPS steps of 32 sequences of 64 bytes, with fp32 reduction, with
# bf16 on the wire (parallel.grad_reduce_dtype: bf16) and with PowerSGD of rank 8 from step
# 101 (parallel.grad_compression: powersgd, powersgd_rank: 8, powersgd_start_step: 100); the
# script prints the final validation losses against fp32's (aims: bf16 within 2%, PowerSGD 5%).
#   bash bench/grad_reduce_learning.sh TEXT_FILE [BUILD_DIR] [STEPS]
#   e.g. bash bench/grad_reduce_learning.sh tinyshakespeare.txt build 600
set -euo pipefail
cd "$(dirname "$0")/.."
text=${1:?usage: bench/grad_reduce_learning.sh TEXT_FILE [BUILD_DIR] [STEPS]}
build=${2:-build}
steps=${3:-600}
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/ternion-prepare" --input "$text" --output "$out/data" > /dev/null
declare -A sets=([fp32]="" [bf16]="parallel.grad_reduce_dtype=bf16"
                 [powersgd]="parallel.grad_compression=powersgd --set parallel.powersgd_rank=8 --set parallel.powersgd_start_step=100")
for dtype in fp32 bf16 powersgd; do
  OMP_NUM_THREADS=1 mpirun --oversubscribe -np 4 "$build/ternion-train" --config configs/shakespeare.yaml \
    --set "data.train=$out/data/train.bin" --set "data.val=$out/data/val.bin" \
    --set parallel.data=4 --set parallel.micro_batch_size=8 --set training.global_batch_size=32 \
    --set training.steps="$steps" --set training.eval_interval="$((steps / 4))" \
    --set training.eval_batches=4 --set training.sample_tokens=0 \
    ${sets[$dtype]:+--set ${sets[$dtype]}} --set "logging.metrics_file=$out/$dtype.jsonl" \
    > "$out/$dtype.log" 2>&1 || { cat "$out/$dtype.log"; exit 1; }
  grep -E "data-parallel gradients|val loss" "$out/$dtype.log"
done
val() { grep -oE '"val_loss": ?[0-9.]+' "$out/$1.jsonl" | tail -n 1 | sed -E 's/.*: ?//'; }
awk -v a="$(val fp32)" -v b="$(val bf16)" -v p="$(val powersgd)" -v s="$steps" \
  'BEGIN { printf "after %d steps: validation loss fp32 %.4f, bf16 %.4f (%+.2f%%), PowerSGD %.4f (%+.2f%%)\n",
           s, a, b, 100 * (b / a - 1), p, 100 * (p / a - 1) }'

#!/usr/bin/env bash
# Peak activation memory of pipeline stage 0 under GPipe and 1F1B as the micro-batch count
# grows (2 stages; the quickstart model, micro-batches of 4 sequences of 64 bytes).
#   bash bench/pipeline_memory.sh [BUILD_DIR]   (needs runs/builtin from the quickstart)
# GPipe keeps every micro-batch's activations until its backward; 1F1B keeps at most
# `stages - stage` of them.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "| micro-batches | GPipe | 1F1B |"
echo "|---|---|---|"
for m in 2 4 8 16; do
  row="| $m |"
  for schedule in gpipe 1f1b; do
    peak=$(OMP_NUM_THREADS=1 mpirun --oversubscribe -np 2 "$build/ternion-train" \
      --config configs/quickstart.yaml --set parallel.tensor=1 --set parallel.data=1 \
      --set parallel.zero_stage=0 --set checkpoint.save_dir= \
      --set parallel.pipeline=2 --set parallel.schedule=$schedule \
      --set parallel.micro_batch_size=4 --set training.global_batch_size=$((4 * m)) \
      --set training.steps=2 --set training.eval_interval=0 --set training.sample_tokens=0 \
      --set logging.metrics_file= --set optimizer.warmup_steps=1 2>&1 |
      sed -nE 's/.*temporaries peaked at ([0-9.]+) MB.*/\1/p')
    row="$row $peak MB |"
  done
  echo "$row"
done

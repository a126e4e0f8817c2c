#!/usr/bin/env bash
# The memory estimate against the measured peak, every rank of every layout: GPT-2 124M's
# shape with context 1024, fp32 on CPU, micro-batches of one sequence, 4 per step, 2 steps.
#   bash bench/memory_estimate.sh [BUILD_DIR] [TEXT]
# TEXT is byte-tokenised into a scratch directory (default: the built-in corpus); token values
# do not change memory. Each run logs, per rank, step 1's measured peak beside the estimate it
# made before training; this prints them as a table (markdown), one row per rank.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
text=${2:-}
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
if [ -n "$text" ]; then
  "$build/ternion-prepare" --input "$text" --output "$data" >/dev/null
else
  "$build/ternion-prepare" --builtin --output "$data" >/dev/null
fi

common=(--config configs/gpt2-124m.yaml --set data.train="$data/train.bin" --set data.val=
        --set logging.metrics_file= --set training.steps=2 --set training.eval_interval=0
        --set parallel.micro_batch_size=1 --set training.global_batch_size=4
        --set optimizer.warmup_steps=1)
# name | ranks | settings
layouts=(
  "one rank|1|"
  "recompute selective|1|training.recompute=selective"
  "recompute full|1|training.recompute=full"
  "tensor 2, sequence parallel|2|parallel.tensor=2 parallel.sequence_parallel=true"
  "pipeline 4, 1F1B|4|parallel.pipeline=4"
  "pipeline 4, interleaved (2 chunks)|4|parallel.pipeline=4 parallel.virtual_stages=2"
  "data 2, ZeRO-1|2|parallel.data=2 parallel.zero_stage=1"
  "data 2, ZeRO-2|2|parallel.data=2 parallel.zero_stage=2"
  "tensor 2 x pipeline 2 x data 2, ZeRO-2, full recompute|8|parallel.tensor=2 parallel.pipeline=2 parallel.data=2 parallel.zero_stage=2 training.recompute=full"
)
echo "| layout | rank | estimated (MB) | measured (MB) | estimate - measured |"
echo "|---|---|---|---|---|"
for layout in "${layouts[@]}"; do
  IFS='|' read -r name ranks settings <<<"$layout"
  sets=()
  for s in $settings; do sets+=(--set "$s"); done
  if [ "$ranks" -eq 1 ]; then
    log=$(OMP_NUM_THREADS=2 "$build/ternion-train" "${common[@]}" "${sets[@]}" 2>&1)
  else
    log=$(OMP_NUM_THREADS=1 mpirun --oversubscribe -np "$ranks" "$build/ternion-train" \
          "${common[@]}" "${sets[@]}" 2>&1)
  fi
  echo "$log" | sed -nE 's/^ternion: memory( rank ([0-9]+))?: step 1 peaked at ([0-9.]+) MB, estimated ([0-9.]+) MB \(([-+0-9.]+%)\)/\2|\3|\4|\5/p' |
    while IFS='|' read -r rank measured estimated off; do
      echo "| $name | ${rank:-0} | $estimated | $measured | $off |"
    done
  echo "$log" | grep -q "^ternion: memory" || { echo "$name: no memory line" >&2; echo "$log" | tail -5 >&2; exit 1; }
done

#!/usr/bin/env bash
# GPT-2 small's shape (configs/gpt2-124m.yaml: 12 x 768, vocabulary 50304, 124M parameters)
# trained data-parallel on 2 emulated nodes of 4 ranks (tools/emulated-cluster), each node's
# link limited to LINK_GBIT Gbit/s, once per gradient reduction: flat f32, hierarchical f32,
# hierarchical with bf16 on the wire, and PowerSGD of rank 4 (REDUCTIONS picks some). One sequence of 64 tokens per
# rank a step (the data is the byte-level text given, in the 50304-token model), so that the
# step is mostly the all-reduce of 495 MB of gradients. Prints rank 0's median step time over
# steps 2..STEPS (step 1 builds the buckets and PowerSGD's factors) and the part of it spent
# waiting for the reduction after the backward (grad_sync_ms).
#   bash bench/cluster_step.sh TEXT_FILE [BUILD_DIR] [STEPS] [LINK_GBIT]
#   e.g. bash bench/cluster_step.sh tinyshakespeare.txt build 5 1
set -euo pipefail
cd "$(dirname "$0")/.."
text=${1:?usage: bench/cluster_step.sh TEXT_FILE [BUILD_DIR] [STEPS] [LINK_GBIT]}
build=${2:-build}
steps=${3:-5}
link=${4:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/ternion-prepare" --input "$text" --output "$out/data" > /dev/null
# bf16 on the wire needs ZeRO-1 to fit 8 ranks in 24 GiB (its buffers come on top of the
# optimizer state), and PowerSGD refuses ZeRO: so flat and hierarchical run both ways.
declare -A sets=([flat]="parallel.grad_reduce=flat"
                 [hierarchical]="parallel.grad_reduce=hierarchical"
                 [powersgd]="parallel.grad_compression=powersgd --set parallel.powersgd_rank=4"
                 [flat-zero1]="parallel.grad_reduce=flat --set parallel.zero_stage=1"
                 [hierarchical-zero1]="parallel.grad_reduce=hierarchical --set parallel.zero_stage=1"
                 [hierarchical-bf16-zero1]="parallel.grad_reduce=hierarchical --set parallel.grad_reduce_dtype=bf16 --set parallel.zero_stage=1")
for reduction in ${REDUCTIONS:-flat hierarchical powersgd flat-zero1 hierarchical-zero1 hierarchical-bf16-zero1}; do
  OMP_NUM_THREADS=1 tools/emulated-cluster --nodes 2 --ranks-per-node 4 --link-gbit "$link" -- \
    "$build/ternion-train" --config configs/gpt2-124m.yaml \
    --set "data.train=$out/data/train.bin" --set "data.val=$out/data/val.bin" \
    --set model.seq_len=64 --set parallel.data=8 --set parallel.micro_batch_size=1 \
    --set training.global_batch_size=8 --set training.steps="$steps" \
    --set optimizer.warmup_steps=1 --set training.eval_interval=0 \
    --set ${sets[$reduction]} --set "logging.metrics_file=$out/$reduction.jsonl" \
    > "$out/$reduction.log" 2>&1 || { cat "$out/$reduction.log"; exit 1; }
  grep -m1 "data-parallel gradients" "$out/$reduction.log" || true
  median() {
    grep -oE "\"$1\": ?[0-9.]+" "$out/$reduction.jsonl" | tail -n +2 | sed -E 's/.*: ?//' | sort -n |
      awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
  }
  printf '%-24s step %8.1f ms, of which waiting for the reduction %8.1f ms (median of steps 2-%d, rank 0)\n' \
    "$reduction" "$(median ms_per_step)" "$(median grad_sync_ms)" "$steps"
done

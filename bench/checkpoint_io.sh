#!/usr/bin/env bash
# Checkpoint save and load of GPT-2 124M (weights and AdamW's two moments, f32: 1.49 GB) on 1,
# 2 and 4 ranks, against `dd` in the same run: copying rank 0's saved file to the same disk
# with an fsync (a save's reference: its bytes read from memory, written and synced) and
# reading it (a load's; like the load, which follows its save, from the page cache).
#   bash bench/checkpoint_io.sh [BUILD_DIR] [DIR] [ROUNDS]
# DIR is where the checkpoints go (default: a scratch directory under /tmp; pick the disk you
# train on). Each row is the median of ROUNDS runs (default 3) of ternion-train's own figures:
# it logs each save's and each resume's bytes, seconds and MB/s.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dir=${2:-}
rounds=${3:-3}
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
scratch=$(mktemp -d "${dir:-/tmp}/ternion-checkpoint-io.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
"$build/ternion-prepare" --builtin --output "$scratch/data" >/dev/null

common=(--config configs/gpt2-124m.yaml --set data.train="$scratch/data/train.bin"
        --set data.val= --set logging.metrics_file= --set training.eval_interval=0
        --set training.sample_tokens=0 --set model.seq_len=64
        --set parallel.micro_batch_size=1 --set training.global_batch_size=4
        --set optimizer.warmup_steps=0 --set training.steps=1 --set checkpoint.keep=1)

# The MB/s of the line of log $1 that starts with $2.
rate() { sed -n "s/^ternion: $2.*, \([0-9]*\) MB\/s).*/\1/p" "$1" | head -1; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# The MB/s of `dd ARGS...`, from the bytes and seconds it reports.
dd_rate() {
  dd "$@" 2>&1 | tail -1 |
    awk '{ for (i = 1; i <= NF; i++) if ($i == "s,") print int($1 / 1e6 / $(i - 1)) }'
}

bytes=
echo "| layout | ranks | save (MB/s) | load (MB/s) | dd copy + fsync (MB/s) | dd read (MB/s) |" \
     "save / dd | load / dd |"
echo "|---|---|---|---|---|---|---|---|"
for layout in "one rank|1|" "data 2, ZeRO-1|2|parallel.data=2 parallel.zero_stage=1" \
              "tensor 2 x pipeline 2|4|parallel.tensor=2 parallel.pipeline=2"; do
  IFS='|' read -r name ranks settings <<<"$layout"
  sets=()
  for s in $settings; do sets+=(--set "$s"); done
  saves=() loads=() writes=() reads=()
  for ((r = 0; r < rounds; r++)); do
    ckpt="$scratch/ckpt"
    rm -rf "$ckpt"
    mpirun --oversubscribe -np "$ranks" "$build/ternion-train" "${common[@]}" "${sets[@]}" \
      --set checkpoint.save_dir="$ckpt" > "$scratch/save.log" 2>&1 ||
      { cat "$scratch/save.log"; exit 1; }
    # The same layout loads it back (and has nothing left to train).
    mpirun --oversubscribe -np "$ranks" "$build/ternion-train" "${common[@]}" "${sets[@]}" \
      --set checkpoint.save_dir="$ckpt" --set checkpoint.load=latest > "$scratch/load.log" 2>&1 ||
      { cat "$scratch/load.log"; exit 1; }
    saves+=("$(rate "$scratch/save.log" "saved the checkpoint")")
    loads+=("$(rate "$scratch/load.log" "resumed from")")
    bytes=$(sed -n 's/^ternion: saved the checkpoint.*(\([0-9.]*\) MB in.*/\1/p' \
              "$scratch/save.log")
    # The references: rank 0's file copied with an fsync, and read.
    saved=$(ls "$ckpt"/step_*/rank_00000.safetensors)
    writes+=("$(dd_rate if="$saved" of="$scratch/dd.bin" bs=1M conv=fsync)")
    reads+=("$(dd_rate if="$saved" of=/dev/null bs=1M)")
    rm -f "$scratch/dd.bin"
  done
  save=$(printf '%s\n' "${saves[@]}" | median) load=$(printf '%s\n' "${loads[@]}" | median)
  write=$(printf '%s\n' "${writes[@]}" | median) read=$(printf '%s\n' "${reads[@]}" | median)
  awk -v n="$name" -v r="$ranks" -v s="$save" -v l="$load" -v w="$write" -v d="$read" \
    'BEGIN { printf "| %s | %d | %d | %d | %d | %d | %.2f | %.2f |\n",
             n, r, s, l, w, d, s / w, l / d }'
done
echo
disk=$(df -h "$scratch" | awk 'NR == 2 { print $1 " (" $2 ")" }')
echo "checkpoint: $bytes MB of tensors; $rounds rounds a row (medians); $disk"

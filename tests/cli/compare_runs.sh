#!/usr/bin/env bash
# compare_runs.sh MPIRUN TERNION_TRAIN CONFIG TRAIN_BIN OUT_DIR RANKS [ternion-train args...]
# Trains CONFIG on one rank, then on RANKS ranks with the extra arguments (a parallel layout:
# tensor, pipeline, both),
# and passes when both log the same loss and gradient norm at every step to 1e-5 relative and
# print the same generated sample.
set -u
mpirun=$1 train=$2 config=$3 data=$4 out=$5 ranks=$6
shift 6
mkdir -p "$out"
common=(--config "$config" --set "data.train=$data")
"$train" "${common[@]}" --set "logging.metrics_file=$out/one.jsonl" > "$out/one.log" 2>&1 ||
  { cat "$out/one.log"; echo "FAILED: the one-rank run"; exit 1; }
$mpirun -np "$ranks" "$train" "${common[@]}" --set "logging.metrics_file=$out/many.jsonl" "$@" \
  > "$out/many.log" 2>&1 || { cat "$out/many.log"; echo "FAILED: the $ranks-rank run"; exit 1; }
cat "$out/many.log"
# The loss and the gradient norm of every step: AdamW with clipping is nearly blind to a
# gradient scale common to all parameters (a layout that trains each shard on the whole model,
# say), which the losses hide and the norm shows.
field() { sed -E "s/.*\"$2\": ([^,}]+).*/\\1/" "$1"; }
for name in loss grad_norm; do
  paste <(field "$out/one.jsonl" "$name") <(field "$out/many.jsonl" "$name") | awk -v name="$name" '
    { n++; d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
      printf "step %d %s: one rank %s, several %s\n", n, name, $1, $2
      if (d > 1e-5 * a || $2 == "null" || $2 == "") bad++ }
    END { if (n == 0) { print "FAILED: no steps logged"; exit 1 }
          if (bad) { print "FAILED: " bad " of " n " steps differ in " name " by more than 1e-5 relative"; exit 1 } }' ||
    exit 1
done
[ "$(wc -l < "$out/one.jsonl")" -eq "$(wc -l < "$out/many.jsonl")" ] || { echo "FAILED: step counts differ"; exit 1; }
sample() { sed -n '/^ternion: sample/,$p' "$1"; }
[ "$(sample "$out/one.log")" = "$(sample "$out/many.log")" ] || { echo "FAILED: the samples differ"; exit 1; }
echo "same losses, gradient norms and sample on 1 and $ranks ranks"

#!/usr/bin/env bash
# compare_runs.sh MPIRUN TERNION_TRAIN CONFIG TRAIN_BIN OUT_DIR RANKS [ternion-train args...]
# Trains CONFIG on one rank, then on RANKS ranks with the extra arguments (a parallel layout:
# tensor, pipeline, both). The one-rank run is the same run in another layout: it takes every
# `--set` among them but those of parallel.* and logging.* (model, training, optimizer and data
# settings apply to both). Passes when both log the same loss and gradient norm at every step
# to 1e-5 relative (COMPARE_TOLERANCE in the environment: another bound, for bf16 runs) and
# print the same generated sample.
set -u
tolerance=${COMPARE_TOLERANCE:-1e-5}
mpirun=$1 train=$2 config=$3 data=$4 out=$5 ranks=$6
shift 6
mkdir -p "$out"
common=(--config "$config" --set "data.train=$data")
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; ++i)); do
  [ "${args[i]}" = --set ] && [[ "${args[i + 1]}" != parallel.* ]] &&
    [[ "${args[i + 1]}" != logging.* ]] && common+=(--set "${args[i + 1]}")
done
"$train" "${common[@]}" --set "logging.metrics_file=$out/one.jsonl" > "$out/one.log" 2>&1 ||
  { cat "$out/one.log"; echo "FAILED: the one-rank run"; exit 1; }
$mpirun -np "$ranks" "$train" "${common[@]}" --set "logging.metrics_file=$out/many.jsonl" "$@" \
  > "$out/many.log" 2>&1 || { cat "$out/many.log"; echo "FAILED: the $ranks-rank run"; exit 1; }
cat "$out/many.log"
# The layout ran: what each rank built (its "built N parameters" line) is what --dry-run
# computes for that rank from the layout, so a rank that built the whole model where it should
# hold a shard (tensor parallelism silently off, say) fails here.
$mpirun -np "$ranks" "$train" "${common[@]}" "$@" --dry-run > "$out/dry.log" 2>&1 ||
  { cat "$out/dry.log"; echo "FAILED: the $ranks-rank dry run"; exit 1; }
expected=$(sed -n 's/^  rank \([0-9]*\) tp=\([0-9]*\) pp=\([0-9]*\): [^(]*(\([0-9]*\)).*/\1 \2 \3 \4/p' "$out/dry.log")
built=$(sed -n 's/^ternion: rank \([0-9]*\) tp=\([0-9]*\) pp=\([0-9]*\) dp=[0-9]* built \([0-9]*\) parameters$/\1 \2 \3 \4/p' "$out/many.log")
[ "$(printf '%s\n' "$expected" | wc -l)" -eq "$ranks" ] ||
  { cat "$out/dry.log"; echo "FAILED: the dry run lists $(printf '%s\n' "$expected" | wc -l) ranks, not $ranks"; exit 1; }
[ "$built" = "$expected" ] ||
  { printf 'built:\n%s\nexpected (dry run):\n%s\n' "$built" "$expected"; echo "FAILED: the ranks built another layout than the dry run's"; exit 1; }
# The loss and the gradient norm of every step: AdamW with clipping is nearly blind to a
# gradient scale common to all parameters (a layout that trains each shard on the whole model,
# say), which the losses hide and the norm shows.
field() { sed -E "s/.*\"$2\": ?([^,}]+).*/\\1/" "$1"; }
for name in loss grad_norm; do
  paste <(field "$out/one.jsonl" "$name") <(field "$out/many.jsonl" "$name") |
    awk -v name="$name" -v tolerance="$tolerance" '
    { n++; d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
      printf "step %d %s: one rank %s, several %s\n", n, name, $1, $2
      if (d > tolerance * a || $2 == "null" || $2 == "") bad++ }
    END { if (n == 0) { print "FAILED: no steps logged"; exit 1 }
          if (bad) { print "FAILED: " bad " of " n " steps differ in " name " by more than " tolerance " relative"; exit 1 } }' ||
    exit 1
done
[ "$(wc -l < "$out/one.jsonl")" -eq "$(wc -l < "$out/many.jsonl")" ] || { echo "FAILED: step counts differ"; exit 1; }
# A step's model FLOPs are the layout's whatever it is: TFLOP/s per rank x ranks x the step's
# time is the one-rank run's TFLOP/s x its time.
paste <(field "$out/one.jsonl" tflops_per_rank) <(field "$out/one.jsonl" ms_per_step) \
  <(field "$out/many.jsonl" tflops_per_rank) <(field "$out/many.jsonl" ms_per_step) |
  awk -v ranks="$ranks" '
  { one = $1 * $2; many = $3 * $4 * ranks; d = one - many; if (d < 0) d = -d
    if (!(one > 0) || d > 1e-6 * one) bad++ }
  END { if (bad) { print "FAILED: " bad " steps report other model FLOPs per step than one rank"; exit 1 } }' ||
  exit 1
sample() { sed -n '/^ternion: sample/,$p' "$1"; }
[ "$(sample "$out/one.log")" = "$(sample "$out/many.log")" ] || { echo "FAILED: the samples differ"; exit 1; }
echo "same losses, gradient norms and sample on 1 and $ranks ranks, each rank's parameters as laid out"

#!/usr/bin/env bash
# memory_estimate_runs.sh MPIRUN TERNION_TRAIN CONFIG TRAIN_BIN OUT_DIR RANKS [ternion-train args...]
# The memory estimate of every rank of a layout against the run: the dry run on RANKS ranks
# must give one breakdown per rank, and the run must log, for each of its ranks, step 1's
# measured peak beside the estimate made before training, within 1% (the estimate runs the
# rank's own step on the meta device, so it misses nothing a f32 CPU step allocates).
set -u
mpirun=$1 train=$2 config=$3 data=$4 out=$5 ranks=$6
shift 6
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }
args=(--config "$config" --set "data.train=$data" --set training.sample_tokens=0
      --set training.steps=2 --set logging.metrics_file= "$@")
$mpirun -np "$ranks" "$train" "${args[@]}" --dry-run > "$out/dry_run.log" 2>&1 ||
  { cat "$out/dry_run.log"; fail "the dry run"; }
breakdowns=$(grep -cE '^  rank [0-9]+: [0-9.]+ [KMGT]?B = parameters .* \+ step ' "$out/dry_run.log")
[ "$ranks" -eq 1 ] && breakdowns=$(grep -c '^ternion: memory estimate at the step.s peak: .* = parameters' "$out/dry_run.log")
[ "$breakdowns" -eq "$ranks" ] || { cat "$out/dry_run.log"; fail "$breakdowns memory breakdowns for $ranks ranks"; }

$mpirun -np "$ranks" "$train" "${args[@]}" > "$out/run.log" 2>&1 || { cat "$out/run.log"; fail "the run"; }
sed -nE 's/^ternion: memory( rank ([0-9]+))?: step 1 peaked at ([0-9.]+) MB, estimated ([0-9.]+) MB.*/r\2 \3 \4/p' \
  "$out/run.log" | awk -v ranks="$ranks" '
  { n++; rank = substr($1, 2) + 0; seen[rank] = 1
    d = $3 - $2; if (d < 0) d = -d
    printf "rank %d: measured %s MB, estimated %s MB\n", rank, $2, $3
    if ($2 <= 0 || d > 0.01 * $2 + 0.1) bad++ }  # 0.1: the log rounds to 0.1 MB
  END { if (n != ranks) { print "FAILED: " n " memory lines for " ranks " ranks"; exit 1 }
        for (r = 0; r < ranks; r++) if (!(r in seen)) { print "FAILED: no line for rank " r; exit 1 }
        if (bad) { print "FAILED: " bad " estimates off by more than 1%"; exit 1 } }' || exit 1
echo "every rank's memory estimate within 1% of its measured peak on $ranks ranks ($*)"

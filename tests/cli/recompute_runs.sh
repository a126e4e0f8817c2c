#!/usr/bin/env bash
# recompute_runs.sh MPIRUN TERNION_TRAIN CONFIG TRAIN_BIN OUT_DIR RANKS [ternion-train args...]
# Trains CONFIG on RANKS ranks in the layout the extra arguments give, without recomputation,
# then with training.recompute selective, full, and full for the first block of each chunk:
# each must log the same loss and gradient norm at every step (1e-6 relative) and keep less
# activation memory than the run without (the recomputation ran).
set -u
mpirun=$1 train=$2 config=$3 data=$4 out=$5 ranks=$6
shift 6
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }
run() {  # NAME ARGS...: one run in the layout, its metrics in $out/NAME.jsonl
  local name=$1
  shift
  $mpirun -np "$ranks" "$train" --config "$config" --set "data.train=$data" \
    --set training.sample_tokens=0 --set "logging.metrics_file=$out/$name.jsonl" "$@" \
    > "$out/$name.log" 2>&1 || { cat "$out/$name.log"; fail "the $name run"; }
}
# Rank 0's activation peak over the steps, unrounded from the metrics (the log's 0.1 MB can
# round two peaks 30 KB apart to the same figure).
peak() { grep -oE '"activation_mb": ?[0-9.e+-]+' "$out/$1.jsonl" | sed -E 's/.*: ?//' | sort -g | tail -n 1; }
field() { sed -E "s/.*\"$2\": ?([^,}]+).*/\\1/" "$1"; }
run none "$@"
for mode in selective full full_first; do
  case $mode in
    full_first) run "$mode" "$@" --set training.recompute=full --set training.recompute_layers=1 ;;
    *) run "$mode" "$@" --set "training.recompute=$mode" ;;
  esac
  for name in loss grad_norm; do
    paste <(field "$out/none.jsonl" "$name") <(field "$out/$mode.jsonl" "$name") | awk -v name="$name" -v mode="$mode" '
      { n++; d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1
        if (d > 1e-6 * a || $2 == "") { bad++; printf "step %d %s: none %s, %s %s\n", n, name, $1, mode, $2 } }
      END { if (n == 0) { print "FAILED: no steps logged"; exit 1 }
            if (bad) { print "FAILED: " bad " of " n " steps differ in " name " with " mode; exit 1 } }' || exit 1
  done
  awk -v a="$(peak none)" -v b="$(peak "$mode")" -v mode="$mode" 'BEGIN {
    printf "activation peak per rank: none %s MB, %s %s MB\n", a, mode, b
    if (a == "" || b == "" || b + 0 >= a + 0) { print "FAILED: " mode " keeps no less"; exit 1 } }' || exit 1
done
echo "selective and full recomputation train as without on $ranks ranks ($*), keeping less"

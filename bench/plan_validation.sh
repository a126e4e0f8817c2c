#!/usr/bin/env bash
# The planner against measurement: every layout ternion-plan ranks for a model on a cluster of
# this machine's ranks, predicted (ternion-plan --layout --json) and measured (ternion-train,
# rank 0's fastest step of steps 2..STEPS), with each prediction's error, their median and
# worst, and where the planner's first choice ranks among the measured.
#   bash bench/plan_validation.sh TEXT_FILE CLUSTER [BUILD_DIR] [STEPS]
#   CLUSTER: local (configs/clusters/cpu-local.yaml, mpirun -np 2), emulated-2x1 or
#            emulated-2x4 (configs/clusters/emulated-2xR.yaml: tools/emulated-cluster, 2 nodes
#            of R ranks at 1 Gbit/s; with R = 4 the 8 ranks share 2 cores)
# The model: 4 blocks of 512 wide (8 heads), a 4096-token vocabulary (the byte-level data
# uses 256 of it), context 128, 8 sequences a step; MODEL_SETS adds or replaces --sets.
set -euo pipefail
cd "$(dirname "$0")/.."
text=${1:?usage: bench/plan_validation.sh TEXT_FILE CLUSTER [BUILD_DIR] [STEPS]}
cluster=${2:?usage: bench/plan_validation.sh TEXT_FILE CLUSTER [BUILD_DIR] [STEPS]}
build=${3:-build}
steps=${4:-5}
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The rates of this machine, measured now (the presets hold one machine's, and machines differ
# by several times in sgemm); the 8 ranks of emulated-2x4 on 2 cores keep their preset.
case $cluster in
  local|emulated-2x1) spec=$out/cluster.yaml
    bash bench/measure_cpu_cluster.sh "$build" "$cluster" > "$spec" ;;
  emulated-2x4) spec=configs/clusters/$cluster.yaml ;;
  *) echo "plan_validation.sh: CLUSTER must be local, emulated-2x1 or emulated-2x4, got '$cluster'" >&2
     exit 2 ;;
esac
case $cluster in
  local) launch=(mpirun --oversubscribe -np) ;;
  *) launch=(tools/emulated-cluster --nodes 2 --ranks-per-node "${cluster#emulated-2x}" --link-gbit 1 --) ;;
esac
grep -E 'Measured|gpu:|_gb_s|intra|inter' "$spec" | sed 's/^/# /' 
"$build/ternion-prepare" --input "$text" --output "$out/data" > /dev/null
sets=(--set "data.train=$out/data/train.bin" --set data.val= --set model.n_layer=4
      --set model.d_model=512 --set model.n_head=8 --set model.vocab_size=4096
      --set model.seq_len=128 --set training.global_batch_size=8 --set training.steps="$steps"
      --set optimizer.warmup_steps=1 --set training.eval_interval=0 --set training.sample_tokens=0
      --set parallel.micro_batch_size=1
      ${MODEL_SETS:-})
"$build/ternion-plan" --config configs/shakespeare.yaml --cluster "$spec" "${sets[@]}" --json > "$out/plan.json"
python3 - "$out/plan.json" > "$out/layouts.txt" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(r["tensor"], r["pipeline"], r["data"], r["micro_batch_size"], r["virtual_stages"], r["step_time_s"])
PY
printf '%-30s %12s %12s %8s\n' "layout (t,p,d,mb,v)" "predicted s" "measured s" "error"
while read -r t p d mb v predicted; do
  world=$((t * p * d))
  if [ "$cluster" = local ]; then run=("${launch[@]}" "$world"); else run=("${launch[@]}"); fi
  "${run[@]}" "$build/ternion-train" --config configs/shakespeare.yaml "${sets[@]}" \
    --set parallel.tensor="$t" --set parallel.pipeline="$p" --set parallel.data="$d" \
    --set parallel.micro_batch_size="$mb" --set parallel.virtual_stages="$v" \
    --set "logging.metrics_file=$out/run.jsonl" < /dev/null > "$out/run.log" 2>&1 || { cat "$out/run.log"; exit 1; }
  # The fastest step: this machine is shared, and interference only ever slows a step.
  measured=$(grep -oE '"ms_per_step": ?[0-9.]+' "$out/run.jsonl" | tail -n +2 | sed -E 's/.*: ?//' |
             awk '{ print $1 / 1000 }' |
             sort -n | head -n 1)
  echo "$t,$p,$d,$mb,$v $predicted $measured" >> "$out/results.txt"
  awk -v l="$t,$p,$d,$mb,$v" -v p="$predicted" -v m="$measured" \
    'BEGIN { printf "%-30s %12.3f %12.3f %+7.1f%%\n", l, p, m, 100 * (p / m - 1) }'
done < "$out/layouts.txt"
python3 - "$out/results.txt" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
errors = [abs(float(p) / float(m) - 1) for _, p, m in rows]
by_measured = sorted(rows, key=lambda r: float(r[2]))
first = rows[0][0]  # the planner's first choice (its ranking's order)
place = [r[0] for r in by_measured].index(first) + 1
print(f"{len(rows)} layouts: median |error| {100 * statistics.median(errors):.1f}%, "
      f"worst {100 * max(errors):.1f}%; the planner's first choice {first} is number {place} "
      f"of the measured (fastest {by_measured[0][0]})")
PY

#!/usr/bin/env bash
# plan_runs.sh MPIRUN TERNION_PLAN TERNION_TRAIN CONFIG CLUSTER OUT_DIR
# ternion-plan as a user runs it: it ranks CONFIG's layouts on CLUSTER, --json gives the
# documented keys for every layout, --layout explains one and --json gives it as an array of
# one, and the config --write-config writes trains on the cluster's ranks under mpirun with
# the layout it names.
set -u
mpirun=$1 plan=$2 train=$3 config=$4 cluster=$5 out=$6
mkdir -p "$out"
fail() { echo "FAILED: $*"; exit 1; }

"$plan" --config "$config" --cluster "$cluster" --write-config "$out/best.yaml" > "$out/table.txt" 2>&1 ||
  { cat "$out/table.txt"; fail "ranking"; }
cat "$out/table.txt"
grep -qE '^ +1 +[0-9]+ +[0-9]+ +[0-9]+ ' "$out/table.txt" || fail "no ranked layout in the table"
"$plan" --config "$config" --cluster "$cluster" --json > "$out/all.json" || fail "--json"
python3 - "$out/all.json" "$out/best.yaml" <<'PY' || fail "the JSON or the written config"
import json, re, sys
rows = json.load(open(sys.argv[1]))
keys = ["tensor", "pipeline", "data", "micro_batch_size", "virtual_stages", "schedule", "zero_stage",
        "recompute", "sequence_parallel", "precision", "step_time_s", "tokens_per_s",
        "tflops_per_gpu", "mfu", "memory_gb_per_gpu", "fits", "bubble_fraction", "compute_s",
        "tensor_comm_s", "pipeline_send_s", "data_reduction", "data_comm_s",
        "data_comm_exposed_s", "optimizer_s"]
assert rows, "no layouts"
for row in rows:
    missing = [k for k in keys if k not in row]
    assert not missing, f"missing {missing}"
times = [row["step_time_s"] for row in rows]
assert times == sorted(times), "not fastest first"
best = rows[0]
text = open(sys.argv[2]).read()
for key in ("tensor", "pipeline", "data", "micro_batch_size", "virtual_stages"):
    assert re.search(rf"^  {key}: {best[key]}\b", text, re.M), f"{key}: {best[key]} not in the written config"
print("json: %d layouts, first %sx%sx%s micro-batch %s" % (len(rows), best["tensor"], best["pipeline"],
      best["data"], best["micro_batch_size"]))
PY

"$plan" --config "$config" --cluster "$cluster" --layout 1,1,2,1 > "$out/explain.txt" 2>&1 ||
  { cat "$out/explain.txt"; fail "--layout"; }
cat "$out/explain.txt"
for term in "compute of the slowest stage" "tensor-parallel collectives" "pipeline: one send" \
            "data-parallel reduction (flat)" "optimizer, clipping" "^step " "^memory a GPU: .* = parameters"; do
  grep -q "$term" "$out/explain.txt" || fail "--layout explains no '$term'"
done
"$plan" --config "$config" --cluster "$cluster" --layout 1,1,2,1 --json |
  python3 -c 'import json, sys; r = json.load(sys.stdin); assert len(r) == 1 and r[0]["data"] == 2' ||
  fail "--layout --json is not an array of the one layout"

world=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))[0]; print(r["tensor"] * r["pipeline"] * r["data"])' "$out/all.json")
$mpirun -np "$world" "$train" --config "$out/best.yaml" --set training.steps=2 \
  --set training.sample_tokens=0 > "$out/train.log" 2>&1 || { cat "$out/train.log"; fail "training the written config"; }
grep -qE "step +2/2 \| loss" "$out/train.log" || { cat "$out/train.log"; fail "no step 2 in the run"; }
echo "the written config trains on $world ranks"

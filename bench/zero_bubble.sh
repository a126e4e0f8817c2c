#!/usr/bin/env bash
# The pipeline bubble of 1F1B, interleaved 1F1B (2 chunks per rank) and zero bubble (zb-h1) on
# 4 CPU stages with 8 micro-batches: each schedule trains STEPS steps and traces the last; the
# table gives the fastest step, the bubble measured in the trace, and the schedule's own bubble
# from the simulator (parallel/pipeline_simulator.h), with equal F, B and W times and with the
# traced step's per-stage times. The zb-h1 trace is drawn to OUT_DIR/pipeline-zb-h1-4x8.png.
#   [STAGES=2] bash bench/zero_bubble.sh TEXT_FILE [BUILD_DIR] [STEPS] [OUT_DIR]
# STAGES=2 runs 2 stages instead, a rank per core on a 2-core machine.
# The model: 8 blocks of 512 wide (8 heads), context 128, 2 sequences a micro-batch (GEMMs of
# 256 rows, so a backward's weight gradients are about half of it). The 4 ranks share this
# machine's cores, one thread each.
set -euo pipefail
cd "$(dirname "$0")/.."
text=${1:?usage: bench/zero_bubble.sh TEXT_FILE [BUILD_DIR] [STEPS] [OUT_DIR]}
build=${2:-build}
steps=${3:-3}
keep=${4:-}
stages=${STAGES:-4}
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/ternion-prepare" --input "$text" --output "$out/data" > /dev/null
sets=(--set "data.train=$out/data/train.bin" --set data.val= --set model.n_layer=8
      --set model.d_model=512 --set model.n_head=8 --set model.seq_len=128
      --set parallel.tensor=1 --set parallel.pipeline="$stages" --set parallel.data=1
      --set parallel.zero_stage=0 --set parallel.micro_batch_size=2
      --set training.global_batch_size=16 --set training.steps="$steps"
      --set optimizer.warmup_steps=1 --set training.eval_interval=0 --set training.sample_tokens=0
      --set checkpoint.save_dir= --set logging.log_interval=1)
printf '%-12s %10s %10s %14s %14s\n' schedule "step ms" measured "own, timed" "own, ideal"
for schedule in 1f1b interleaved zb-h1; do
  case $schedule in
    interleaved) layout=(--set parallel.schedule=1f1b --set parallel.virtual_stages=2) ;;
    *) layout=(--set parallel.schedule="$schedule" --set parallel.virtual_stages=1) ;;
  esac
  mpirun --oversubscribe -np "$stages" "$build/ternion-train" --config configs/quickstart.yaml "${sets[@]}" \
    "${layout[@]}" --set "logging.trace_file=$out/$schedule.json" \
    --set "logging.metrics_file=$out/$schedule.jsonl" < /dev/null > "$out/$schedule.log" 2>&1 ||
    { cat "$out/$schedule.log"; exit 1; }
  step_ms=$(grep -oE '"ms_per_step": ?[0-9.]+' "$out/$schedule.jsonl" | tail -n +2 | sed -E 's/.*: ?//' |
            sort -n | head -n 1)
  line=$(grep "traced to" "$out/$schedule.log")
  measured=$(sed -E 's/.*measured pipeline bubble ([0-9.]+)%.*/\1/' <<< "$line")
  ideal=$(sed -E "s/.*schedule's own: ([0-9.]+)% with equal.*/\1/" <<< "$line")
  timed=$(sed -E "s/.*times, ([0-9.]+)% with this step's.*/\1/" <<< "$line")
  printf '%-12s %10.0f %9s%% %13s%% %13s%%\n' "$schedule" "$step_ms" "$measured" "$timed" "$ideal"
  echo "  per stage, forward/backward ms: ${line#*stage by stage: }" | sed 's/)$//'
done
if [ -n "$keep" ]; then
  mkdir -p "$keep"
  cp "$out/zb-h1.json" "$keep/pipeline-zb-h1-${stages}x8.json"
  py=$(tools/python-with-matplotlib)
  "$py" tools/trace_to_png.py "$keep/pipeline-zb-h1-${stages}x8.json" "$keep/pipeline-zb-h1-${stages}x8.png"
fi

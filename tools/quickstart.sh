#!/usr/bin/env bash
# The README's main job: installs what is missing, builds, prepares the built-in corpus,
# trains a small byte-level GPT on it with 8 ranks in a 2 x 2 x 2 data x tensor x pipeline
# layout and prints a generated sample, then checks the sample:
# the share of its words that are real words of the corpus (an untrained model scores ~0).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TERNION_BUILD_DIR:-build}

bash tools/install-deps.sh
# A first build is of the CPU path alone, which this run uses: the CUDA sources would double
# the build (a build folder configured before keeps its setting; tools/run-tests.sh builds
# whatever the machine can).
cuda=()
[ -f "$build/CMakeCache.txt" ] || cuda=(-DTERNION_CUDA=OFF)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${cuda[@]+"${cuda[@]}"}" >/dev/null
# ternion-generate and ternion-export too: the README's next commands sample from and export
# the checkpoint this run saves.
cmake --build "$build" --target ternion-train ternion-prepare ternion-generate ternion-export \
  -j"$(nproc)"

"$build/ternion-prepare" --builtin --output runs/builtin
mkdir -p runs/quickstart
# 8 ranks as tensor 2 x pipeline 2 x data 2 (launch/ternion-run sizes and starts the job).
TERNION_TRAIN="$build/ternion-train" launch/ternion-run configs/quickstart.yaml "$@" |
  tee runs/quickstart/train.log

# The sample is everything after the "sample" line of the log.
sample=$(sed -n '/^ternion: sample/,$p' runs/quickstart/train.log | tail -n +2)
total=0 known=0
while read -r word; do
  [ -n "$word" ] || continue
  total=$((total + 1))
  if grep -qxF "$word" runs/builtin/words.txt; then known=$((known + 1)); fi
done < <(printf '%s\n' "$sample" | tr 'A-Z' 'a-z' | tr -c 'a-z' '\n')
echo
if [ "$total" -gt 0 ]; then
  echo "quickstart: $known of $total generated words are words of the corpus ($((100 * known / total))%)"
fi
# The loss curve as a picture (matplotlib; the run stands without it).
if py=$(tools/python-with-matplotlib 2>/dev/null) &&
   "$py" tools/plot_metrics.py runs/quickstart/metrics.jsonl --labels quickstart \
     -o runs/quickstart/loss.png > /dev/null; then
  echo "quickstart: loss curve in runs/quickstart/loss.png"
else
  echo "quickstart: no loss curve drawn (no Python with matplotlib)"
fi

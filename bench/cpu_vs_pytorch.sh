#!/usr/bin/env bash
# Ternion's CPU training step against PyTorch's eager CPU step at the same shapes, in one run:
#
#   bash bench/cpu_vs_pytorch.sh [--threads 2] [--rounds 3] [--steps 5] [--build DIR]
#
# GPT-2 124M, 4 x 64 tokens, f32, AdamW with clipping to norm 1, the same thread count for
# both (bench/bench_gpt_step.cpp, scripts/pytorch_gpt2_baseline.py --device cpu). The rounds
# alternate the two programs, so that a machine whose speed drifts slows both alike; the
# ratio is of the medians over rounds. PyTorch comes from PyPI into .venv-pytorch/ (ignored
# by git, about 5 GB: PyPI's Linux wheel brings its CUDA libraries) on first use; it is not a
# dependency of the build or the tests. TERNION_PYTHON=/path/to/python uses another one.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
threads=2 rounds=3 steps=5 build=$repo/build
while [ $# -gt 0 ]; do
  case $1 in
    --threads) threads=$2 ;;
    --rounds) rounds=$2 ;;
    --steps) steps=$2 ;;
    --build) build=$2 ;;
    *) echo "cpu_vs_pytorch: unknown argument $1 (see the script's first lines)" >&2; exit 2 ;;
  esac
  shift 2
done

python=${TERNION_PYTHON:-$repo/.venv-pytorch/bin/python}
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "cpu_vs_pytorch: installing PyTorch from PyPI into $repo/.venv-pytorch"
  python3 -m venv "$repo/.venv-pytorch"
  "$repo/.venv-pytorch/bin/pip" install -q torch numpy
  python=$repo/.venv-pytorch/bin/python
fi
if [ ! -x "$build/bench/bench_gpt_step" ]; then
  cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j "$(nproc)" --target bench_gpt_step >/dev/null
fi

export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
log=$(mktemp "${TMPDIR:-/tmp}/cpu_vs_pytorch.XXXXXX.log")
echo "cpu_vs_pytorch: both programs' output in $log"
ours=() theirs=()
for round in $(seq 1 "$rounds"); do
  "$build/bench/bench_gpt_step" --steps "$steps" --threads "$threads" > "$log.ours"
  "$python" "$repo/scripts/pytorch_gpt2_baseline.py" --device cpu --threads "$threads" \
    --steps "$steps" --warmup 1 > "$log.theirs"
  [ "$round" = 1 ] && sed -n 's/^cpu: */cpu: /p' "$log.ours"
  cat "$log.ours" "$log.theirs" >> "$log"
  ours+=("$(sed -n 's/^step: *\([0-9.]*\) ms.*/\1/p' "$log.ours")")
  theirs+=("$(sed -n 's/^pytorch gpt2-124m: .* tokens\/s, \([0-9.]*\) ms\/step.*/\1/p' "$log.theirs")")
  echo "round $round: ternion ${ours[-1]} ms/step, pytorch ${theirs[-1]} ms/step"
done
rm -f "$log.ours" "$log.theirs"
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
a=$(median "${ours[@]}") b=$(median "${theirs[@]}")
awk -v a="$a" -v b="$b" -v t="$threads" 'BEGIN {
  printf "GPT-2 124M CPU step, 4 x 64 tokens, %d threads: ternion %.0f ms, pytorch %.0f ms: " \
         "ternion %.2fx faster\n", t, a, b, b / a }'

#!/usr/bin/env bash
# tools/mutation-check.sh: plants known bugs, one at a time, in a scratch worktree of HEAD and
# runs the tests that should catch each; prints which were caught and by which tests. Not
# part of CI (it rebuilds once per bug: about 6 minutes on 2 cores); docs/testing.md holds its
# last result.
#
#   bash tools/mutation-check.sh [SCRATCH_DIR]
#
# Each bug is an exact text replacement in one file (the script fails if the text is not
# found, so a refactor cannot turn a mutation into a silent no-op) and a ctest regex.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${1:-$(mktemp -d /tmp/ternion-mutations.XXXXXX)}
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # GNU nproc would report OMP_NUM_THREADS
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# name | file | text | replacement | tests (ctest -R)
mutations=(
  "tensor parallelism switched off in the trainer (each rank trains the whole model)|training/trainer.cpp|tp_{groups != nullptr && groups->tp_size() > 1 ? &groups->tensor() : nullptr,|tp_{false ? &groups->tensor() : nullptr,|^tensor_parallel\\."
  "a data-parallel gradient bucket reduced twice|parallel/gradient_reducer.cpp|                    : data_.all_reduce_async(view, ReduceOp::Sum);|                    : (b == 0 ? (data_.all_reduce(view, ReduceOp::Sum), data_.all_reduce_async(view, ReduceOp::Sum)) : data_.all_reduce_async(view, ReduceOp::Sum));|^data_parallel\\."
  "sequence-parallel partial gradients never summed over the tensor group|training/trainer.cpp|  if (tp_.active())
    for (const ParameterSegment& s : segments_)|  if (false)
    for (const ParameterSegment& s : segments_)|^tensor_parallel\\."
)

git worktree add --detach "$scratch/tree" HEAD >/dev/null
trap 'git worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true' EXIT
tree=$scratch/tree build=$scratch/build
echo "mutation-check: building HEAD (CPU path) in $build"
cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTERNION_CUDA=OFF >/dev/null
cmake --build "$build" -j"$jobs" >/dev/null 2>&1
# The tests must pass before any bug is planted.
# fields M: the five fields of mutation M (its text may span lines).
fields() { IFS='|' read -r -d '' name file text replacement tests <<<"$1" || true; tests=${tests%$'\n'}; }
for m in "${mutations[@]}"; do
  fields "$m"
  ctest --test-dir "$build" -j"$jobs" -R "$tests" >/dev/null 2>&1 ||
    { echo "mutation-check: '$tests' fails without any planted bug"; exit 1; }
done

results=()
for m in "${mutations[@]}"; do
  fields "$m"
  echo "mutation-check: planting: $name"
  TEXT=$text REPLACEMENT=$replacement perl -0pi -e \
    '$n = s/\Q$ENV{TEXT}\E/$ENV{REPLACEMENT}/g; END { exit($n == 1 ? 0 : 3) }' "$tree/$file" ||
    { echo "mutation-check: the text of '$name' is not found once in $file"; exit 1; }
  cmake --build "$build" -j"$jobs" >/dev/null 2>&1 || { echo "mutation-check: '$name' does not build"; exit 1; }
  caught=$( { ctest --test-dir "$build" -j"$jobs" -R "$tests" 2>&1 || true; } |
             sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Failed)$/\1/p' | tr '\n' ' ')
  results+=("| $name | \`$tests\` | ${caught:-**not caught**} |")
  git -C "$tree" checkout -- "$file"
done
cmake --build "$build" -j"$jobs" >/dev/null 2>&1  # leaves the scratch build as HEAD

echo
echo "| planted bug | tests run | failed (caught by) |"
echo "| --- | --- | --- |"
printf '%s\n' "${results[@]}"
rm -rf "$build"

#!/usr/bin/env bash
# The README's test command (and CI's): installs what is missing, builds everything,
# runs the whole suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TERNION_BUILD_DIR:-build}
jobs=$(nproc)

bash tools/install-deps.sh
# -U: CUDA on wherever a toolkit is found, also in a build folder the quickstart configured
# for the CPU path alone.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -UTERNION_CUDA >/dev/null
cmake --build "$build" -j"$jobs"
# In CI (CI=true) a CUDA build is also checked the way a machine without a toolkit builds:
# the CPU-only configuration must compile, link (nothing may reach a CUDA-only symbol) and
# pass on its own.
if [ "${CI:-}" = true ] && grep -q '^TERNION_CUDA:BOOL=ON' "$build/CMakeCache.txt"; then
  cmake -S . -B "$build-cpu-only" -DCMAKE_BUILD_TYPE=Release -DTERNION_CUDA=OFF >/dev/null
  cmake --build "$build-cpu-only" -j"$jobs"
  ctest --test-dir "$build-cpu-only" --output-on-failure -j"$jobs" "$@"
fi
# Tests run one OpenMP thread each (set per test) so that parallel ctest jobs never make
# spin-waiting thread pools fight over the cores.
ctest --test-dir "$build" --output-on-failure -j"$jobs" "$@"

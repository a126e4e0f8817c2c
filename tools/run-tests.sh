#!/usr/bin/env bash
# The README's test command (and CI's): installs what is missing, builds everything,
# runs the whole suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TERNION_BUILD_DIR:-build}
jobs=$(nproc)

bash tools/install-deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$jobs"
# Tests run one OpenMP thread each (set per test) so that parallel ctest jobs never make
# spin-waiting thread pools fight over the cores.
ctest --test-dir "$build" --output-on-failure -j"$jobs" "$@"

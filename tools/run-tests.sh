#!/usr/bin/env bash
# The README's test command (and CI's): installs what is missing, builds everything,
# runs the whole suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TERNION_BUILD_DIR:-build}
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # GNU nproc would report OMP_NUM_THREADS

bash tools/install-deps.sh
# Hugging Face's tokenizers, the reference of data.bpe_matches_hf_tokenizers (skipped without
# it, so a machine that cannot install it gets a warning, not a failure).
tools/python-with-tokenizers >/dev/null ||
  echo "ternion: warning: no Python with tokenizers: data.bpe_matches_hf_tokenizers will be skipped" >&2
# -U: CUDA on wherever a toolkit is found, also in a build folder the quickstart configured
# for the CPU path alone.
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -UTERNION_CUDA >/dev/null
cmake --build "$build" -j"$jobs"
# In CI (CI=true) the CPU-only configuration is also built, the way a machine without a CUDA
# toolkit builds it (nothing may reach a CUDA-only symbol), under AddressSanitizer and
# UndefinedBehaviorSanitizer, and the whole suite runs on it, multi-rank tests included.
# LeakSanitizer is off: Open MPI's plugins, unloaded at MPI_Finalize, leave allocations it
# cannot attribute. A huge allocation must fail as it does without ASan (a MemoryError).
# Excluded there: a comparison with a double-precision reference after several AdamW steps,
# which the sanitizers' scalar code (another summation order) moves past its 1e-5 on a weight
# whose gradient is near AdamW's epsilon.
if [ "${CI:-}" = true ]; then
  cmake -S . -B "$build-sanitize" -DCMAKE_BUILD_TYPE=Release -DTERNION_CUDA=OFF \
    -DTERNION_SANITIZE=address >/dev/null
  cmake --build "$build-sanitize" -j"$jobs"
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$build-sanitize" --output-on-failure -j"$jobs" \
    -E '^LlamaReference\.ScaledRotaryTrainsAsTheReference$' "$@"
  # ThreadSanitizer on the communicator's tests: its progress thread, watchdog and flight
  # recorder, on 1 to 8 ranks (tools/sanitizers/tsan.supp says what is suppressed and why).
  cmake -S . -B "$build-tsan" -DCMAKE_BUILD_TYPE=Release -DTERNION_CUDA=OFF \
    -DTERNION_SANITIZE=thread >/dev/null
  cmake --build "$build-tsan" -j"$jobs" --target test_comm
  TSAN_OPTIONS="suppressions=$PWD/tools/sanitizers/tsan.supp" \
    ctest --test-dir "$build-tsan" --output-on-failure -j"$jobs" -L '^comm$'
  # Each parser of outside input fuzzed briefly from its committed corpus (a finding fails).
  bash tools/fuzz.sh 30
fi
# Tests run one OpenMP thread each (set per test) so that parallel ctest jobs never make
# spin-waiting thread pools fight over the cores.
ctest --test-dir "$build" --output-on-failure -j"$jobs" "$@"

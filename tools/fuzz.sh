#!/usr/bin/env bash
# tools/fuzz.sh [SECONDS] [TARGET...]
# Fuzzes the parsers of outside input (the targets fuzz/CMakeLists.txt lists) with clang's
# libFuzzer, the whole CPU build under AddressSanitizer and UBSan (in build-fuzz/), each target
# for SECONDS (default 300) from its committed corpus. Inputs that reach new code are merged
# back into fuzz/corpus/<target>/ (commit them: ctest replays that corpus in every build).
# Prints each target's executions and coverage, and the execution at which its coverage last
# grew (how far it is past its plateau); a finding stops the target and leaves its input in
# build-fuzz/findings/<target>/. An allocation over 256 MB counts as a finding: no input of a
# few KB may ask for that much.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] ||
  read -ra targets <<< "$(tr '\n' ' ' < fuzz/CMakeLists.txt |
                         sed -E 's/.*set\(fuzz_targets ([^)]*)\).*/\1/')"
bash tools/install-deps.sh clang libclang-rt-dev libomp-dev
mkdir -p build-fuzz
log=build-fuzz/build.log
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERNION_FUZZ=ON \
  -DTERNION_CUDA=OFF -DTERNION_NATIVE=OFF -DTERNION_BUILD_TESTS=OFF > "$log" 2>&1 ||
  { cat "$log"; exit 1; }
cmake --build build-fuzz -j"$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}") >> "$log" 2>&1 ||
  { grep -E "error" "$log" | head -20; exit 1; }
status=0
for t in "${targets[@]}"; do
  work=build-fuzz/work/$t findings=build-fuzz/findings/$t
  mkdir -p "$work" "$findings"
  echo "== $t: ${seconds} s"
  if ! OMP_NUM_THREADS=1 ./build-fuzz/fuzz/fuzz_$t "$work" fuzz/corpus/$t -max_total_time="$seconds" \
      -timeout=10 -malloc_limit_mb=256 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$findings/" > "build-fuzz/$t.log" 2>&1; then
    if grep -q "libFuzzer: run interrupted" "build-fuzz/$t.log"; then
      echo "$t: interrupted (no finding)"  # stopped by hand: still reported and merged below
    else
      status=1
      echo "FINDING in $t:"
      grep -E "ERROR|SUMMARY|fuzz finding|Test unit written" "build-fuzz/$t.log" | head -10 ||
        true
    fi
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "build-fuzz/$t.log" || true
  grep -oE "cov: [0-9]+ ft: [0-9]+" "build-fuzz/$t.log" | tail -1 || true
  # The plateau: the execution at which the edge coverage last grew.
  awk '/^#[0-9]+/ && match($0, /cov: [0-9]+/) {
         cov = substr($0, RSTART + 5, RLENGTH - 5); n = substr($1, 2)
         if (cov != last) { last = cov; at = n } }
       END { if (at) printf "coverage last grew at execution %d (to %d edges)\n", at, last }' \
    "build-fuzz/$t.log"
  ./build-fuzz/fuzz/fuzz_$t -merge=1 fuzz/corpus/$t "$work" > "build-fuzz/$t.merge.log" 2>&1 || true
  echo "corpus: $(ls fuzz/corpus/$t | wc -l) files"
done
exit $status

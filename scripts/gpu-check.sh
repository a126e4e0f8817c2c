#!/usr/bin/env bash
# shellcheck disable=SC2317  # the step functions run through `step` (timeout bash -c)
# scripts/gpu-check.sh: the one-shot check of the CUDA path on a GPU machine (docs/gpu.md).
#
#   bash scripts/gpu-check.sh [--until deps|configure|build | --prebuild]
#
# Run from the repository root on the GPU machine, with .gpu-deps/ beside the tree (made on a
# Debian 12 machine with package access by tools/prepare-gpu-deps.sh; --prebuild, there too,
# adds the check's programs built for sm_90). In order:
#   1. unpack .gpu-deps/*.deb with dpkg -x into a private prefix (never into /) and point the
#      build at it: OpenBLAS, yaml-cpp, GoogleTest, Open MPI (relocated with OPAL_PREFIX);
#   2. the prebuilt build if it was made from this tree, else configure (Ninja, Release, CUDA
#      architecture 90) and build the programs the check runs;
#   3. ctest -L gpu: every CUDA op, model and training test against the CPU; a skipped test
#      fails the check (here they must run), but for the fused GELU GEMMs where cuBLASLt's
#      GELU differs from ours (training then keeps the unfused kernels);
#   4. 20 fp32 training steps on the GPU against the same 20 on the CPU: the same losses;
#   5. bench_gemm (the bf16 GEMM peak, measured now), GPT-2 124M and a 1.3B model in bf16 on
#      one GPU (tokens/s, MFU against that peak, peak memory), then GPT-2 124M in plain
#      PyTorch on the same GPU (scripts/pytorch_gpt2_baseline.py) and GPT-2 with
#      training.deterministic: false;
#   6. the parallel layouts on the one GPU over the MPI backend (several ranks share it)
#      against one GPU rank: tests/cli/compare_runs.sh on CI's layout config (pp_run.yaml),
#      the same losses to 1e-5 and the same sample; where there are two or more GPUs, NCCL's
#      collectives across them (tests/comm/nccl_collectives_test.cpp, none skipped);
#   7. bench_kernels (every op at GPT-2's micro-batch against a device copy's bandwidth), then
#      bench_linear.
# Every step has a timeout and the whole check a budget (TN_GPU_CHECK_BUDGET_S, default 450 s);
# a failed step is recorded and the next one runs. Writes to $OUT (an output folder the job
# runner returns) or else runs/gpu-check: summary.md (the table), gpu-check.log (every step's
# output), bench_gemm.txt, bench_linear.txt, bench_kernels.txt, pytorch.txt, runs.tar.gz
# (each run's metrics and log). Exit status 0 only if every step passed.
#
# TN_GPU_CMAKE_ARGS: more -D arguments for the configure (a CMake before 3.26 does not know
# nvcc's C++20 flag: -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20
# -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20).
# --until STOP ends after the named step (deps, configure or build): on a machine without a GPU
# this checks the unpacking and the relocated configure/build alone.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
repo=$PWD

until_step=""
prebuild=0
case "${1:-}" in
  --until) until_step=${2:-} ;;
  --prebuild) until_step=build; prebuild=1 ;;
esac
case "$until_step" in "" | deps | configure | build) ;;
  *) echo "usage: bash scripts/gpu-check.sh [--until deps|configure|build | --prebuild]" >&2; exit 2 ;;
esac

export out=${OUT:-$repo/runs/gpu-check}
export deps=${TN_DEPS_PREFIX:-/tmp/tn-deps}
# A build made here travels as .gpu-deps/prebuilt.tar.gz (--prebuild) and must unpack at the
# path it was built in, which its test lists name: a fixed one outside the checkout.
export build=${TN_GPU_BUILD_DIR:-/tmp/tn-gpu-build}
export prebuilt=$repo/.gpu-deps/prebuilt.tar.gz
# The runs' data, configs, metrics and logs: a fresh folder unless one is named.
work=${TN_GPU_WORK_DIR:-$(mktemp -d /tmp/tn-gpu-check.XXXXXX)}
export work
export jobs=${TN_GPU_JOBS:-16}
export cpu_gpu_rtol=${TN_GPU_CPU_RTOL:-1e-4}
budget=${TN_GPU_CHECK_BUDGET_S:-450}
deadline=$((SECONDS + budget))
mkdir -p "$out" "$work"
export log=$out/gpu-check.log
: > "$log"
rows=()       # the summary table's rows
failed=0

# ---- steps ---------------------------------------------------------------------------------

# step NAME LIMIT_S FUNCTION [ARGS...]: runs the function under `timeout` (its whole process
# group: mpirun's ranks too), output appended to the log, and records PASS / FAIL / TIMEOUT
# with its time and the note it left (`note TEXT`). Returns the function's status.
step() {
  local name=$1 limit=$2 t0 rc result detail
  shift 2
  local left=$((deadline - SECONDS - 20))
  if [ "$left" -lt 15 ]; then
    record "$name" "NOT RUN" 0 "the check's time budget (${budget} s) is spent"
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  export note_file=$work/note.$$
  : > "$note_file"
  printf '\n==== %s (timeout %s s) ====\n' "$name" "$limit" >> "$log"
  echo "gpu-check: $name ..."
  t0=$SECONDS
  timeout -k 10 "$limit" bash -o pipefail -c '"$@"' _ "$@" >> "$log" 2>&1
  rc=$?
  detail=$(tr '\n' ' ' < "$note_file" | sed 's/ *$//')
  case $rc in
    0) result=PASS ;;
    124 | 137) result=TIMEOUT; detail="killed after ${limit} s. $detail" ;;
    *) result="FAIL ($rc)" ;;
  esac
  record "$name" "$result" $((SECONDS - t0)) "$detail"
  return "$rc"
}
record() {  # NAME RESULT SECONDS DETAIL
  rows+=("| $1 | $2 | $3 s | ${4//|//} |")
  [ "$2" = PASS ] || failed=1
  printf 'gpu-check: %-34s %-10s %4s s  %s\n' "$1" "$2" "$3" "$4"
  printf '==== %s: %s (%s s) %s\n' "$1" "$2" "$3" "$4" >> "$log"
}
note() { echo "$*" >> "$note_file"; echo "note: $*"; }
export -f note

# ---- 1. dependencies -----------------------------------------------------------------------

# .gpu-deps/main/*.deb unpacked into $deps; .gpu-deps/fallback's libraries linked into
# $deps/fallback-lib only for sonames this machine's ldconfig does not know.
unpack_deps() {
  set -e
  [ -d .gpu-deps/main ] || {
    note "no .gpu-deps: run tools/prepare-gpu-deps.sh on the dev machine and carry .gpu-deps"
    return 1
  }
  rm -rf "$deps"
  mkdir -p "$deps/fallback-root" "$deps/fallback-lib" "$deps/bin"
  unpack() {  # DEB DIR
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$1" "$2"
    else  # no dpkg: a .deb is an ar archive holding data.tar.{xz,zst,gz}
      local member compression
      member=$(ar t "$1" | grep '^data\.tar')
      case $member in *.xz) compression=-J ;; *.zst) compression=--zstd ;; *) compression=-z ;; esac
      ar p "$1" "$member" | tar -x "$compression" -C "$2" -f -
    fi
  }
  local f n=0 so soname used=()
  for f in .gpu-deps/main/*.deb; do unpack "$f" "$deps"; n=$((n + 1)); done
  for f in .gpu-deps/fallback/*.deb; do unpack "$f" "$deps/fallback-root"; done
  local known
  known=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) | awk '{print $1}')
  for so in "$deps"/fallback-root/{usr/,}lib/x86_64-linux-gnu/*.so.*; do
    if [ ! -f "$so" ] || [ -L "$so" ]; then continue; fi
    soname=$(readelf -d "$so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ -n "$soname" ] || continue
    if ! grep -qxF "$soname" <<< "$known"; then
      ln -sf "$so" "$deps/fallback-lib/$soname"
      used+=("$soname")
    fi
  done
  # What the packages' maintainer scripts would have made (dpkg -x runs none of them): the
  # alternatives links libfabric and the Open MPI wrappers are reached through.
  ln -sf ../libpsm1/libpsm_infinipath.so.1.16 "$deps/usr/lib/x86_64-linux-gnu/libpsm_infinipath.so.1"
  ln -sf ../usr/bin/orterun "$deps/bin/mpirun"
  ln -sf ../usr/bin/orterun "$deps/bin/mpiexec"
  ln -sf ../usr/bin/opal_wrapper "$deps/bin/mpicxx"
  ln -sf ../usr/bin/opal_wrapper "$deps/bin/mpicc"
  # Open MPI reads its help files and components relative to OPAL_PREFIX (env, below).
  "$deps/bin/mpicxx" --showme:version
  "$deps/bin/mpicxx" --showme
  "$deps/bin/mpirun" --version | head -1
  note "$n packages unpacked into $deps; fallback libraries used: ${used[*]:-none}"
}
export -f unpack_deps

# The environment every later step runs in (exported here, in the main shell).
lib=$deps/usr/lib/x86_64-linux-gnu
export OPAL_PREFIX=$deps/usr
export PATH=$deps/bin:$PATH
export LD_LIBRARY_PATH=$lib:$lib/openmpi/lib:$lib/openblas-openmp:$deps/fallback-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Open MPI as root, on one node, without ssh, without InfiniBand: shared memory only.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
export mpirun_cmd="$deps/bin/mpirun --oversubscribe --allow-run-as-root"
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=$PATH:/usr/local/cuda/bin
fi

machine_facts() {
  echo "--- machine"; uname -a; grep PRETTY_NAME /etc/os-release; nproc; free -g | head -2
  echo "--- GPU"; nvidia-smi || note "nvidia-smi failed"
  echo "--- tools"; command -v nvcc cmake ninja gcc g++ python3 dpkg-deb readelf
  nvcc --version | tail -2; cmake --version | head -1; g++ --version | head -1
  echo "--- cuDNN / NCCL / cuBLAS candidates"
  find /usr/include /usr/local/cuda*/include /usr/local/cuda*/targets -maxdepth 3 \
    \( -name cudnn.h -o -name nccl.h -o -name cublasLt.h \) 2>/dev/null
  python3 -c 'import nvidia.cudnn, nvidia.nccl; print(list(nvidia.cudnn.__path__), list(nvidia.nccl.__path__))' 2>&1
  note "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  note "nvcc $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'), $(g++ -dumpfullversion 2>/dev/null | sed 's/^/g++ /'), $(cmake --version | head -1)"
  return 0
}

# ---- 2. configure and build ----------------------------------------------------------------

# cuDNN and NCCL: the toolkit's (CMake finds them) or else the pip wheels beside PyTorch.
cuda_extra_args() {
  local where dir lib_file
  for pkg in cudnn nccl; do
    if find /usr/include /usr/local/cuda*/include /usr/local/cuda*/targets -maxdepth 3 \
         -name "$pkg.h" 2>/dev/null | grep -q .; then continue; fi
    where=$(python3 -c "import nvidia.$pkg as m; print(list(m.__path__)[0])" 2>/dev/null) || continue
    dir=$where/lib
    lib_file=$(find "$dir" -maxdepth 1 -name "lib$pkg.so*" | sort | head -1)
    [ -n "$lib_file" ] || continue
    local upper=${pkg^^}
    echo "-D${upper}_INCLUDE_DIR=$where/include -D${upper}_LIBRARY=$lib_file"
  done
}

configure() {
  echo "cuDNN/NCCL arguments: ${cuda_extra:-none, the CUDA toolkit has both}"
  # cudnn-frontend's headers, carried in .gpu-deps: without them attention runs on cuBLAS only.
  local frontend=$repo/.gpu-deps/cudnn-frontend/include
  if [ -f "$frontend/cudnn_frontend.h" ]; then
    cuda_extra="$cuda_extra -DCUDNN_FRONTEND_INCLUDE_DIR=$frontend"
  else
    note "no .gpu-deps/cudnn-frontend: attention on the cuBLAS path only"
  fi
  # shellcheck disable=SC2086 # $cuda_extra and TN_GPU_CMAKE_ARGS: lists of -D arguments
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTERNION_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$deps/usr;$lib/cmake" \
    -Dyaml-cpp_DIR="$lib/cmake/yaml-cpp" -DGTest_DIR="$lib/cmake/GTest" \
    -DMPI_CXX_COMPILER="$deps/bin/mpicxx" -DMPIEXEC_EXECUTABLE="$deps/bin/mpirun" \
    -DOPENBLAS_LIBRARY="$lib/openblas-openmp/libopenblas.so" \
    -DOPENBLAS_INCLUDE_DIR="$deps/usr/include/x86_64-linux-gnu/openblas-openmp" \
    -DPCRE2_INCLUDE_DIR="$deps/usr/include" -DPCRE2_LIBRARY="$lib/libpcre2-8.a" \
    -DZSTD_INCLUDE_DIR="$deps/usr/include" -DZSTD_LIBRARY="$lib/libzstd.a" \
    -DZLIB_INCLUDE_DIR="$deps/usr/include" -DZLIB_LIBRARY="$lib/libz.a" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$lib:$lib/openmpi/lib:$deps/fallback-lib" \
    $cuda_extra ${TN_GPU_CMAKE_ARGS:-} || return 1
  # Every dependency must come from the unpacked prefix (or the CUDA toolkit): the proof that
  # the relocation worked, and that nothing of the machine's own was picked up by accident.
  grep -E '^(yaml-cpp_DIR|GTest_DIR|MPI_CXX_COMPILER|MPI_mpi_LIBRARY|MPI_mpi_cxx_LIBRARY|OPENBLAS_LIBRARY|OPENBLAS_INCLUDE_DIR|PCRE2_LIBRARY|ZSTD_LIBRARY|ZLIB_LIBRARY|CUDNN_LIBRARY|NCCL_LIBRARY)[:=]' \
    "$build/CMakeCache.txt"
  local outside
  outside=$(grep -E '^(yaml-cpp_DIR|GTest_DIR|MPI_CXX_COMPILER|MPI_mpi_LIBRARY|OPENBLAS_LIBRARY|PCRE2_LIBRARY|ZSTD_LIBRARY|ZLIB_LIBRARY)[:=]' \
    "$build/CMakeCache.txt" | grep -v "$deps") && {
    note "found outside $deps: $outside"
    return 1
  }
  note "OpenBLAS, yaml-cpp, PCRE2, Zstandard, zlib, GTest and Open MPI all from $deps"
  return 0
}

export programs="ternion-train ternion-prepare tests/test_gpu tests/test_comm bench/bench_gemm
  bench/bench_linear bench/bench_kernels"
build_targets() {
  cmake --build "$build" -j"$jobs" --target ternion-train ternion-prepare test_gpu test_comm \
    bench_gemm bench_linear bench_kernels
}

# A hash of every source and build file: a prebuilt build is used only for the tree it was
# built from. The files are those a `run` sends (tracked, and untracked but not ignored): git
# says which where it can; a copy without .git holds only those but for what `carry` and
# earlier runs left (pruned), so `find` lists the same set there.
source_stamp() {
  { if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
      git ls-files --cached --others --exclude-standard | sed 's|^|./|'
    else
      find . \( -path ./.git -o -path './build*' -o -path ./.gpu-deps -o -path ./.deps \
                -o -path ./runs \) -prune -o -type f -print
    fi; } | grep -E '(\.(cpp|cu|cuh|h|cmake)|/CMakeLists\.txt)$' |
    LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum | cut -c1-16
}

# --prebuild, here: the programs and the gpu tests' ctest files, with the tree's stamp.
pack_prebuilt() {
  source_stamp > "$build/source-stamp"
  # Every test program's include file (each includes its test list only if that exists, so
  # ctest reads them all), the gpu tests' list, and the programs.
  local files=(source-stamp CTestTestfile.cmake tests/CTestTestfile.cmake "tests/test_gpu[1]_tests.cmake")
  local f
  for f in "$build"/tests/*_include.cmake; do files+=("tests/${f##*/}"); done
  # shellcheck disable=SC2206 # $programs: a list of paths without spaces
  files+=($programs)
  tar -czf "$prebuilt" -C / "${files[@]/#/${build#/}/}" || return 1
  note "packed $(du -h "$prebuilt" | cut -f1) into $prebuilt for source stamp $(cat "$build/source-stamp")"
}

# On the GPU machine: unpacks a prebuilt build made from this tree, then finds each library
# its programs need that the loader does not (the CUDA toolkit's, PyTorch's wheels) and adds
# its folder to LD_LIBRARY_PATH (the file prebuilt-libs, read by the main shell). Fails, and
# the check builds here instead, if the build is another tree's or a library stays missing.
use_prebuilt() {
  [ -f "$prebuilt" ] || { note "no prebuilt build"; return 1; }
  rm -rf "$build" && tar -xzf "$prebuilt" -C / || return 1
  local want have
  want=$(cat "$build/source-stamp") have=$(source_stamp)
  [ "$want" = "$have" ] || { note "prebuilt build is of another tree ($want, here $have)"; return 1; }
  local dirs=() candidates so dir missing
  candidates=$(python3 -c 'import nvidia, os; [print(os.path.join(p, d, "lib")) for p in nvidia.__path__ for d in os.listdir(p)]' 2>/dev/null)
  candidates="/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib $candidates"
  for so in $(for p in $programs; do ldd "$build/$p"; done | awk '/not found/ {print $1}' | sort -u); do
    for dir in $candidates; do
      [ -e "$dir/$so" ] && { dirs+=("$dir"); export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir; break; }
    done
  done
  printf '%s\n' "${dirs[@]}" | sort -u > "$work/prebuilt-libs"
  missing=$(for p in $programs; do ldd "$build/$p"; done | awk '/not found/ {print $1}' | sort -u)
  [ -z "$missing" ] || { note "libraries not found: $missing"; return 1; }
  "$build/tests/test_gpu" --gtest_list_tests > /dev/null || { note "test_gpu does not start"; return 1; }
  note "prebuilt build (stamp $want); library folders added: $(sort -u "$work/prebuilt-libs" | tr '\n' ' ')"
}

# The baseline: GPT-2 124M in plain PyTorch at the same shape and batch (compiled; uncompiled
# if compilation fails, and said so), tokens/s beside Ternion's.
pytorch_baseline() {
  local result=$work/pytorch.txt
  python3 "$repo/scripts/pytorch_gpt2_baseline.py" --steps 5 --warmup 2 > "$result" 2>&1 || {
    cat "$result"
    note "torch.compile run failed; uncompiled"
    python3 "$repo/scripts/pytorch_gpt2_baseline.py" --steps 4 --warmup 1 --no-compile \
      > "$result" 2>&1 || { cat "$result"; return 1; }
  }
  cat "$result"
  local theirs ours
  theirs=$(sed -n 's/^pytorch gpt2-124m: \([0-9]*\) tokens\/s.*/\1/p' "$result")
  ours=$(sed -n 's/^\([0-9]*\) tokens\/s.*/\1/p' "$work/bench-gpt2-124m/summary.txt" 2>/dev/null)
  [ -n "$theirs" ] || { note "no PyTorch rate"; return 1; }
  if [ -n "$ours" ]; then
    note "PyTorch $theirs tokens/s, Ternion $ours: ratio $(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')"
  else
    note "PyTorch $theirs tokens/s (no Ternion rate)"
  fi
}

# ---- 3. the gpu tests ----------------------------------------------------------------------

gpu_tests() {
  local result=$work/ctest-gpu.txt
  ctest --test-dir "$build" -L '^gpu$' --output-on-failure --timeout 120 -j8 > "$result" 2>&1
  local rc=$?
  cat "$result"
  local total skipped allowed
  # "100% tests passed, 0 tests failed out of N" (CMake 4: "100% tests passed out of N")
  total=$(sed -n 's/.*tests passed.* out of \([0-9]*\).*/\1/p' "$result")
  # The one skip that is a verdict, not a missing feature: cuBLASLt's GELU epilogue differs
  # from ours on this machine, so training keeps the unfused kernels and the fused path is out.
  allowed=$(grep '\*\*\*Skipped' "$result" | grep -c 'GpuLinear.FusedGeluGemmsMatchTheCpuOps')
  skipped=$(($(grep -c '\*\*\*Skipped' "$result") - allowed))
  note "$(grep -E 'tests passed' "$result"), $skipped skipped"
  [ "$allowed" -eq 0 ] || note "cuBLASLt's GELU epilogues differ from ours here: the unfused kernels run"
  [ "${total:-0}" -gt 0 ] || { note "no gpu tests found"; return 1; }
  [ "$skipped" -eq 0 ] || { note "gpu tests must run here, not skip"; return 1; }
  return "$rc"
}

# NCCL's collectives across ranks, one GPU each (tests/comm/nccl_collectives_test.cpp), on up
# to 8 of the machine's GPUs; none may skip. Called only where there are two or more.
nccl_ranks() {
  local ranks=$1 result=$work/nccl-ranks.txt
  $mpirun_cmd -np "$ranks" "$build/tests/test_comm" --gtest_filter='NcclRanks.*' > "$result" 2>&1
  local rc=$?
  cat "$result"
  if grep -q 'SKIPPED' "$result"; then note "NCCL tests must run here, not skip"; return 1; fi
  grep -qE 'PASSED.*\] 6 tests' "$result" || { note "not every NCCL test ran and passed"; return 1; }
  note "6 NCCL tests passed on $ranks ranks"
  return "$rc"
}

# ---- 4. and 5. training against the CPU and across layouts ---------------------------------

# A small byte-level model (the quickstart's shape) on the built-in corpus, one rank, fp32.
write_small_config() {
  cat > "$work/small.yaml" <<'EOF'
model:
  vocab_size: 256
  seq_len: 64
  n_layer: 4
  n_head: 4
  d_model: 128
  dropout: 0.0
parallel:
  micro_batch_size: 8
  backend: mpi
training:
  steps: 20
  global_batch_size: 32
  seed: 1234
  sample_tokens: 40
  sample_prompt: "The "
  device: cuda
  precision: fp32
optimizer:
  type: adamw
  lr: 1.0e-3
  warmup_steps: 5
  grad_clip: 1.0
logging:
  log_interval: 5
EOF
}

# The layouts' run: the config CI's own layout comparisons use (tests/pipeline_parallel_mpi/
# pp_run.yaml: 4 blocks, width 64, dropout 0.1, 10 steps), on the GPU over MPI.
write_layout_config() {
  sed -e 's/^parallel:$/parallel:\n  backend: mpi/' -e 's/^training:$/training:\n  device: cuda/' \
    "$repo/tests/pipeline_parallel_mpi/pp_run.yaml" > "$work/layout.yaml"
  grep -q 'device: cuda' "$work/layout.yaml" && grep -q 'backend: mpi' "$work/layout.yaml"
}

prepare_data() {
  "$build/ternion-prepare" --builtin --output "$work/data"
}

# losses of two metrics files, step by step, within relative tolerance $3 (the parse of
# tests/cli/compare_runs.sh).
compare_losses() {
  loss() { sed -E 's/.*"loss": ?([^,]+),.*/\1/' "$1"; }
  [ "$(wc -l < "$1")" -eq "$(wc -l < "$2")" ] || { note "step counts differ"; return 1; }
  local verdict
  verdict=$(paste <(loss "$1") <(loss "$2") | awk -v rtol="$3" '
    { n++; d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1; r = a > 0 ? d / a : d
      if (r > worst) worst = r
      printf "step %d: cpu %s, gpu %s, rel diff %.2e\n", n, $1, $2, r > "/dev/stderr"
      if (r > rtol || $2 == "null") bad++ }
    END { printf "%d steps, max rel loss diff %.2e (tolerance %s)%s", n, worst, rtol,
                 bad ? ", " bad " over" : ""
          exit (n == 0 || bad) ? 1 : 0 }')
  local rc=$?
  note "$verdict"
  return "$rc"
}

gpu_vs_cpu() {
  local dir=$work/gpu-vs-cpu
  mkdir -p "$dir"
  local common=(--config "$work/small.yaml" --set "data.train=$work/data/train.bin")
  "$build/ternion-train" "${common[@]}" --set training.device=cpu \
    --set "logging.metrics_file=$dir/cpu.jsonl" > "$dir/cpu.log" 2>&1 ||
    { cat "$dir/cpu.log"; note "the CPU run failed"; return 1; }
  "$build/ternion-train" "${common[@]}" --set training.device=cuda \
    --set "logging.metrics_file=$dir/gpu.jsonl" > "$dir/gpu.log" 2>&1 ||
    { cat "$dir/gpu.log"; note "the GPU run failed"; return 1; }
  cat "$dir/gpu.log"
  compare_losses "$dir/cpu.jsonl" "$dir/gpu.jsonl" "$cpu_gpu_rtol" || return 1
  sample() { sed -n '/^ternion: sample/,$p' "$1"; }
  if [ "$(sample "$dir/cpu.log")" = "$(sample "$dir/gpu.log")" ]; then
    note "same sample"
  else
    note "the samples differ (information only: sampling amplifies rounding)"
  fi
}

# One layout on RANKS ranks sharing the GPU over MPI against one GPU rank.
layout_vs_one_rank() {
  local name=$1 ranks=$2
  shift 2
  bash "$repo/tests/cli/compare_runs.sh" "$mpirun_cmd" "$build/ternion-train" "$work/layout.yaml" \
    "$work/data/train.bin" "$work/layout-$name" "$ranks" --set parallel.backend=mpi "$@" > \
    "$work/layout-$name.txt" 2>&1
  local rc=$?
  cat "$work/layout-$name.txt"
  note "$(tail -1 "$work/layout-$name.txt")"
  return "$rc"
}

# ---- 6. benchmarks -------------------------------------------------------------------------

gemm_bench() {
  "$build/bench/bench_gemm" | tee "$work/bench_gemm.txt"
  local rc=$?
  # Without a GPU bench_gemm says so and exits 0; here that is a failure.
  grep -q '^peak bf16:' "$work/bench_gemm.txt" || { note "no bf16 peak measured"; return 1; }
  note "$(grep -E '^peak|^step GEMMs' "$work/bench_gemm.txt" | tr '\n' ';')"
  return "$rc"
}

# The linear layer's forward with the bias epilogue against the unfused kernels.
linear_bench() {
  "$build/bench/bench_linear" | tee "$work/bench_linear.txt"
  local rc=${PIPESTATUS[0]}
  # A case's path is the word before its relative difference (a number like 1.23e-03).
  count_path() { grep -cE " $1 +[0-9.]+e[-+]" "$work/bench_linear.txt"; }
  note "$(count_path fused) cases took the bias epilogue, $(count_path 'bias\+gelu') bias and GELU, $(count_path fallback) fell back; see bench_linear.txt"
  return "$rc"
}

# Every op at GPT-2 124M's micro-batch (16 x 1024 tokens, bf16): where the step's time goes
# beside the GEMMs, each memory-bound op against a device copy's bandwidth, fused ops beside
# the unfused sequences they replace.
kernels_bench() {
  "$build/bench/bench_kernels" --device cuda --dtype bf16 --batch 16 --seq 1024 |
    tee "$work/bench_kernels.txt"
  local rc=${PIPESTATUS[0]}
  grep -q '^device copy' "$work/bench_kernels.txt" || { note "no GPU measured"; return 1; }
  note "$(grep -E '^(cross_entropy forward|layer_norm backward \+|gelu backward \+)' \
    "$work/bench_kernels.txt" | sed -E 's/ +[0-9.]+ ms +[0-9.]+ GB\/s +([0-9.]+%) of copy/: \1/' |
    tr '\n' ';')"
  return "$rc"
}

# Trains CONFIG on one GPU for its steps; a row of the benchmark table from its metrics.
train_bench() {
  local name=$1 config=$2
  shift 2
  local dir=$work/bench-$name
  mkdir -p "$dir"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 250 > "$dir/smi.txt" 2>/dev/null &
  local smi=$!
  "$build/ternion-train" --config "$config" --set "data.train=$work/data/train.bin" \
    --set "logging.metrics_file=$dir/metrics.jsonl" --set training.sample_tokens=0 "$@" \
    > "$dir/train.log" 2>&1
  local rc=$?
  kill "$smi" 2>/dev/null
  cat "$dir/train.log"
  [ "$rc" -eq 0 ] || { note "training failed ($rc)"; return 1; }
  local peak
  peak=$(sed -n 's/^peak bf16: \([0-9.]*\) .*/\1/p' "$work/bench_gemm.txt" 2>/dev/null)
  python3 - "$name" "$config" "$dir" "${peak:-0}" >> "$work/bench_rows.md" <<'EOF' || return 1
import json, re, statistics, sys
name, config, run, peak = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
steps = [json.loads(line) for line in open(f"{run}/metrics.jsonl")]
log = open(f"{run}/train.log").read()
params = int(re.search(r"parameters \((\d+)\)", log).group(1))
warm = min(5, len(steps) // 3)            # the first steps: allocator growth, cuBLAS heuristics
timed = steps[warm:]
tok_s = statistics.median(s["tokens_per_s"] for s in timed)
ms = statistics.median(s["ms_per_step"] for s in timed)
# The model TFLOP/s the trainer logs (layers/model_facts.h: the model's GEMMs and causal
# attention over the keys each query visits, 3x the forward's for a training step); one rank.
achieved = statistics.median(s["tflops_per_rank"] for s in timed)
mfu = f"{100 * achieved / peak:.1f}%" if peak > 0 else "n/a"
mem = max((s.get("peak_memory_mb") or s.get("device_peak_mb") or 0) for s in steps)
reserved = max((s.get("reserved_memory_mb") or 0) for s in steps)
try:
    smi = max(int(x) for x in open(f"{run}/smi.txt").read().split() if x.isdigit())
except ValueError:
    smi = 0
fmt = lambda mb: f"{mb / 1000:.1f} GB" if mb else "n/a"
print(f"| {name} | {params / 1e6:.0f}M | {len(steps)} ({warm} warm-up) | {tok_s:,.0f} | {ms:.1f} "
      f"| {achieved:.1f} | {mfu} | {100 * achieved / 989:.1f}% | {fmt(mem)} | {fmt(reserved)} "
      f"| {fmt(smi)} |")
# Where the step's time went (medians over the timed steps, on the GPU's timeline): forward,
# backward, gradient reductions and norm, optimizer; ms/step beyond their sum is time the GPU
# spent outside those spans (waiting for the host between steps and phases).
def phase(value):
    values = [v for v in (value(s) for s in timed) if v is not None]
    return statistics.median(values) if values else float("nan")
forward = phase(lambda s: s.get("forward_ms"))
backward = phase(lambda s: s["forward_backward_ms"] - s["forward_ms"]
                 if s.get("forward_ms") is not None else None)
phases = (f"forward {forward:.1f} ms, backward {backward:.1f} ms, "
          f"gradients {phase(lambda s: s.get('grad_sync_ms')):.1f} ms, "
          f"optimizer {phase(lambda s: s.get('optimizer_ms')):.1f} ms")
with open(f"{run}/summary.txt", "w") as f:
    f.write(f"{tok_s:.0f} tokens/s, MFU {mfu}; {phases}\n")
EOF
  note "$(cat "$dir/summary.txt")"
}

export -f configure build_targets cuda_extra_args gpu_tests write_small_config prepare_data \
  write_layout_config compare_losses gpu_vs_cpu layout_vs_one_rank gemm_bench linear_bench train_bench \
  kernels_bench machine_facts source_stamp pack_prebuilt use_prebuilt pytorch_baseline nccl_ranks
export repo lib budget

# ---- the run -------------------------------------------------------------------------------

echo "gpu-check: logging to $log (budget ${budget} s)"
step "machine" 30 machine_facts
step "unpack .gpu-deps" 120 unpack_deps
deps_ok=$?
finish_early() { [ "$until_step" = "$1" ]; }
built=1
if [ $deps_ok -eq 0 ] && ! finish_early deps; then
  # cuDNN / NCCL from PyTorch's wheels where the toolkit has none: their folders join the
  # library path of every later step.
  cuda_extra=$(cuda_extra_args)
  export cuda_extra
  for d in $cuda_extra; do
    case $d in -D*_LIBRARY=*) LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "${d#*=}") ;; esac
  done
  # A build made from this tree on the development machine (--prebuild) saves the build here.
  # Its absence or refusal is no failure of the check: the build here follows.
  failed_before=$failed
  if [ -z "$until_step" ] && step "prebuilt build" 60 use_prebuilt; then
    while read -r d; do LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; done < "$work/prebuilt-libs"
    built=0
  elif failed=$failed_before && step "configure (ninja, sm_90)" 120 configure && ! finish_early configure; then
    step "build" 330 build_targets && built=0
    if [ $built -eq 0 ] && [ $prebuild -eq 1 ]; then
      step "pack the build" 60 pack_prebuilt || built=1
    fi
  fi
fi

if [ $built -eq 0 ] && [ -z "$until_step" ]; then
  step "ctest -L gpu (none skipped)" 150 gpu_tests
  step "test data and configs" 30 bash -c 'write_small_config && write_layout_config && prepare_data'
  step "20 steps fp32: GPU = CPU" 90 gpu_vs_cpu
  # The aims next (the bf16 peak, then the models' MFU against it, then PyTorch at
  # GPT-2's shape), so that a slow build or a failing layout cannot leave a run without them.
  : > "$work/bench_rows.md"
  step "bench_gemm" 90 gemm_bench
  step "GPT-2 124M bf16, 1 GPU" 120 train_bench gpt2-124m "$repo/configs/gpu/gpt2-124m-bf16.yaml"
  step "GPT 1.3B bf16, 1 GPU" 150 train_bench gpt-1.3b "$repo/configs/gpu/gpt-1.3b-bf16.yaml"
  step "Llama-3.2-1B shape bf16, 1 GPU" 150 train_bench llama-3.2-1b "$repo/configs/gpu/llama-3.2-1b-bf16.yaml"
  step "PyTorch GPT-2 124M baseline" 150 pytorch_baseline
  # training.deterministic: false lets cuDNN's attention backward take its faster algorithm.
  step "GPT-2 124M bf16, deterministic off" 60 train_bench gpt2-124m-nondeterministic \
    "$repo/configs/gpu/gpt2-124m-bf16.yaml" --set training.deterministic=false \
    --set training.steps=8 --set optimizer.warmup_steps=2
  step "layout tp2 (2 ranks, mpi)" 60 layout_vs_one_rank tp2 2 --set parallel.tensor=2
  step "layout pp2 (2 ranks, mpi)" 60 layout_vs_one_rank pp2 2 --set parallel.pipeline=2
  step "layout dp2 zero1 (2 ranks, mpi)" 60 layout_vs_one_rank dp2 2 --set parallel.data=2 \
    --set parallel.zero_stage=1
  step "layout tp2 x pp2 x dp2 zero1 (8 ranks)" 90 layout_vs_one_rank tp2pp2dp2 8 \
    --set parallel.tensor=2 --set parallel.pipeline=2 --set parallel.data=2 \
    --set parallel.zero_stage=1
  # The GPUs this process may use: CUDA_VISIBLE_DEVICES's list where it is set.
  if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    gpus=$(tr ',' '\n' <<< "$CUDA_VISIBLE_DEVICES" | grep -c '[0-9]')
  else
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  fi
  if [ "$gpus" -ge 2 ]; then
    nccl_n=$((gpus >= 8 ? 8 : gpus >= 4 ? 4 : 2))
    step "NCCL across $nccl_n GPUs" 90 nccl_ranks "$nccl_n"
  else
    echo "gpu-check: NCCL across ranks not checked: $gpus GPU here (NCCL needs one per rank)" |
      tee -a "$log"
  fi
  step "bench_kernels (bf16, 16 x 1024)" 60 kernels_bench
  step "bench_linear" 45 linear_bench
  # Where the GELU check kept cuBLASLt's GELU epilogues out, GPT-2 again with them on (last,
  # so it only spends what is left): what training.gelu_epilogue: on would gain end to end.
  if grep -q 'GELU epilogues for 3072 features from 768 inputs: differ' \
       "$work/bench-gpt2-124m/train.log" 2>/dev/null; then
    step "GPT-2 124M bf16, gelu_epilogue on" 60 train_bench gpt2-124m-gelu-on \
      "$repo/configs/gpu/gpt2-124m-bf16.yaml" --set training.gelu_epilogue=on \
      --set training.steps=8 --set optimizer.warmup_steps=2
  fi
elif [ -z "$until_step" ]; then
  record "everything after the build" "NOT RUN" 0 "the build did not succeed"
fi

# ---- the summary ---------------------------------------------------------------------------

summary=$out/summary.md
{
  echo "# GPU check $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)," \
       "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?') (+ working tree)," \
       "$((SECONDS)) s in all"
  echo
  echo "| step | result | time | details |"
  echo "| --- | --- | --- | --- |"
  printf '%s\n' "${rows[@]}"
  if [ -s "$work/bench_rows.md" ]; then
    echo
    echo "Training throughput (bf16, one GPU; medians over the steps after the warm-up; MFU ="
    echo "3 x the forward FLOPs per token the trainer logs x tokens/s over the bf16 GEMM peak"
    echo "bench_gemm measured in this run, and over the datasheet's 989 TFLOP/s dense bf16):"
    echo
    echo "| model | params | steps | tokens/s | ms/step | TFLOP/s | MFU (measured peak) | MFU (989) | peak allocated | reserved | nvidia-smi max |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    cat "$work/bench_rows.md"
  fi
  if grep -q '^pytorch gpt2-124m:' "$work/pytorch.txt" 2>/dev/null; then
    echo
    echo "PyTorch at GPT-2 124M's shape and batch (scripts/pytorch_gpt2_baseline.py: bf16 autocast,"
    echo "fused AdamW, scaled_dot_product_attention, torch.compile), same GPU, same run:"
    echo
    echo '```'
    grep -E '^pytorch ' "$work/pytorch.txt"
    echo '```'
  fi
  if grep -q '^peak' "$work/bench_gemm.txt" 2>/dev/null; then
    echo
    echo '```'
    grep -E '^(peak|step GEMMs|square)' "$work/bench_gemm.txt"
    echo '```'
  fi
  # The fusions: the attention path, whether cuBLASLt's GELU passed the check (the training runs' logs) or an
  # epilogue was refused, its epilogues timed alone, and bench_kernels' fused/separate pairs.
  epilogues=$( { grep -hE 'cuBLASLt (GELU epilogues for|refused)|attention: (cuDNN fused|the cuBLAS path)' \
                   "$work"/bench-*/train.log 2>/dev/null | sort -u
                 grep -E '^(cuBLASLt GELU epilogues at|  forward  GELU|  backward DGELU)' \
                   "$work/bench_linear.txt" 2>/dev/null
                 grep -E '^(fc \+ bias|proj dx through|proj \+ residual|fc dW, db|cross_entropy forward)' \
                   "$work/bench_kernels.txt" 2>/dev/null; } )
  if [ -n "$epilogues" ]; then
    echo
    echo "Fusions (in training, the attention path and the GELU check's verdict; cuBLASLt's"
    echo "GELU epilogues timed alone by bench_linear; bench_kernels' fused/separate pairs, bf16):"
    echo
    echo '```'
    echo "$epilogues"
    echo '```'
  fi
} > "$summary"
[ -s "$work/bench_gemm.txt" ] && cp "$work/bench_gemm.txt" "$out/bench_gemm.txt"
[ -s "$work/bench_linear.txt" ] && cp "$work/bench_linear.txt" "$out/bench_linear.txt"
[ -s "$work/bench_kernels.txt" ] && cp "$work/bench_kernels.txt" "$out/bench_kernels.txt"
[ -s "$work/pytorch.txt" ] && cp "$work/pytorch.txt" "$out/pytorch.txt"
(cd "$work" && tar -czf "$out/runs.tar.gz" --exclude='data' --exclude='*.bin' --exclude='note.*' \
   --exclude='checkpoints' . 2>/dev/null)
echo
cat "$summary"
[ $failed -eq 0 ] && [ -z "$until_step" ] && echo "gpu-check: all passed"
exit $failed

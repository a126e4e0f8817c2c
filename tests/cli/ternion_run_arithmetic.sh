#!/usr/bin/env bash
# ternion_run_arithmetic.sh RUN TRAIN CONFIG SCRATCH: what launch/ternion-run asks of mpirun,
# read from a stand-in mpirun (TERNION_MPIRUN) that prints its arguments, on 1 and 2 cores
# (taskset): the world size from the layout, or from -np / TERNION_NP with parallel.data: 0;
# threads per rank = cores / ranks (at least 1) unless OMP_NUM_THREADS is set; --oversubscribe
# exactly when ranks outnumber the cores; and the world sizes it refuses, with their reasons,
# as it refuses a missing mpirun and arguments ternion-train does not take; and the ternion-train
# it runs when called through a symlink.
# CONFIG is a tensor 2 x data 2 layout.
set -u
run=$1 train=$2 config=$3 scratch=$4
rm -rf "$scratch"
mkdir -p "$scratch"
fail() { echo "FAILED: $*"; exit 1; }
fake=$scratch/mpirun
cat > "$fake" <<'FAKE'
#!/usr/bin/env bash
[ "${1:-}" = --version ] && { echo "mpirun (Open MPI) 4.1.4"; exit 0; }
echo "MPIRUN $*"
FAKE
chmod +x "$fake"
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores"; exit 77; }

# launch CORES [ENV=VALUE ...] -- ARGS: ternion-run's mpirun line (or its error) on CORES cores,
# then "EXIT status".
launch() {
  local cores=$1 envs=()
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u TERNION_NP \
    TERNION_TRAIN="$train" TERNION_MPIRUN="$fake" "${envs[@]+"${envs[@]}"}" \
    taskset -c "$(seq -s, 0 $((cores - 1)))" "$run" "$@" 2>&1
  echo "EXIT $?"
}
# expect NAME OUTPUT PATTERN...: each extended regex must match the output.
expect() {
  local name=$1 output=$2
  shift 2
  for pattern in "$@"; do
    grep -qE -- "$pattern" <<<"$output" || { echo "$output"; fail "$name: no match for '$pattern'"; }
  done
}
refuse() {  # NAME OUTPUT PATTERN...: refused with that reason and status 2, mpirun never started
  expect "$@" "^EXIT 2$"
  ! grep -q "^MPIRUN" <<<"$2" || { echo "$2"; fail "$1: mpirun was started"; }
}

# tensor 2 x data 2 = 4 ranks on 2 cores: oversubscribed, 1 thread each.
out=$(launch 2 -- "$config")
expect layout_4_on_2 "$out" "^MPIRUN -np 4 --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 "
# 2 ranks (data 1) on 2 cores: not oversubscribed, 1 thread each; on 1 core: oversubscribed.
out=$(launch 2 -- "$config" --set parallel.data=1)
expect layout_2_on_2 "$out" "^MPIRUN -np 2 --bind-to none -x OMP_NUM_THREADS=1 "
out=$(launch 1 -- "$config" --set parallel.data=1)
expect layout_2_on_1 "$out" "^MPIRUN -np 2 --oversubscribe "
# 1 rank on 2 cores: both threads.
out=$(launch 2 -- "$config" --set parallel.data=1 --set parallel.tensor=1)
expect layout_1_on_2 "$out" "^MPIRUN -np 1 --bind-to none -x OMP_NUM_THREADS=2 -x OPENBLAS_NUM_THREADS=2 "
# OMP_NUM_THREADS set: passed as it is (OpenBLAS follows it); the cores still decide
# oversubscription (nproc alone would count OMP_NUM_THREADS as the cores).
out=$(launch 2 OMP_NUM_THREADS=3 -- "$config" --set parallel.data=1)
expect omp_set "$out" "^MPIRUN -np 2 --bind-to none -x OMP_NUM_THREADS=3 -x OPENBLAS_NUM_THREADS=3 "
out=$(launch 2 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2 -- "$config" --set parallel.data=1)
expect openblas_set "$out" "^MPIRUN -np 2 --bind-to none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=2 "
# parallel.data: 0: the world size from -np or TERNION_NP, a multiple of tensor x pipeline.
out=$(launch 2 -- -np 6 "$config" --set parallel.data=0)
expect np_data_0 "$out" "^MPIRUN -np 6 --oversubscribe " "ternion-run: 6 ranks \(tensor 2 x pipeline 1 x data 3\)"
out=$(launch 2 TERNION_NP=2 -- "$config" --set parallel.data=0)
expect env_np_data_0 "$out" "^MPIRUN -np 2 --bind-to none " "ternion-run: 2 ranks \(tensor 2 x pipeline 1 x data 1\)"
out=$(launch 2 -- "$config" --set parallel.data=0)
refuse data_0_no_np "$out" "^ternion-run: error: parallel.data is 0 \(derive it from the world size\): give the world size with -np N or TERNION_NP$"
out=$(launch 2 -- -np 3 "$config" --set parallel.data=0)
refuse data_0_np_3 "$out" "^ternion-run: error: world size 3 is not a multiple of parallel.tensor \(2\) x parallel.pipeline \(1\) = 2$"
out=$(launch 2 -- -np 8 "$config")
refuse np_disagrees "$out" "^ternion-run: error: the config's layout is .* = 4 ranks, but the world size given is 8$"
out=$(launch 2 -- -np 0 "$config")
refuse np_0 "$out" "^ternion-run: error: the world size must be a whole number from 1 to 16777216, got '0'$"
# Past the rank cap, before bash arithmetic could wrap it (2^32 + 2 once started 2 ranks).
out=$(launch 2 -- -np 4294967298 "$config" --set parallel.data=0)
refuse np_huge "$out" "^ternion-run: error: the world size must be a whole number from 1 to 16777216, got '4294967298'$"
out=$(launch 2 -- -np "" "$config")
refuse np_empty "$out" "^ternion-run: error: -np needs a number$"
# A directory as the trainer; a pattern as mpirun, never matched against the current folder.
out=$(launch 2 TERNION_TRAIN=/tmp -- "$config")
refuse train_is_a_directory "$out" "^ternion-run: error: no ternion-train at '/tmp'"
out=$(cd "$scratch" && launch 2 "TERNION_MPIRUN=m*" -- "$config" --set parallel.data=1)
refuse mpirun_pattern "$out" "^ternion-run: error: no mpirun at 'm\*' \(TERNION_MPIRUN\)"
# No mpirun: said so, before its --version probe (which would take it for MPICH's).
out=$(launch 2 TERNION_MPIRUN=$scratch/no/mpirun -- "$config" --set parallel.data=1)
refuse no_mpirun "$out" \
  "^ternion-run: error: no mpirun at '.*/no/mpirun' \(TERNION_MPIRUN\): install Open MPI or set "
# Arguments after the config go to ternion-train on every rank: -np there, a --set without its
# value (left out of the layout) and a flag for the config are refused here.
hint="^  launch/ternion-run \[-np N\] CONFIG \[ternion-train args\.\.\.\]$"
out=$(launch 2 -- "$config" -np 4)
refuse np_after_config "$out" \
  "^ternion-run: error: '-np' after the config: the world size goes before it " "$hint"
out=$(launch 2 -- "$config" --dry-run --set)
refuse set_without_value "$out" \
  "^ternion-run: error: --set needs a value: --set section.key=value$" "$hint"
out=$(launch 2 -- --set parallel.data=1)
refuse no_config "$out" "^ternion-run: error: no config: .*, got '--set'$" "$hint"
out=$(launch 2 -- -np 2 --config= --dry-run)
refuse empty_config "$out" "^ternion-run: error: no config: .*, got ''$" "$hint"
# What ternion-train takes passes through, --set=K=V counted in the layout.
out=$(launch 2 -- "$config" --set=parallel.data=1 --set parallel.tensor=1 --dry-run)
expect train_args "$out" "^MPIRUN -np 1 .* --set=parallel.data=1 --set parallel.tensor=1 --dry-run$"
# Called through a symlink elsewhere, it runs the ternion-train of the repository holding it.
mkdir -p "$scratch/repo/launch" "$scratch/repo/build" "$scratch/bin"
cp "$run" "$scratch/repo/launch/ternion-run"
ln -s "$train" "$scratch/repo/build/ternion-train"
ln -s ../repo/launch/ternion-run "$scratch/bin/ternion-run"
out=$(env -u TERNION_TRAIN -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u TERNION_NP \
        TERNION_MPIRUN="$fake" "$scratch/bin/ternion-run" "$config" --set parallel.data=1 2>&1)
expect through_symlink "$out" "^MPIRUN -np 2 .* [^ ]*/repo/build/ternion-train --config "
echo "ternion-run: world sizes, threads per rank and oversubscription as documented"
rm -rf "$scratch"

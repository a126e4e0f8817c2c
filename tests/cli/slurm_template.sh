#!/usr/bin/env bash
# slurm_template.sh: launch/slurm/ternion.sbatch under Slurm's environment for a job sized with
# --nodes and --ntasks-per-node, and for one sized with --ntasks alone, each through srun and
# through mpirun (stubs that print their command line): the rank count and placement it
# launches with; and an unknown TERNION_LAUNCH refused.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for launcher in srun mpirun; do
  printf '#!/bin/sh\necho "%s $*"\n' "$launcher" > "$scratch/$launcher"
  chmod +x "$scratch/$launcher"
done
fail() { echo "FAILED: $*"; exit 1; }
# run EXPECTED_REGEX VAR=VALUE...: the template's output must match the regex.
run() {
  local want=$1 output
  shift
  output=$(env -i PATH="$scratch:$PATH" SLURM_SUBMIT_DIR="$repo" TERNION_TRAIN=/bin/true \
             SLURM_JOB_NUM_NODES=2 SLURM_CPUS_PER_TASK=3 "$@" \
             bash "$repo/launch/slurm/ternion.sbatch" --dry-run 2>&1) ||
    fail "exit status $? with $*: $output"
  echo "$output"
  echo "$output" | grep -qE -- "$want" || fail "no line matching /$want/ with $*"
}
run "2 nodes x 4 ranks = 8 ranks, 3 threads each" SLURM_NTASKS_PER_NODE=4 SLURM_NTASKS=8
run "^srun --mpi=pmix .*--cpus-per-task=3 /bin/true --config .* --dry-run$" SLURM_NTASKS_PER_NODE=4 SLURM_NTASKS=8
run "^mpirun -np 8 --map-by ppr:4:node:pe=3 " TERNION_LAUNCH=mpirun SLURM_NTASKS_PER_NODE=4 SLURM_NTASKS=8
# refuse EXPECTED_REGEX VAR=VALUE...: the template must exit 2 with that message, launching nothing.
refuse() {
  local want=$1 output status
  shift
  output=$(env -i PATH="$scratch:$PATH" SLURM_SUBMIT_DIR="$repo" TERNION_TRAIN=/bin/true \
             SLURM_JOB_NUM_NODES=2 SLURM_CPUS_PER_TASK=3 "$@" \
             bash "$repo/launch/slurm/ternion.sbatch" --dry-run 2>&1)
  status=$?
  echo "$output"
  [ "$status" -eq 2 ] || fail "exit status $status, not 2, with $*"
  echo "$output" | grep -qE -- "$want" || fail "no line matching /$want/ with $*"
  ! echo "$output" | grep -qE "^(srun|mpirun) " || fail "launched with $*"
}
run "6 ranks on 2 nodes, 3 threads each" SLURM_NTASKS=6
run "^mpirun -np 6 --map-by slot:pe=3 " TERNION_LAUNCH=mpirun SLURM_NTASKS=6
refuse "^ternion.sbatch: error: TERNION_LAUNCH must be srun or mpirun, got 'bogus'$" \
  TERNION_LAUNCH=bogus SLURM_NTASKS_PER_NODE=4 SLURM_NTASKS=8
# Its sizing advice is ternion-train's rule (a tensor group on one node), not just a bound.
grep -q "make ntasks-per-node a multiple of parallel.tensor" "$repo/launch/slurm/ternion.sbatch" ||
  fail "the template does not say ntasks-per-node must be a multiple of parallel.tensor"
echo "slurm_template: passed"

#!/usr/bin/env bash
# slurm_template.sh: launch/slurm/ternion.sbatch under Slurm's environment for a job sized with
# --nodes and --ntasks-per-node, and for one sized with --ntasks alone, each through srun and
# through mpirun (stubs that print their command line): the rank count and placement it
# launches with.
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
run "6 ranks on 2 nodes, 3 threads each" SLURM_NTASKS=6
run "^mpirun -np 6 --map-by slot:pe=3 " TERNION_LAUNCH=mpirun SLURM_NTASKS=6
echo "slurm_template: passed"

#!/usr/bin/env bash
# expect_abort.sh MPIRUN TEST_COMM NP
# Runs `test_comm --abort-test` on NP ranks: the last rank calls abort_job from two threads
# while the others wait in a barrier it never joins. Passes when the job ends (ctest's timeout
# catches a hang) with a non-zero status and the message printed exactly once.
set -u
mpirun=$1 program=$2 np=$3
output=$("$mpirun" --oversubscribe -np "$np" "$program" --abort-test 2>&1)
status=$?
echo "$output"
fail() { echo "FAILED: $*"; exit 1; }
[ "$status" -ne 0 ] || fail "exit status 0 after abort_job"
echo "$output" | grep -qE "Segmentation fault|Process received signal|terminate called" && fail "crashed"
want="ternion: rank $((np - 1)): deliberate abort from test_comm"
count=$(echo "$output" | grep -cF -- "$want")
[ "$count" -eq 1 ] || fail "'$want' printed $count times, expected once"
echo "$output" | grep -q "passed a barrier" && fail "a rank passed the barrier"
exit 0

#!/usr/bin/env bash
# expect_exit.sh STATUS REGEX COMMAND [ARG...]
# Runs COMMAND and passes when it exits with STATUS, its output matches the extended regex
# REGEX, and it did not crash (no abort, no uncaught exception, no signal).
set -u
want_status=$1 pattern=$2
shift 2
output=$("$@" 2>&1)
status=$?
echo "$output"
fail() { echo "FAILED: $*"; exit 1; }
[ "$status" -lt 128 ] || fail "killed by signal $((status - 128))"
echo "$output" | grep -qE "terminate called|Aborted|Segmentation fault|core dumped" && fail "crashed"
[ "$status" -eq "$want_status" ] || fail "exit status $status, expected $want_status"
echo "$output" | grep -qE -- "$pattern" || fail "output does not match /$pattern/"
exit 0

#!/usr/bin/env bash
# expect_run.sh STATUS [--lines FILE] [--once REGEX] [--match REGEX] -- COMMAND [ARG...]
# Runs COMMAND (usually mpirun ... ternion-train ...) and passes when it exits with STATUS,
# did not crash or abort (no signal, no MPI_ABORT, no uncaught exception), and its output
#   --lines FILE   holds FILE's lines exactly, consecutively and in order;
#   --once REGEX   has exactly one line matching the extended REGEX (a message every rank
#                  could print must be printed once);
#   --match REGEX  has at least one line matching REGEX;
#   --none REGEX   has no line matching REGEX.
# Each option may be repeated.
set -u
want_status=$1
shift
checks=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --lines|--once|--match|--none) checks+=("$1" "$2"); shift 2 ;;
    *) echo "expect_run.sh: unknown option '$1'"; exit 2 ;;
  esac
done
[ $# -gt 1 ] || { echo "expect_run.sh: no command after --"; exit 2; }
shift
output=$("$@" 2>&1)
status=$?
echo "$output"
fail() { echo "FAILED: $*"; exit 1; }
[ "$status" -lt 128 ] || fail "killed by signal $((status - 128))"
echo "$output" | grep -qE "terminate called|Aborted|Segmentation fault|core dumped|MPI_ABORT" &&
  fail "crashed or aborted"
[ "$status" -eq "$want_status" ] || fail "exit status $status, expected $want_status"
set -- "${checks[@]+"${checks[@]}"}"
while [ $# -gt 0 ]; do
  case $1 in
    --lines)
      # Slide a window of the file's length over the output and compare it line by line.
      expected=$(cat "$2")
      count=$(printf '%s\n' "$expected" | wc -l)
      found=0
      total=$(printf '%s\n' "$output" | wc -l)
      for ((start = 1; start + count - 1 <= total; ++start)); do
        window=$(printf '%s\n' "$output" | sed -n "${start},$((start + count - 1))p")
        if [ "$window" = "$expected" ]; then found=1; break; fi
      done
      [ "$found" -eq 1 ] || fail "output does not hold the $count lines of $2 in order:
$expected" ;;
    --once)
      n=$(printf '%s\n' "$output" | grep -cE -- "$2")
      [ "$n" -eq 1 ] || fail "$n lines match /$2/, expected exactly 1" ;;
    --match)
      printf '%s\n' "$output" | grep -qE -- "$2" || fail "output does not match /$2/" ;;
    --none)
      printf '%s\n' "$output" | grep -qE -- "$2" && fail "output matches /$2/" ;;
  esac
  shift 2
done
exit 0

#!/usr/bin/env bash
# export_failure.sh EXPORT_BINARY CHECKPOINT DIR
# ternion-export into DIR where model.safetensors cannot be replaced (a directory holds its
# name) must fail with one line naming it, and leave DIR as it found it: no temporary files.
set -u
export_binary=$1 checkpoint=$2 dir=$3
fail() { echo "FAILED: $*"; exit 1; }
rm -rf "$dir"
mkdir -p "$dir/model.safetensors"
output=$("$export_binary" --checkpoint "$checkpoint" --output "$dir" 2>&1)
status=$?
echo "$output"
[ "$status" -eq 1 ] || fail "exit status $status, expected 1"
echo "$output" | grep -q "model.safetensors" || fail "the message does not name model.safetensors"
leftovers=$(find "$dir" -name '*.tmp*')
[ -z "$leftovers" ] || fail "temporary files left behind: $leftovers"
exit 0

#!/usr/bin/env bash
# full_disk.sh TERNION_TRAIN CONFIG TRAIN_BIN OUT_DIR
# Checkpoints onto a full disk: a 2 MB tmpfs holds the first checkpoint but not the second.
# The failing save must give one clear error and a non-zero exit, and leave the first
# checkpoint as `latest`, loadable. Needs permission to mount a tmpfs (root); exits 77
# (skipped) where that is not allowed.
set -u
train=$1 config=$2 data=$3 out=$4
fail() { echo "FAILED: $*"; exit 1; }
mkdir -p "$out/fs"
umount "$out/fs" 2>/dev/null
mount -t tmpfs -o size=2m tmpfs "$out/fs" 2>/dev/null || { echo "skipped: cannot mount a tmpfs here"; exit 77; }
trap 'umount "$out/fs"' EXIT
common=(--config "$config" --set "data.train=$data" --set training.sample_tokens=0 --set optimizer.warmup_steps=0
        --set "checkpoint.save_dir=$out/fs/ckpt")
"$train" "${common[@]}" --set training.steps=1 > "$out/first.log" 2>&1 ||
  { cat "$out/first.log"; fail "the first checkpoint did not fit"; }
"$train" "${common[@]}" --set training.steps=50 --set checkpoint.save_interval=1 \
  --set checkpoint.load=latest > "$out/full.log" 2>&1
status=$?
cat "$out/full.log" | tail -3
[ "$status" -eq 1 ] || fail "exit status $status on a full disk, expected 1"
grep -qE "ternion-train: error: checkpoint of step [0-9]+ not saved: .*(No space left on device|cannot)" "$out/full.log" ||
  fail "no clear message for the full disk"
[ "$(grep -c 'terminate called\|Aborted' "$out/full.log")" -eq 0 ] || fail "crashed"
[ "$(cat "$out/fs/ckpt/latest")" = "step_0000001" ] || fail "latest moved after the failed save"
ls "$out/fs/ckpt" | grep -q '\.tmp$' && fail "the failed save left its temporary directory"
"$train" "${common[@]}" --set training.steps=50 --set checkpoint.load=latest --dry-run \
  > /dev/null 2>&1 || fail "the last good checkpoint no longer loads"
echo "a full disk failed the save cleanly and left step_0000001 loadable"

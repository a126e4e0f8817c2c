#!/usr/bin/env bash
# Fetches cudnn-frontend, NVIDIA's header-only C++ graph API over cuDNN (what Ternion's fused
# flash attention is built with), into .deps/cudnn-frontend/include. It is not a Debian
# package; PyPI's wheel of it carries the headers, so we take those from a pinned, hash-checked
# wheel. Idempotent: nothing is fetched when the pinned version is already there.
#   bash tools/fetch-cudnn-frontend.sh [destination]     (default: .deps/cudnn-frontend)
# Without it the CUDA build still works; attention then runs on the cuBLAS path.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.32.0
wheel=nvidia_cudnn_frontend-$version-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
dest=${1:-.deps/cudnn-frontend}

if [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$version" ]; then exit 0; fi
mkdir -p "$(dirname "$dest")"
work=$(mktemp -d "$(dirname "$dest")/.fetch.XXXXXX")  # beside $dest: the final mv is a rename
trap 'rm -rf "$work"' EXIT
echo "ternion: fetching cudnn-frontend $version (headers) from PyPI"
# The wheel for one fixed platform and Python, whatever this machine's are: only its headers
# are used, and they are the same in every wheel of the version.
python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
  --python-version 3.11 --implementation cp --abi cp311 -d "$work" \
  "nvidia-cudnn-frontend==$version"
echo "$sha256  $work/$wheel" | sha256sum --check --quiet
python3 - "$work/$wheel" "$work/unpacked" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    members = [m for m in wheel.namelist() if m.startswith("include/")]
    wheel.extractall(sys.argv[2], members)
PY
test -f "$work/unpacked/include/cudnn_frontend.h"
echo "$version" > "$work/unpacked/VERSION"
# Replace any older copy in one rename, so an interrupted fetch never leaves half a tree.
rm -rf "$dest.old"
[ -e "$dest" ] && mv "$dest" "$dest.old"
mv "$work/unpacked" "$dest"
rm -rf "$dest.old"

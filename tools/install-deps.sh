#!/usr/bin/env bash
# Installs Ternion's build dependencies (and matplotlib, for the plotting tools, and venv, for
# tools/python-with-tokenizers) from Debian packages. Idempotent: packages already present are
# not fetched again, so the quickstart and CI can call it every time. Packages given as
# arguments are installed too (tools/fuzz.sh adds clang's).
set -euo pipefail
packages=(cmake g++ make pkg-config libopenblas-openmp-dev libyaml-cpp-dev nlohmann-json3-dev zlib1g-dev
          libzstd-dev libpcre2-dev libgtest-dev libgmock-dev libopenmpi-dev openmpi-bin
          python3-matplotlib python3-venv "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# With a CUDA toolkit: cudnn-frontend's headers too (not a Debian package; see the script).
# Without them the CUDA build still works, with attention on the cuBLAS path, so a machine
# that cannot reach PyPI gets a warning, not a failure.
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  bash "$(dirname "$0")/fetch-cudnn-frontend.sh" ||
    echo "ternion: warning: could not fetch cudnn-frontend; CUDA attention will use cuBLAS only" >&2
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "ternion: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# tools/prepare-gpu-deps.sh: run HERE (Debian 12 bookworm, x86-64, network), before a GPU check.
#
# Downloads (never installs) the Debian packages the build needs that a GPU machine without
# package access lacks (OpenBLAS, yaml-cpp, nlohmann-json, PCRE2, Zstandard, zlib, GoogleTest,
# Open MPI and Open MPI's runtime libraries) into the ignored folder .gpu-deps/, copied to that
# machine beside the tree.
# scripts/gpu-check.sh unpacks them there with `dpkg -x` into a private prefix, never into /.
#
#   .gpu-deps/main/*.deb       always used: the build's libraries, headers and CMake configs
#   .gpu-deps/fallback/*.deb   base runtime libraries (libgfortran5, libgomp1, ...) that a CUDA
#                              image nearly always has: used only for a soname the machine lacks,
#                              so they never shadow the machine's own (newer) copies
#   .gpu-deps/cudnn-frontend   cudnn-frontend's headers (tools/fetch-cudnn-frontend.sh), for
#                              cuDNN's fused attention
#   .gpu-deps/MANIFEST         package, version, .deb size and sha256 of each
#
# No root needed (apt-get download writes to the current folder). Idempotent: a .deb already
# there is kept. Fails if the folder grows past the limit below (the working tree and carried
# folders must stay under 64 MiB together).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.gpu-deps
limit_mib=${TN_GPU_DEPS_LIMIT_MIB:-40}

# The build: headers, import libraries, CMake configs, and the libraries they point at.
main_packages=(
  libopenblas-openmp-dev libopenblas0-openmp   # cblas.h, libopenblas.so (the OpenMP build)
  libyaml-cpp-dev libyaml-cpp0.7
  nlohmann-json3-dev                           # header only (JSON of the flight records)
  libpcre2-dev libzstd-dev zlib1g-dev          # headers and static libraries (linked whole)
  libgtest-dev libgmock-dev                    # static libraries and CMake config (GTest)
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common
  # Open MPI's runtime closure (apt-cache depends --recurse libopenmpi3 openmpi-bin), less
  # what every image has (libc6, libstdc++6, ...; see fallback), less libhwloc-plugins (only a
  # recommendation: it drags in X11, libxml2 and OpenCL) and openssh-client (one node, no ssh).
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15 libpmix2 libmunge2
  libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1 libpsm2-2 libpsm-infinipath1
  libnl-3-200 libnl-route-3-200
)
# Base runtime libraries the packages above need; gpu-check.sh uses each only if the machine's
# ldconfig does not know its soname.
fallback_packages=(libgfortran5 libquadmath0 libgomp1 libnuma1 libudev1 libatomic1 libuuid1 zlib1g)

command -v apt-get >/dev/null || { echo "prepare-gpu-deps: needs apt-get (Debian 12)" >&2; exit 1; }
if [ "$(dpkg --print-architecture)" != amd64 ]; then
  echo "prepare-gpu-deps: this machine is $(dpkg --print-architecture); the GPU machine is amd64" >&2
  exit 1
fi
# shellcheck source=/dev/null
. /etc/os-release
[ "${VERSION_CODENAME:-}" = bookworm ] ||
  echo "prepare-gpu-deps: warning: written for Debian 12 bookworm, this is ${PRETTY_NAME:-unknown}" >&2

# Downloads into folder $1 each package of $2... that has no .deb there yet (any version: the
# MANIFEST records which), in one apt-get call.
download() {
  local folder=$1 p missing=()
  shift
  mkdir -p "$folder"
  for p in "$@"; do
    compgen -G "$folder/${p}_*.deb" >/dev/null || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  # The warning filtered out: apt's _apt user cannot write here, so apt downloads as us.
  (cd "$folder" || exit 1
   apt-get download -q "${missing[@]}" 2>&1 |
     grep -v -e '^Get:' -e 'Download is performed unsandboxed') || true
  for p in "${missing[@]}"; do
    compgen -G "$folder/${p}_*.deb" >/dev/null ||
      { echo "prepare-gpu-deps: downloading $p failed (apt-get update first?)" >&2; exit 1; }
  done
}
download "$dest/main" "${main_packages[@]}"
download "$dest/fallback" "${fallback_packages[@]}"
# cudnn-frontend's headers (cuDNN's fused attention; not a Debian package, see the script).
bash tools/fetch-cudnn-frontend.sh "$dest/cudnn-frontend"

{
  echo "# .gpu-deps: Debian 12 packages for scripts/gpu-check.sh, from tools/prepare-gpu-deps.sh"
  echo "# folder  package  version  deb-bytes  sha256"
  for f in "$dest"/main/*.deb "$dest"/fallback/*.deb; do
    printf '%s  %s  %s  %s  %s\n' "$(basename "$(dirname "$f")")" \
      "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)" "$(stat -c %s "$f")" \
      "$(sha256sum "$f" | cut -d' ' -f1)"
  done
} > "$dest/MANIFEST"

total_kib=$(du -sk "$dest" | cut -f1)
count=$(find "$dest" -name '*.deb' | wc -l)
echo "prepare-gpu-deps: $count packages, $((total_kib / 1024)) MiB in $dest (list: $dest/MANIFEST)"
if [ "$total_kib" -gt $((limit_mib * 1024)) ]; then
  echo "prepare-gpu-deps: $dest is over ${limit_mib} MiB: it would not travel with the tree" >&2
  exit 1
fi

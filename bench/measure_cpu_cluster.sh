#!/usr/bin/env bash
# This machine's CPU ranks as a ternion-plan cluster description, measured now: a rank's sgemm
# at one thread (bench_gemm --cpu, 2048^3 f32), the streaming triad (bench_kernels --threads
# 2, halved: what each of two ranks gets while both stream), and MPI's all-reduce between 2
# ranks of one thread (bench_allreduce: the best bus
# bandwidth of 1-16 MiB; the latency from the 1 KiB all-reduce, a ring's two steps).
#   bash bench/measure_cpu_cluster.sh [BUILD_DIR] [local|emulated-2x1] > cluster.yaml
# local: one node of two ranks, a core each (configs/clusters/cpu-local.yaml); emulated-2x1:
# two nodes of one rank joined at 1 Gbit/s by tools/emulated-cluster (emulated-2x1.yaml).
# overlap_cost is not measured here: 0.76 is what bench/grad_overlap.sh measured (what a
# reduction hidden behind the backward still takes from a CPU rank's compute).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
kind=${2:-local}
[ "$(id -u)" -ne 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
tflops=$("$build/bench/bench_gemm" --cpu | awk '$1 == "square" && $2 == "2048^3" && $3 == "f32" {
  printf "%.4f", 2 * $4 * $5 * $6 / ($7 * 1e-3) / 1e12 }')
triad=$("$build/bench/bench_kernels" --threads 2 | awk '/^triad/ { printf "%.1f", $(NF - 1) / 2 }')
read -r busbw latency <<< "$(mpirun --oversubscribe -np 2 "$build/bench/bench_allreduce" | awk '
  $1 == 1024 { latency = $4 / 2 }
  $1 >= 1048576 && $1 <= 16777216 && $6 > best { best = $6 }
  END { printf "%.2f %.0f", best, latency }')"
[ -n "$tflops" ] && [ -n "$triad" ] && [ -n "$busbw" ] ||
  { echo "measure_cpu_cluster.sh: a benchmark printed nothing to read" >&2; exit 1; }
gpu="{name: CPU core (OpenBLAS), peak_tflops: $tflops, fp32_peak_tflops: $tflops, memory_gb: 11,
        memory_bandwidth_gb_s: $triad, gemm_efficiency: 1.0, overlap_cost: 0.76}"
echo "# Measured by bench/measure_cpu_cluster.sh on $(date -u +%Y-%m-%d): $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
case $kind in
  local) printf 'cluster:\n  nodes: 1\n  gpus_per_node: 2\n  gpu: %s\n  intra_node: {bandwidth_gb_s: %s, latency_us: %s}\n' \
           "$gpu" "$busbw" "$latency" ;;
  emulated-2x1) printf 'cluster:\n  nodes: 2\n  gpus_per_node: 1\n  gpu: %s\n  inter_node: {bandwidth_gb_s: 0.125, latency_us: 100}\n' \
                  "$gpu" ;;
  *) echo "measure_cpu_cluster.sh: the kind is local or emulated-2x1, got '$kind'" >&2; exit 2 ;;
esac

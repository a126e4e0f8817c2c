// All-reduce throughput of the MPI communicator (f32 sum, in place), as nccl-tests report it,
// against this machine's memcpy bandwidth measured in the same run.
//
//   mpirun --oversubscribe -np N bench_allreduce [--min-bytes 1024] [--max-bytes 67108864]
//
// For each size (powers of 4 bytes): one all-reduce whose result is checked, warm-up runs,
// then timed runs (fewer for large sizes). Printed per size: the time of one all-reduce (the
// slowest rank's mean), algbw = bytes / time and busbw = algbw * 2(n-1)/n, the traffic a ring
// all-reduce puts through each rank's link, comparable across rank counts and with the
// memcpy bandwidth. The `mpi(us)` column is plain blocking MPI_Allreduce on the same buffer,
// run while the communicator's progress thread is idle: the difference is what the
// asynchronous path (queue, progress thread, wake-up) costs.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "framework/error.h"
#include "parallel/comm/mpi_runtime.h"

using namespace ternion;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Bytes copied per second by one 64 MiB memcpy, best of several (page faults excluded).
double memcpy_bandwidth() {
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  std::vector<char> src(kBytes, 1), dst(kBytes, 0);
  double best = 1e30;
  for (int i = 0; i < 7; ++i) {
    const auto start = Clock::now();
    std::memcpy(dst.data(), src.data(), kBytes);
    best = std::min(best, seconds_since(start));
    src[static_cast<std::size_t>(i)] =
        dst[kBytes - 1 - static_cast<std::size_t>(i)];  // keep both live
  }
  return static_cast<double>(kBytes) / best;
}

float slowest(Communicator& world, float value) {
  Tensor t = Tensor::full({1}, value);
  world.all_reduce(t, ReduceOp::Max);
  return t.data<float>()[0];
}

struct Options {
  std::int64_t min_bytes = 1024;
  std::int64_t max_bytes = std::int64_t{64} << 20;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    TN_CHECK_AS(UsageError, i + 1 < argc && (arg == "--min-bytes" || arg == "--max-bytes"),
                "usage: bench_allreduce [--min-bytes B] [--max-bytes B]");
    (arg == "--min-bytes" ? options.min_bytes : options.max_bytes) = std::atoll(argv[++i]);
  }
  TN_CHECK_AS(UsageError, options.min_bytes >= 4 && options.max_bytes >= options.min_bytes,
              "--min-bytes must be >= 4 and <= --max-bytes");
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    MpiRuntime mpi(&argc, &argv);
    const Options options = parse(argc, argv);
    auto world = mpi_world_communicator();
    const int n = world->size(), rank = world->rank();

    double memcpy_bytes_per_s = 0;
    world->barrier();
    if (rank == 0) memcpy_bytes_per_s = memcpy_bandwidth();
    world->barrier();
    if (rank == 0) {
      std::printf("# bench_allreduce: %d ranks, f32 sum in place, MPI backend (progress thread)\n",
                  n);
      std::printf("# memcpy 64 MiB on rank 0: %.2f GB/s (bytes copied per second, best of 7)\n",
                  memcpy_bytes_per_s / 1e9);
      std::printf("# %10s %10s %6s %10s %12s %12s %10s\n", "bytes", "elements", "iters", "time(us)",
                  "algbw(GB/s)", "busbw(GB/s)", "mpi(us)");
    }

    for (std::int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 4) {
      const std::int64_t elements = bytes / 4;
      Tensor t = Tensor::full({elements}, static_cast<float>(rank + 1));
      world->all_reduce(t, ReduceOp::Sum);
      const float want = static_cast<float>(n * (n + 1) / 2);
      const float* values = t.data<float>();
      const bool ok = std::all_of(values, values + elements, [&](float v) { return v == want; });
      TN_CHECK(ok, "all_reduce of ", bytes, " bytes gave a wrong sum on rank ", rank);

      // Zeros from here on: repeated in-place sums of anything else would overflow.
      t.zero();
      const int iters =
          static_cast<int>(std::clamp<std::int64_t>((std::int64_t{256} << 20) / bytes, 5, 200));
      const int warmup = std::max(2, iters / 10);
      for (int i = 0; i < warmup; ++i) world->all_reduce(t, ReduceOp::Sum);
      world->barrier();
      auto start = Clock::now();
      for (int i = 0; i < iters; ++i) world->all_reduce(t, ReduceOp::Sum);
      const float time_s = slowest(*world, static_cast<float>(seconds_since(start) / iters));

      // The baseline: this thread calls MPI itself while the progress thread has nothing to do.
      for (int i = 0; i < warmup; ++i)
        MPI_Allreduce(MPI_IN_PLACE, t.raw_data(), static_cast<int>(elements), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      world->barrier();
      start = Clock::now();
      for (int i = 0; i < iters; ++i)
        MPI_Allreduce(MPI_IN_PLACE, t.raw_data(), static_cast<int>(elements), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      const float mpi_time_s = slowest(*world, static_cast<float>(seconds_since(start) / iters));

      if (rank == 0) {
        const double algbw = static_cast<double>(bytes) / time_s;
        const double busbw = algbw * 2.0 * (n - 1) / n;
        std::printf("  %10lld %10lld %6d %10.1f %12.3f %12.3f %10.1f\n",
                    static_cast<long long>(bytes), static_cast<long long>(elements), iters,
                    time_s * 1e6, algbw / 1e9, busbw / 1e9, mpi_time_s * 1e6);
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
    return 1;
  }
}

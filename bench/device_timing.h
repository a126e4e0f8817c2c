// Timing a device call from the host, for the GPU benchmarks (bench_gemm, bench_linear).
//
// median_seconds_per_call: two warm-up calls, one timed call to size the batches, then the
// median of 5 batches of back-to-back calls (each at least min_batch_s long, 3 to 2000 calls),
// each batch timed with steady_clock around the calls plus one device synchronisation. Launch
// overhead is included, as a training step pays it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <vector>

#include "framework/device.h"
#include "framework/device_runtime.h"

namespace ternion::bench {

inline double median_seconds_per_call(Device device, double min_batch_s,
                                      const std::function<void()>& call) {
  using Clock = std::chrono::steady_clock;
  call();
  call();
  device_synchronize(device);
  auto start = Clock::now();
  call();
  device_synchronize(device);
  const double once = std::chrono::duration<double>(Clock::now() - start).count();
  const int calls = static_cast<int>(std::clamp(std::ceil(min_batch_s / once), 3.0, 2000.0));
  std::vector<double> per_call;
  for (int batch = 0; batch < 5; ++batch) {
    start = Clock::now();
    for (int i = 0; i < calls; ++i) call();
    device_synchronize(device);
    per_call.push_back(std::chrono::duration<double>(Clock::now() - start).count() / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[2];
}

}  // namespace ternion::bench

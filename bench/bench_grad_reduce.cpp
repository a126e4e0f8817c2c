// The data-parallel reduction of one gradient bucket over the whole job, flat against
// hierarchical, f32 against bf16 on the wire (parallel/bucket_reduction.h), PowerSGD of rank 4
// on GPT-2 MLP-shaped matrices of the same size (parallel/powersgd_reduction.h), and, on an
// emulated cluster, the bytes that crossed the inter-node links, read from the nodes' network
// interfaces, against what a ring all-reduce sends.
//
//   tools/emulated-cluster --nodes 2 --ranks-per-node 4 --link-gbit 1 --
//     build/bench/bench_grad_reduce [--mb 25,100] [--bucket-mb 25] [--iters 3]   (one line)
//
// Per size and strategy: the time of one all-reduce (the slowest rank's mean over --iters,
// after one checked warm-up), issued as the reducer issues it: in buckets of --bucket-mb
// (default: one bucket), all started before any is waited for, so that a hierarchical
// reduction's stages of one bucket overlap those of the next; and the bytes sent over all
// nodes' links per all-reduce. The formulas, for N nodes of L ranks (D = N L) and S bytes: a
// flat ring over D ranks crosses nodes at N of its edges, each carrying 2 (D-1)/D S;
// hierarchically, L rings of N ranks (one per place in the node) each all-reduce S/L:
// 2 (N-1) S in all. Measured bytes include
// the TCP/IP headers and acknowledgements (a few percent). Where every rank is on one node,
// no link is read.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "framework/error.h"
#include "parallel/bucket_reduction.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/powersgd_reduction.h"
#include "parallel/process_groups.h"

using namespace ternion;
using Clock = std::chrono::steady_clock;

namespace {

// Bytes this node's network interfaces (all but loopback) have sent.
double node_tx_bytes() {
  double total = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net")) {
    if (entry.path().filename() == "lo") continue;
    std::ifstream in(entry.path() / "statistics" / "tx_bytes");
    double bytes = 0;
    if (in >> bytes) total += bytes;
  }
  return total;
}

double sum_over(Communicator& world, double value) {
  // Two floats carry a double's worth: high and low parts.
  Tensor t = Tensor::empty({2});
  t.data<float>()[0] = static_cast<float>(value);
  t.data<float>()[1] = static_cast<float>(value - static_cast<double>(static_cast<float>(value)));
  world.all_reduce(t, ReduceOp::Sum);
  return static_cast<double>(t.data<float>()[0]) + static_cast<double>(t.data<float>()[1]);
}

double slowest(Communicator& world, double value) {
  Tensor t = Tensor::full({1}, static_cast<float>(value));
  world.all_reduce(t, ReduceOp::Max);
  return t.data<float>()[0];
}

struct Timing {
  double seconds = 0;     // per run, the slowest rank's
  double link_bytes = 0;  // per run, sent over all nodes' links
};

// `iters` runs of `run`, timed, and the bytes the nodes' links sent meanwhile (read by each
// node's first rank where `reads_link`).
template <class Run>
Timing time_runs(Communicator& world, int iters, bool reads_link, Run&& run) {
  world.barrier();
  const double tx_before = reads_link ? node_tx_bytes() : 0;
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) run();
  Timing timing;
  timing.seconds =
      slowest(world, std::chrono::duration<double>(Clock::now() - start).count() / iters);
  world.barrier();
  timing.link_bytes = sum_over(world, reads_link ? node_tx_bytes() - tx_before : 0) / iters;
  return timing;
}

struct Options {
  std::vector<double> mb = {25, 100};
  double bucket_mb = 0;  // 0: one bucket
  int iters = 3;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    TN_CHECK_AS(UsageError,
                i + 1 < argc && (arg == "--mb" || arg == "--iters" || arg == "--bucket-mb"),
                "usage: bench_grad_reduce [--mb 25,100] [--bucket-mb MB] [--iters 3]");
    const std::string value = argv[++i];
    if (arg == "--bucket-mb") {
      options.bucket_mb = std::atof(value.c_str());
      TN_CHECK_AS(UsageError, options.bucket_mb > 0, "--bucket-mb must be above 0, got '", value,
                  "'");
      continue;
    }
    if (arg == "--iters") {
      options.iters = std::atoi(value.c_str());
      TN_CHECK_AS(UsageError, options.iters >= 1, "--iters must be at least 1, got '", value, "'");
      continue;
    }
    options.mb.clear();
    std::stringstream list(value);
    for (std::string item; std::getline(list, item, ',');) {
      const double mb = std::atof(item.c_str());
      TN_CHECK_AS(UsageError, mb > 0, "--mb takes sizes in MB above 0, got '", item, "'");
      options.mb.push_back(mb);
    }
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    MpiRuntime mpi(&argc, &argv);
    const Options options = parse(argc, argv);
    auto world = mpi_world_communicator();
    const int d = world->size(), rank = world->rank();
    const ProcessGroups groups(*world, make_rank_layout(d, 1, 1, d));
    const std::set<int> node_ids(groups.node_of_rank().begin(), groups.node_of_rank().end());
    const int nodes = static_cast<int>(node_ids.size()), per_node = d / nodes;
    const bool links = nodes > 1;
    const bool reads_link = links && groups.node_local().rank() == 0;
    if (rank == 0) {
      std::printf("# bench_grad_reduce: %d ranks on %d node%s, f32 gradients, %d timed runs each, "
                  "buckets of %s\n", d, nodes, nodes > 1 ? "s" : "", options.iters,
                  options.bucket_mb > 0 ? (std::to_string(options.bucket_mb) + " MB").c_str()
                                        : "the whole size");
      std::printf("# %-34s %8s %10s %14s %14s %7s\n", "reduction", "MB", "time(ms)",
                  "inter-node MB", "ring formula", "ratio");
    }
    std::vector<int> members;
    for (int r = 0; r < d; ++r) members.push_back(r);
    for (GradReduceMode mode : {GradReduceMode::Flat, GradReduceMode::Hierarchical})
      for (WireType wire : {WireType::F32, WireType::BF16}) {
        const GradReducePlan plan = plan_grad_reduce(mode, members, groups.node_of_rank(), rank);
        if (mode == GradReduceMode::Hierarchical && !plan.hierarchical) {
          if (rank == 0 && wire == WireType::F32) std::printf("# %s\n", plan.why.c_str());
          continue;
        }
        StagedReduction reduction(*world, plan, wire);
        const std::string name = std::string(plan.hierarchical ? "hierarchical" : "flat") +
                                 (wire == WireType::BF16 ? ", bf16 wire" : ", f32 wire");
        for (double mb : options.mb) {
          const std::int64_t elements = (static_cast<std::int64_t>(mb * 1e6 / 4) + d - 1) / d * d;
          const double bytes = 4.0 * static_cast<double>(elements);
          Tensor t = Tensor::full({elements}, static_cast<float>(rank + 1));
          const std::int64_t bucket =
              options.bucket_mb > 0
                  ? std::max<std::int64_t>(
                        d, static_cast<std::int64_t>(options.bucket_mb * 1e6 / 4) / d * d)
                  : elements;
          const auto all_reduce = [&] {
            std::vector<WorkHandle> works;
            std::vector<Tensor> slices;
            for (std::int64_t at = 0; at < elements; at += bucket) {
              slices.push_back(t.slice(0, at, std::min(bucket, elements - at)));
              works.push_back(reduction.all_reduce(works.size(), slices.back()));
            }
            for (WorkHandle& w : works) w->wait();
          };
          all_reduce();
          const float want = static_cast<float>(d * (d + 1) / 2);
          const float* v = t.data<float>();
          TN_CHECK(std::all_of(v, v + elements, [&](float x) { return x == want; }),
                   name, ": a wrong sum on rank ", rank);
          const Timing timing = time_runs(*world, options.iters, reads_link, all_reduce);
          const double time_s = timing.seconds, sent = timing.link_bytes;
          if (rank != 0) continue;
          const double ring = !links ? 0
                              : plan.hierarchical ? 2.0 * (nodes - 1) * bytes
                                                  : nodes * 2.0 * (d - 1) / d * bytes;
          if (links && wire == WireType::F32) {
            std::printf("  %-34s %8.1f %10.1f %14.1f %14.1f %7.3f\n", name.c_str(), bytes / 1e6,
                        time_s * 1e3, sent / 1e6, ring / 1e6, sent / ring);
          } else if (links) {
            std::printf("  %-34s %8.1f %10.1f %14.1f %14s %7s\n", name.c_str(), bytes / 1e6,
                        time_s * 1e3, sent / 1e6, "-", "-");
          } else {
            std::printf("  %-34s %8.1f %10.1f %14s %14s %7s\n", name.c_str(), bytes / 1e6,
                        time_s * 1e3, "-", "-", "-");
          }
        }
      }
    // PowerSGD of rank 4 on the same sizes, made of GPT-2 MLP-shaped matrices (768 x 3072).
    for (double mb : options.mb) {
      constexpr std::int64_t kRows = 768, kCols = 3072;
      const std::int64_t matrices =
          std::max<std::int64_t>(1, static_cast<std::int64_t>(mb * 1e6 / 4) / (kRows * kCols));
      const std::int64_t elements = (matrices * kRows * kCols + d - 1) / d * d;
      std::vector<BucketMember> members;
      for (std::int64_t i = 0; i < matrices; ++i)
        members.push_back({"w" + std::to_string(i), {kRows, kCols}, i * kRows * kCols});
      PowerSgdReduction reduction(*world, 4, 1);
      reduction.plan({members});
      Tensor t = Tensor::full({elements}, static_cast<float>(rank + 1));
      reduction.all_reduce(0, t)->wait();
      const Timing timing = time_runs(*world, options.iters, reads_link,
                                      [&] { reduction.all_reduce(0, t)->wait(); });
      const double time_s = timing.seconds, sent = timing.link_bytes;
      if (rank == 0)
        std::printf("  %-34s %8.1f %10.1f %14s %14s %7s   (%.0fx fewer elements)\n",
                    "PowerSGD rank 4, f32 factors", 4.0 * static_cast<double>(elements) / 1e6,
                    time_s * 1e3, links ? std::to_string(sent / 1e6).c_str() : "-", "-", "-",
                    static_cast<double>(reduction.bucket_elements()) /
                        static_cast<double>(reduction.wire_elements()));
    }
    if (rank == 0) std::printf("# %d nodes of %d ranks\n", nodes, per_node);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_grad_reduce: %s\n", e.what());
    return 1;
  }
}

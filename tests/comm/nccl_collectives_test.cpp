// The NCCL backend's collectives across ranks, one GPU per rank, each result checked against
// what every rank computes from all ranks' (regenerated) inputs, as the MPI tests beside it
// do: all_reduce for every op and every dtype NCCL reduces here (f32, bf16, f16, i32), so a
// wrong operation or element type fails; reduce_scatter with even and uneven chunks; all_gather;
// broadcast from every root; a ring of sends and receives; a split.
//
// With one rank every collective is the identity (tests/gpu/nccl_test.cpp covers that
// plumbing), and NCCL refuses two ranks of one communicator on one GPU, so these run where
// mpirun starts at least two ranks and each rank's node has a GPU per rank
// (`ctest -R 'comm.np[248]'` on a machine with 2, 4 or 8 GPUs); elsewhere they are skipped
// with the reason, decided the same on every rank. The same checks also run on the MPI
// backend with CPU tensors (its own dtypes), so that the checks themselves are exercised in
// every build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "comm_test_util.h"
#include "framework/bfloat16.h"
#include "framework/device_runtime.h"
#include "framework/features.h"
#include "framework/float16.h"
#include "parallel/comm/mpi_runtime.h"

#if TN_HAVE_CUDA
#include "parallel/comm/cuda/nccl_communicator.h"
#endif

namespace ternion {
namespace {

using test::close_to;
using test::test_sizes;

// Whether this process can run the multi-rank NCCL tests: why not ("" when it can), and
// the GPU it is then bound to (its node-local rank's). Collective over the MPI world, so that
// every rank skips or none does.
struct NcclSetup {
  std::string why_not;
  Device device = Device::cpu();
};

NcclSetup multi_rank_nccl_setup() {
  auto world = mpi_world_communicator();
  auto node = world->split_node_local("node");
  NcclSetup setup;
  std::string& reason = setup.why_not;
  if (!TN_HAVE_CUDA) {
    reason = "built without CUDA";
  } else if (world->size() < 2) {
    reason = "one rank (tests/gpu/nccl_test.cpp checks NCCL on one rank)";
  } else if (cuda_device_count() < node->size()) {
    reason = std::to_string(node->size()) + " ranks on this node, " +
             std::to_string(cuda_device_count()) + " CUDA devices: NCCL needs a GPU per rank";
    if (cuda_device_count() == 0) reason += " (" + cuda_unavailable_reason() + ")";
  }
  Tensor any = test::tensor_of<std::int32_t>({reason.empty() ? 0 : 1});
  world->all_reduce(any, ReduceOp::Max);
  if (any.data<std::int32_t>()[0] != 0 && reason.empty()) reason = "another rank cannot";
  if (reason.empty()) setup.device = init_cuda_device(node->rank());
  return setup;
}

// An f16 whose value is exactly `v` (the small integers and halves used here).
std::uint16_t exact_f16(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  if (v == 0.0f) return sign;
  const int exponent = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  EXPECT_TRUE(exponent > 0 && exponent < 31 && (bits & 0x1fffu) == 0) << v << " is not an f16";
  return static_cast<std::uint16_t>(sign | (exponent << 10) | ((bits >> 13) & 0x3ffu));
}

// `values` as a tensor of `dtype` on `device` (each value exact in it).
Tensor device_tensor(const std::vector<float>& values, DType dtype, Device device) {
  Tensor host = Tensor::empty({static_cast<std::int64_t>(values.size())}, dtype);
  for (std::size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::F32: host.data<float>()[i] = values[i]; break;
      case DType::BF16: host.data<BFloat16>()[i] = float_to_bf16(values[i]); break;
      case DType::F16:
        static_cast<std::uint16_t*>(host.raw_data())[i] = exact_f16(values[i]);
        break;
      case DType::I32: host.data<std::int32_t>()[i] = static_cast<std::int32_t>(values[i]); break;
      case DType::U16: ADD_FAILURE() << "no reduction of u16 here"; break;
    }
  }
  return host.to(device);
}

std::vector<float> host_values(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  std::vector<float> out(static_cast<std::size_t>(host.numel()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    switch (host.dtype()) {
      case DType::F32: out[i] = host.data<float>()[i]; break;
      case DType::BF16: out[i] = bf16_to_float(host.data<BFloat16>()[i]); break;
      case DType::F16:
        out[i] = f16_to_float(static_cast<const std::uint16_t*>(host.raw_data())[i]);
        break;
      case DType::I32: out[i] = static_cast<float>(host.data<std::int32_t>()[i]); break;
      case DType::U16: break;
    }
  }
  return out;
}

// Rank `rank`'s input: integers in [-16, 16), so that sums over 8 ranks are exact in bf16 and
// f16 at every partial sum, whatever order NCCL combines them in; [0, 32) for i32, whose
// average NCCL computes as the sum divided (tested on sums that are not negative).
std::vector<float> rank_input(std::int64_t n, int rank, std::uint64_t seed,
                              DType dtype = DType::F32) {
  const std::int32_t lo = dtype == DType::I32 ? 0 : -16;
  return test::convert<float>(test::random_ints(
      static_cast<std::size_t>(n), seed * 131 + static_cast<std::uint64_t>(rank), lo, lo + 32));
}

// The reduction of every rank's input, in double.
std::vector<double> reduced(std::int64_t n, int size, ReduceOp op, DType dtype,
                            std::uint64_t seed) {
  std::vector<double> acc(static_cast<std::size_t>(n),
                          op == ReduceOp::Max ? -std::numeric_limits<double>::infinity() : 0.0);
  for (int r = 0; r < size; ++r) {
    const std::vector<float> input = rank_input(n, r, seed, dtype);
    for (std::size_t i = 0; i < acc.size(); ++i)
      acc[i] = op == ReduceOp::Max ? std::max(acc[i], double{input[i]}) : acc[i] + input[i];
  }
  if (op == ReduceOp::Average)
    for (double& v : acc) v = dtype == DType::I32 ? std::floor(v / size) : v / size;
  return acc;
}

// Sums and maxima are exact; an average is the exact one rounded once to the element type
// (NCCL may scale before summing, so allow that rounding, never more).
double average_rtol(DType dtype) {
  switch (dtype) {
    case DType::BF16: return 1.0 / 128;
    case DType::F16: return 1.0 / 1024;
    case DType::F32: return 1e-6;
    default: return 0;
  }
}

std::string label(const std::string& what, ReduceOp op, DType dtype, std::int64_t n, int rank) {
  return what + " " + test::op_label(op) + " " + std::string(dtype_name(dtype)) +
         " n=" + std::to_string(n) + " on rank " + std::to_string(rank);
}

// What one backend is checked with: its communicator, the device of its tensors and the
// element types it reduces.
struct Backend {
  Communicator& comm;
  Device device;
  std::vector<DType> reduce_dtypes;
};

void check_all_reduce(const Backend& b) {
  Communicator& comm = b.comm;
  std::uint64_t seed = 1;
  for (DType dtype : b.reduce_dtypes) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max}) {
      for (std::int64_t n : test_sizes(comm.size())) {
        Tensor t = device_tensor(rank_input(n, comm.rank(), seed, dtype), dtype, b.device);
        comm.all_reduce(t, op);
        const double rtol = op == ReduceOp::Average ? average_rtol(dtype) : 0;
        EXPECT_TRUE(close_to(label("all_reduce", op, dtype, n, comm.rank()), host_values(t),
                             reduced(n, comm.size(), op, dtype, seed), 0, rtol));
      }
      ++seed;
    }
  }
}

void check_reduce_scatter(const Backend& b) {
  Communicator& comm = b.comm;
  const int size = comm.size(), rank = comm.rank();
  std::uint64_t seed = 20;
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max}) {
      for (std::int64_t n : test_sizes(size)) {  // 5 * size + 3 does not divide
        const ChunkRange chunk = chunk_range(n, size, rank);
        const Tensor in = device_tensor(rank_input(n, rank, seed), dtype, b.device);
        Tensor out = Tensor::zeros({chunk.size()}, dtype, b.device);
        comm.reduce_scatter(out, in, op);
        const std::vector<double> all = reduced(n, size, op, dtype, seed);
        const std::vector<double> want(all.begin() + chunk.begin, all.begin() + chunk.end);
        const double rtol = op == ReduceOp::Average ? average_rtol(dtype) : 0;
        EXPECT_TRUE(close_to(label("reduce_scatter", op, dtype, n, rank), host_values(out), want,
                             0, rtol));
      }
      ++seed;
    }
  }
}

void check_all_gather(const Backend& b) {
  Communicator& comm = b.comm;
  const int size = comm.size();
  for (DType dtype : {DType::F32, DType::BF16, DType::I32}) {
    for (std::int64_t n : test_sizes(size)) {
      const Tensor in = device_tensor(rank_input(n, comm.rank(), 40, dtype), dtype, b.device);
      Tensor out = Tensor::zeros({n * size}, dtype, b.device);
      comm.all_gather(out, in);
      std::vector<double> want;
      for (int r = 0; r < size; ++r)
        for (float v : rank_input(n, r, 40, dtype)) want.push_back(v);
      EXPECT_TRUE(close_to("all_gather " + std::string(dtype_name(dtype)) + " n=" +
                               std::to_string(n) + " on rank " + std::to_string(comm.rank()),
                           host_values(out), want, 0, 0));
    }
  }
}

void check_broadcast(const Backend& b) {
  Communicator& comm = b.comm;
  for (int root = 0; root < comm.size(); ++root) {
    Tensor t = device_tensor(rank_input(1000, comm.rank(), 50), DType::BF16, b.device);
    comm.broadcast(t, root);
    EXPECT_TRUE(close_to("broadcast from " + std::to_string(root) + " on rank " +
                             std::to_string(comm.rank()),
                         host_values(t), rank_input(1000, root, 50), 0, 0));
  }
}

// Each rank sends to the next and receives from the previous in one exchange, then the same
// with a send and a receive of their own (NCCL posts the deferred send with the receive).
void check_ring(const Backend& b) {
  Communicator& comm = b.comm;
  const int size = comm.size(), rank = comm.rank();
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  const std::vector<float> from_previous = rank_input(4099, previous, 60);
  const Tensor mine = device_tensor(rank_input(4099, rank, 60), DType::F32, b.device);
  Tensor received = Tensor::zeros({4099}, DType::F32, b.device);
  comm.exchange({{P2POp::Kind::Send, mine, next, 0}, {P2POp::Kind::Recv, received, previous, 0}});
  EXPECT_TRUE(close_to("exchange on rank " + std::to_string(rank), host_values(received),
                       from_previous, 0, 0));

  Tensor again = Tensor::zeros({4099}, DType::F32, b.device);
  WorkHandle sent = comm.send_async(mine, next, 1);
  comm.recv(again, previous, 1);
  sent->wait();
  EXPECT_TRUE(close_to("send/recv on rank " + std::to_string(rank), host_values(again),
                       from_previous, 0, 0));
}

void check_split(const Backend& b) {
  Communicator& comm = b.comm;
  const int color = comm.rank() % 2;
  std::unique_ptr<Communicator> half = comm.split(color, comm.rank(), "parity");
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->backend_name(), comm.backend_name());
  EXPECT_EQ(half->size(), (comm.size() + 1 - color) / 2);
  Tensor t = Tensor::full({3}, static_cast<float>(comm.rank())).to(b.device);
  half->all_reduce(t, ReduceOp::Sum);
  double want = 0;
  for (int r = color; r < comm.size(); r += 2) want += r;
  EXPECT_TRUE(close_to("parity sum on rank " + std::to_string(comm.rank()), host_values(t),
                       std::vector<double>(3, want), 0, 0));
}

// Runs `check` on this rank. A rank that stops early (a fatal failure, an exception) would
// leave the others waiting in its next collective, so it ends the job instead, saying why.
void run_check(const Backend& b, void (*check)(const Backend&)) {
  std::string stopped;
  try {
    check(b);
  } catch (const std::exception& e) {
    stopped = std::string("threw: ") + e.what();
  }
  if (stopped.empty() && ::testing::Test::HasFatalFailure()) stopped = "a fatal failure (above)";
  if (!stopped.empty())
    abort_job(std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
              " stopped early on rank " + std::to_string(b.comm.rank()) + ": " + stopped);
}

// The MPI backend, CPU tensors: f16 is not among its reductions.
#define TN_ON_MPI(check)                                                             \
  std::unique_ptr<Communicator> world_ = mpi_world_communicator();                   \
  run_check(Backend{*world_, Device::cpu(), {DType::F32, DType::BF16, DType::I32}}, check)

TEST(CollectiveChecksOnMpi, AllReduce) { TN_ON_MPI(check_all_reduce); }
TEST(CollectiveChecksOnMpi, ReduceScatter) { TN_ON_MPI(check_reduce_scatter); }
TEST(CollectiveChecksOnMpi, AllGather) { TN_ON_MPI(check_all_gather); }
TEST(CollectiveChecksOnMpi, Broadcast) { TN_ON_MPI(check_broadcast); }
TEST(CollectiveChecksOnMpi, Ring) { TN_ON_MPI(check_ring); }
TEST(CollectiveChecksOnMpi, Split) { TN_ON_MPI(check_split); }
// The f16 inputs NCCL is given, which MPI cannot check: every value used, and its halves.
TEST(CollectiveChecksOnMpi, F16InputsAreExact) {
  for (float v = -128.0f; v <= 128.0f; v += 0.125f)
    ASSERT_EQ(f16_to_float(exact_f16(v)), v);
}

#if TN_HAVE_CUDA

// NCCL over the MPI world, on this rank's GPU; skipped (on every rank) where it cannot run.
#define TN_ON_NCCL_OR_SKIP(check)                                                      \
  std::unique_ptr<Communicator> world_ = mpi_world_communicator();                     \
  const NcclSetup setup_ = multi_rank_nccl_setup();                                    \
  if (!setup_.why_not.empty()) GTEST_SKIP() << setup_.why_not;                         \
  const std::unique_ptr<Communicator> nccl_ = NcclCommunicator::create(*world_, "nccl-test"); \
  run_check(Backend{*nccl_, setup_.device, {DType::F32, DType::BF16, DType::F16, DType::I32}}, \
            check)

TEST(NcclRanks, AllReduceEveryOpAndDtype) { TN_ON_NCCL_OR_SKIP(check_all_reduce); }
TEST(NcclRanks, ReduceScatterEvenAndUnevenChunks) { TN_ON_NCCL_OR_SKIP(check_reduce_scatter); }
TEST(NcclRanks, AllGatherInRankOrder) { TN_ON_NCCL_OR_SKIP(check_all_gather); }
TEST(NcclRanks, BroadcastFromEveryRoot) { TN_ON_NCCL_OR_SKIP(check_broadcast); }
TEST(NcclRanks, ARingOfSendsAndReceives) { TN_ON_NCCL_OR_SKIP(check_ring); }
TEST(NcclRanks, SplitReducesWithinEachColor) { TN_ON_NCCL_OR_SKIP(check_split); }

#else

TEST(NcclRanks, NeedsACudaBuild) {
  const NcclSetup setup = multi_rank_nccl_setup();  // collective: every rank calls it
  GTEST_SKIP() << setup.why_not;
}

#endif

}  // namespace
}  // namespace ternion

// The NCCL communicator on one rank (bootstrapped over an MPI world of one: the test process
// initialises MPI itself as a singleton), and the MPI backend's host staging of CUDA tensors.
// With one rank every collective's result is known exactly (sum, average and max of one input
// are the input; a gather is a copy), so these check the plumbing: streams, events, buffers,
// dtypes, in-place forms, groups of sends and receives to itself, splits, the CPU-tensor
// refusal, and the failure path that aborts the communicator. The reductions across ranks are
// checked by tests/comm/nccl_collectives_test.cpp, on a GPU per rank.
//
// Work::wait() does not block the host. What one rank can still check deterministically: a
// gate (a host function on the compute stream that waits for a flag) holds every NCCL
// operation enqueued after it (each first waits for the compute stream), so while it is shut an
// operation cannot have finished: wait() must return, is_completed() must say no, a dropped
// Work's tensor must stay allocated, and a timeout must turn into a CommError.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "framework/features.h"
#include "gpu_test_util.h"
#include "parallel/comm/comm_backend.h"
#include "parallel/comm/device_routing_communicator.h"
#include "parallel/comm/mpi_runtime.h"

#if TN_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "parallel/comm/cuda/nccl_communicator.h"
#endif

namespace ternion::test {
namespace {

// MPI for the whole test process, initialised on first use and finalised at exit.
void ensure_mpi() {
  static std::unique_ptr<MpiRuntime> runtime;
  if (!MpiRuntime::initialized()) runtime = std::make_unique<MpiRuntime>(nullptr, nullptr);
}

// `values` as a GPU tensor of `dtype` (f32 -> bf16 rounds; i32 holds the integers).
Tensor gpu_tensor(const std::vector<float>& values, DType dtype) {
  const Tensor f32 = Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())});
  if (dtype != DType::I32) return to_gpu(f32, dtype);
  std::vector<std::int32_t> ints(values.begin(), values.end());
  return i32_tensor(ints, f32.shape()).to(gpu());
}

std::vector<float> host_values(const Tensor& t) {
  if (t.dtype() != DType::I32) return to_host_floats(t);
  const Tensor host = t.to(Device::cpu());
  const auto* p = host.data<std::int32_t>();
  return std::vector<float>(p, p + host.numel());
}

#if TN_HAVE_CUDA

using Clock = std::chrono::steady_clock;

std::unique_ptr<NcclCommunicator> one_rank_nccl(std::unique_ptr<Communicator>& mpi) {
  ensure_mpi();
  mpi = mpi_world_communicator();
  return NcclCommunicator::create(*mpi, "gpu-test");
}

// The timeout of the tests that let an operation time out. It bounds the communicator's
// creation too: 2 s was exceeded once by a creation among ctest -j8's other GPU tests.
constexpr int kShortTimeoutS = 5;

// The communicator with TERNION_NCCL_TIMEOUT_S (read once, at creation) set to kShortTimeoutS.
std::unique_ptr<NcclCommunicator> one_rank_nccl_with_short_timeout(
    std::unique_ptr<Communicator>& mpi) {
  ::setenv("TERNION_NCCL_TIMEOUT_S", std::to_string(kShortTimeoutS).c_str(), 1);
  auto nccl = one_rank_nccl(mpi);
  ::unsetenv("TERNION_NCCL_TIMEOUT_S");
  return nccl;
}

// Holds the compute stream, and with it every NCCL operation enqueued after it, until open():
// a host function on the stream that waits for a flag. It opens itself after kLimit, so that a
// broken test cannot hold the device for ever. While it is shut, no host call may synchronise
// with the compute stream (a host copy would wait for the gate).
class ComputeStreamGate {
 public:
  static constexpr auto kLimit = std::chrono::seconds(30);

  ComputeStreamGate() : state_(new State) {
    TN_CUDA_CHECK(cudaLaunchHostFunc(cuda::compute_stream(), &ComputeStreamGate::hold, state_));
  }
  ~ComputeStreamGate() {
    open();
    const auto limit = Clock::now() + kLimit;
    while (!state_->done.load() && Clock::now() < limit)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (state_->done.load()) delete state_;  // else left: the host function may still read it
  }
  ComputeStreamGate(const ComputeStreamGate&) = delete;
  ComputeStreamGate& operator=(const ComputeStreamGate&) = delete;

  void open() { state_->open.store(true); }

 private:
  struct State {
    std::atomic<bool> open{false};
    std::atomic<bool> done{false};
  };
  // Runs on a CUDA driver thread; must make no CUDA call.
  static void CUDART_CB hold(void* data) {
    auto* state = static_cast<State*>(data);
    const auto limit = Clock::now() + kLimit;
    while (!state->open.load() && Clock::now() < limit)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    state->done.store(true);
  }
  State* state_;
};

// Calls is_completed() until it throws CommError (returns its message) or `limit` passes
// (returns ""). The watchdog notices a failure within its 10 ms poll.
std::string poll_until_failed(Work& work, std::chrono::seconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    try {
      (void)work.is_completed();
    } catch (const CommError& e) {
      return e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return "";
}

TEST(NcclOneRank, AllReduceLeavesTheInputForEveryOpAndDtype) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl(mpi);
  ASSERT_EQ(nccl->size(), 1);
  EXPECT_EQ(nccl->rank(), 0);
  EXPECT_EQ(nccl->backend_name(), "nccl");
  const std::vector<float> values = test::convert<float>(random_ints(1000, 3, -50, 50));
  for (DType dtype : {DType::F32, DType::BF16, DType::I32}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Average, ReduceOp::Max}) {
      Tensor t = gpu_tensor(values, dtype);
      nccl->all_reduce(t, op);
      expect_close(std::string("one-rank all_reduce ") + std::string(dtype_name(dtype)),
                   host_values(t), values, 0, 0);
    }
  }
}

// The input is written by a kernel on the compute stream just before the call: the comm
// stream must wait for it, and the compute stream for the result.
TEST(NcclOneRank, StreamsAreOrdered) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl(mpi);
  Tensor t = Tensor::empty({1 << 20}, DType::F32, gpu());
  for (int round = 1; round <= 3; ++round) {
    t.fill(static_cast<float>(round));
    WorkHandle work = nccl->all_reduce_async(t, ReduceOp::Sum);
    work->wait();  // orders the compute stream after it; the host does not block
    device_synchronize(gpu());
    EXPECT_TRUE(work->is_completed());
    expect_close("all_reduce right after a fill, round " + std::to_string(round), t.to_vector(),
                 std::vector<float>(1 << 20, static_cast<float>(round)), 0, 0);
  }
}

TEST(NcclOneRank, AllGatherReduceScatterBroadcastBarrier) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl(mpi);
  const Tensor host = random_tensor({333}, 5);
  const Tensor in = host.to(gpu());
  Tensor out = Tensor::zeros({333}, DType::F32, gpu());
  nccl->all_gather(out, in);
  expect_bitwise_equal("all_gather", out.to_vector(), host.to_vector());
  Tensor in_place = host.to(gpu());
  nccl->all_gather(in_place, in_place);  // `in` is out's chunk 0
  expect_bitwise_equal("in-place all_gather", in_place.to_vector(), host.to_vector());
  Tensor scattered = Tensor::zeros({333}, DType::F32, gpu());
  nccl->reduce_scatter(scattered, in, ReduceOp::Sum);
  expect_bitwise_equal("reduce_scatter", scattered.to_vector(), host.to_vector());
  Tensor b = host.to(gpu());
  nccl->broadcast(b, 0);
  expect_bitwise_equal("broadcast", b.to_vector(), host.to_vector());
  nccl->barrier();
  Tensor empty = Tensor::empty({0}, DType::F32, gpu());
  nccl->all_reduce(empty, ReduceOp::Sum);  // nothing to do, still a Work
}

TEST(NcclOneRank, ExchangeWithItself) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl(mpi);
  const Tensor host = random_tensor({4, 100}, 6);
  const Tensor sent = host.to(gpu());
  Tensor received = Tensor::zeros({4, 100}, DType::F32, gpu());
  nccl->exchange({{P2POp::Kind::Send, sent, 0, 7}, {P2POp::Kind::Recv, received, 0, 7}});
  expect_bitwise_equal("send/recv to itself", received.to_vector(), host.to_vector());
  const Tensor bf16 = to_gpu(host, DType::BF16);
  Tensor bf16_received = Tensor::zeros({4, 100}, DType::BF16, gpu());
  nccl->exchange({{P2POp::Kind::Recv, bf16_received, 0, 0}, {P2POp::Kind::Send, bf16, 0, 0}});
  expect_bitwise_equal("bf16 send/recv to itself", to_host_floats(bf16_received),
                       to_host_floats(bf16));
}

TEST(NcclOneRank, CpuTensorsAreRefused) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl(mpi);
  Tensor on_cpu = Tensor::zeros({4});
  try {
    nccl->all_reduce(on_cpu, ReduceOp::Sum);
    ADD_FAILURE() << "a CPU tensor was accepted";
  } catch (const CommError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("all_reduce on NCCL group 'gpu-test'"), std::string::npos) << message;
    EXPECT_NE(message.find("CPU tensors go through MPI"), std::string::npos) << message;
  }
}

TEST(NcclOneRank, SplitAndNodeLocal) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl(mpi);
  auto sub = nccl->split(0, 0, "sub");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(sub->name(), "sub");
  EXPECT_EQ(nccl->split(-1, 0, "none"), nullptr);
  auto node = nccl->split_node_local("node");
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->size(), 1);
  Tensor t = Tensor::full({10}, 2.5f).to(gpu());
  sub->all_reduce(t, ReduceOp::Sum);
  node->all_reduce(t, ReduceOp::Max);
  expect_close("all_reduce on the splits", t.to_vector(), std::vector<float>(10, 2.5f), 0, 0);
}

// The world the trainer gets with parallel.backend: nccl: NCCL for GPU tensors, MPI for CPU.
TEST(NcclOneRank, RoutedWorld) {
  TN_REQUIRE_GPU();
  ensure_mpi();
  auto world = make_world_communicator(CommBackend::Nccl);
  EXPECT_EQ(world->backend_name(), "nccl+mpi");
  Tensor on_gpu = Tensor::full({8}, 1.5f).to(gpu());
  Tensor on_cpu = Tensor::full({8}, 4.0f);
  world->all_reduce(on_gpu, ReduceOp::Sum);
  world->all_reduce(on_cpu, ReduceOp::Sum);
  expect_close("routed GPU all_reduce", on_gpu.to_vector(), std::vector<float>(8, 1.5f), 0, 0);
  expect_close("routed CPU all_reduce", on_cpu.to_vector(), std::vector<float>(8, 4.0f), 0, 0);
  auto tp = world->split(0, 0, "tp");
  ASSERT_NE(dynamic_cast<DeviceRoutingCommunicator*>(tp.get()), nullptr);
  tp->all_reduce(on_gpu, ReduceOp::Max);
  auto node = world->split_node_local("node");
  node->all_reduce(on_gpu, ReduceOp::Sum);
  expect_close("routed splits", on_gpu.to_vector(), std::vector<float>(8, 1.5f), 0, 0);
}

// Several operations in flight at once, waited out of order, then read by compute-stream work
// (a device-to-device copy) and a host copy: wait() orders the compute stream after each.
TEST(NcclOneRank, ResultsAreRightAfterWaitAndADeviceSynchronize) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl(mpi);
  const Tensor host = random_tensor({1 << 16}, 21);
  Tensor reduced = host.to(gpu());
  const Tensor sent = host.to(gpu());
  Tensor gathered = Tensor::zeros({1 << 16}, DType::F32, gpu());
  Tensor received = Tensor::zeros({1 << 16}, DType::F32, gpu());
  WorkHandle reduce = nccl->all_reduce_async(reduced, ReduceOp::Max);
  WorkHandle gather = nccl->all_gather_async(gathered, sent);
  WorkHandle swap = nccl->exchange_async(
      {{P2POp::Kind::Send, sent, 0, 3}, {P2POp::Kind::Recv, received, 0, 3}});
  swap->wait();
  gather->wait();
  reduce->wait();
  Tensor copied = Tensor::empty({1 << 16}, DType::F32, gpu());
  copied.copy_from(received);  // on the compute stream, after its wait for the exchange
  device_synchronize(gpu());
  EXPECT_TRUE(reduce->is_completed());
  EXPECT_TRUE(gather->is_completed());
  EXPECT_TRUE(swap->is_completed());
  expect_bitwise_equal("all_reduce in flight with others", reduced.to_vector(), host.to_vector());
  expect_bitwise_equal("all_gather in flight with others", gathered.to_vector(), host.to_vector());
  expect_bitwise_equal("exchange, copied on the compute stream", copied.to_vector(),
                       host.to_vector());
}

// wait() returns while the operation cannot have run (the gate holds it), and the compute
// stream's later work still sees its result once the gate opens.
TEST(NcclOneRank, WaitDoesNotBlockTheHostButOrdersTheComputeStream) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl(mpi);
  const Tensor host = random_tensor({1 << 20}, 22);
  const Tensor sent = host.to(gpu());
  Tensor received = Tensor::zeros({1 << 20}, DType::F32, gpu());
  Tensor copied = Tensor::zeros({1 << 20}, DType::F32, gpu());
  // Connected first (NCCL sets a pair up on its first use), and the copies and fills above
  // done, before the gate shuts.
  nccl->exchange({{P2POp::Kind::Send, sent, 0, 0}, {P2POp::Kind::Recv, copied, 0, 0}});
  copied.zero();
  device_synchronize(gpu());
  WorkHandle work;
  {
    ComputeStreamGate gate;
    const auto start = Clock::now();
    work = nccl->exchange_async(
        {{P2POp::Kind::Send, sent, 0, 0}, {P2POp::Kind::Recv, received, 0, 0}});
    work->wait();
    const double wait_s = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_FALSE(work->is_completed()) << "wait() returned only after the exchange had run";
    EXPECT_LT(wait_s, 5.0) << "posting and waiting blocked the host";
    copied.copy_from(received);  // device to device: enqueued, no host wait
    gate.open();
  }
  device_synchronize(gpu());
  EXPECT_TRUE(work->is_completed());
  expect_bitwise_equal("received, copied by the compute stream after wait()", copied.to_vector(),
                       host.to_vector());
}

// A Work dropped unwaited keeps its tensor out of the allocator until the device is done with
// it (the watchdog then returns it); the memory is not handed to new tensors meanwhile.
TEST(NcclOneRank, ADroppedWorkKeepsItsTensorUntilTheDeviceIsDone) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl(mpi);
  constexpr std::int64_t kElements = 1 << 20;  // 4 MiB
  Tensor doomed = Tensor::empty({kElements}, DType::F32, gpu());
  const void* block = doomed.raw_data();
  nccl->all_reduce(doomed, ReduceOp::Sum);  // NCCL's set-up done before the gate shuts
  device_synchronize(gpu());
  std::size_t in_use_before = 0;
  {
    ComputeStreamGate gate;
    in_use_before = device_memory_stats(gpu()).in_use;
    (void)nccl->all_reduce_async(doomed, ReduceOp::Sum);  // its Work dropped at once
    doomed = Tensor();
    EXPECT_EQ(device_memory_stats(gpu()).in_use, in_use_before)
        << "the tensor of an operation that cannot have run went back to the allocator";
    Tensor next = Tensor::empty({kElements}, DType::F32, gpu());
    EXPECT_NE(next.raw_data(), block) << "a new tensor got the memory the operation still uses";
    gate.open();
  }
  // `next` is gone again; the dropped tensor still counts until the watchdog (a 10 ms poll)
  // sees the operation's event complete.
  device_synchronize(gpu());
  const auto end = Clock::now() + std::chrono::seconds(5);
  while (device_memory_stats(gpu()).in_use >= in_use_before && Clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_LT(device_memory_stats(gpu()).in_use, in_use_before)
      << "the dropped operation's tensor was never returned once the device was done";
}

// An operation that cannot finish (the gate holds it past TERNION_NCCL_TIMEOUT_S) becomes a
// CommError naming it, the group and the rank; every later call throws it too, as does
// check_nccl_health.
TEST(NcclOneRank, ATimeoutBecomesACommErrorAtTheNextCall) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl_with_short_timeout(mpi);
  Tensor t = Tensor::zeros({256}, DType::F32, gpu());
  nccl->all_reduce(t, ReduceOp::Sum);  // NCCL's set-up done before the gate shuts
  device_synchronize(gpu());
  ComputeStreamGate gate;
  WorkHandle work = nccl->all_reduce_async(t, ReduceOp::Sum);
  work->wait();  // returns: the compute stream now waits, behind the gate
  const auto start = Clock::now();
  const std::string message = poll_until_failed(*work, std::chrono::seconds(20));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(message.empty()) << "no CommError 20 s after a " << kShortTimeoutS << " s timeout";
  EXPECT_GE(seconds, kShortTimeoutS - 0.5) << "the timeout fired early: " << message;
  EXPECT_NE(message.find("all_reduce on NCCL group 'gpu-test' (rank 0 of 1)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("TERNION_NCCL_TIMEOUT_S"), std::string::npos) << message;
  EXPECT_NE(message.find("aborted"), std::string::npos) << message;
  try {
    work->wait();
    ADD_FAILURE() << "wait() on the aborted communicator returned";
  } catch (const CommError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
  try {
    nccl->all_reduce(t, ReduceOp::Sum);
    ADD_FAILURE() << "the aborted communicator still took an all_reduce";
  } catch (const CommError& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
  // The first failure of this process: this one, unless an earlier test in the same process
  // (not under ctest, which runs each test alone) failed a communicator first.
  EXPECT_THROW(check_nccl_health(), CommError);
  gate.open();
}

// A receive that no send matches: NCCL refuses it, or it hangs until the watchdog's timeout
// aborts the communicator. In the second case a host blocked in a device synchronisation (the
// compute stream waits for the receive) is released by the abort.
TEST(NcclOneRank, AnUnmatchedReceiveAbortsTheCommunicator) {
  TN_REQUIRE_GPU();
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl_with_short_timeout(mpi);
  Tensor lonely = Tensor::zeros({64}, DType::F32, gpu());
  std::string message;
  try {
    WorkHandle work = nccl->exchange_async({{P2POp::Kind::Recv, lonely, 0, 0}});
    work->wait();  // returns at once
    try {
      device_synchronize(gpu());  // released once the abort ends the receive's kernel
    } catch (const CudaError& e) {
      ADD_FAILURE() << "the abort left a CUDA error behind: " << e.what();
    }
    message = poll_until_failed(*work, std::chrono::seconds(20));
    ASSERT_FALSE(message.empty()) << "the receive without a send neither failed nor timed out";
  } catch (const CommError& e) {
    message = e.what();  // refused when posted (or its posting timed out)
  }
  EXPECT_NE(message.find("exchange on NCCL group 'gpu-test'"), std::string::npos) << message;
  try {
    nccl->barrier();
    ADD_FAILURE() << "the aborted communicator still ran a barrier";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_nccl_health(), CommError);
}

#endif  // TN_HAVE_CUDA

// parallel.backend: mpi on a GPU: CUDA tensors staged through host memory.
TEST(MpiHostStagingOnGpu, CollectivesAndPointToPoint) {
  TN_REQUIRE_GPU();
  ensure_mpi();
  auto world = mpi_world_communicator();
  const std::vector<float> values = test::convert<float>(random_ints(500, 9, -50, 50));
  for (DType dtype : {DType::F32, DType::BF16, DType::I32}) {
    Tensor t = gpu_tensor(values, dtype);
    world->all_reduce(t, ReduceOp::Sum);
    expect_close("staged all_reduce " + std::string(dtype_name(dtype)), host_values(t), values, 0,
                 0);
  }
  const Tensor host = random_tensor({2, 250}, 10);
  Tensor out = host.to(gpu());
  Tensor gathered = Tensor::zeros({2, 250}, DType::F32, gpu());
  world->all_gather(gathered, out);
  expect_bitwise_equal("staged all_gather", gathered.to_vector(), host.to_vector());
  Tensor in_place = host.to(gpu());
  world->all_gather(in_place, in_place);  // with one rank, `in` is exactly out's chunk 0
  expect_bitwise_equal("staged in-place all_gather", in_place.to_vector(), host.to_vector());
  Tensor scattered = Tensor::zeros({2, 250}, DType::F32, gpu());
  world->reduce_scatter(scattered, out, ReduceOp::Max);
  expect_bitwise_equal("staged reduce_scatter", scattered.to_vector(), host.to_vector());
  Tensor received = Tensor::zeros({2, 250}, DType::F32, gpu());
  world->exchange({{P2POp::Kind::Send, out, 0, 1}, {P2POp::Kind::Recv, received, 0, 1}});
  expect_bitwise_equal("staged send/recv to itself", received.to_vector(), host.to_vector());
}

}  // namespace
}  // namespace ternion::test

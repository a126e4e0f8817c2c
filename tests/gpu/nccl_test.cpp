// The NCCL communicator on one rank (bootstrapped over an MPI world of one: the test process
// initialises MPI itself as a singleton), and the MPI backend's host staging of CUDA tensors.
// With one rank every collective's result is known exactly (sum, average and max of one input
// are the input; a gather is a copy), so these check the plumbing: streams, events, buffers,
// dtypes, in-place forms, groups of sends and receives to itself, splits, the CPU-tensor
// refusal, and the failure path that aborts the communicator. The multi-rank reductions
// themselves are NCCL's, checked on several GPUs by the tensor- and data-parallel runs.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "framework/features.h"
#include "gpu_test_util.h"
#include "parallel/comm/comm_backend.h"
#include "parallel/comm/device_routing_communicator.h"
#include "parallel/comm/mpi_runtime.h"

#if TN_HAVE_CUDA
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

std::unique_ptr<NcclCommunicator> one_rank_nccl(std::unique_ptr<Communicator>& mpi) {
  ensure_mpi();
  mpi = mpi_world_communicator();
  return NcclCommunicator::create(*mpi, "gpu-test");
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
    work->wait();
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

// A failed operation aborts the communicator; later calls say so. (An exchange whose receive
// from itself has no matching send: NCCL refuses it, or it hangs into the timeout.)
TEST(NcclOneRank, AFailureAbortsTheCommunicator) {
  TN_REQUIRE_GPU();
  ::setenv("TERNION_NCCL_TIMEOUT_S", "5", 1);
  std::unique_ptr<Communicator> mpi;
  auto nccl = one_rank_nccl(mpi);
  ::unsetenv("TERNION_NCCL_TIMEOUT_S");
  Tensor lonely = Tensor::zeros({64}, DType::F32, gpu());
  try {
    nccl->exchange({{P2POp::Kind::Recv, lonely, 0, 0}});
    ADD_FAILURE() << "a receive without a send completed";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("exchange on NCCL group 'gpu-test'"), std::string::npos)
        << e.what();
  }
  try {
    nccl->barrier();
    ADD_FAILURE() << "the aborted communicator still ran a barrier";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
  }
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

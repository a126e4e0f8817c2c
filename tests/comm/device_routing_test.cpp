// DeviceRoutingCommunicator: CPU tensors go to the host communicator (MPI, checked by real
// results), CUDA tensors to the device one (here a recording stand-in, fed "CUDA" tensors
// that are host memory labelled cuda:0, which it never reads). Mixed devices are refused;
// split and split_node_local split both halves into matching groups; barrier is the host's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm_test_util.h"
#include "framework/features.h"
#include "parallel/comm/comm_backend.h"
#include "parallel/comm/device_routing_communicator.h"
#include "parallel/comm/mpi_runtime.h"

namespace ternion {
namespace {

using test::throws_comm_error;

class DoneWork final : public Work {
 public:
  bool is_completed() override { return true; }
  void wait() override {}
};

// Records "<group> <operation> <device>" for every call; group membership (rank, size,
// split) comes from a real MPI communicator of the same ranks.
class RecordingDeviceCommunicator final : public Communicator {
 public:
  RecordingDeviceCommunicator(std::unique_ptr<Communicator> ranks,
                              std::shared_ptr<std::vector<std::string>> log)
      : ranks_(std::move(ranks)), log_(std::move(log)) {}

  int rank() const override { return ranks_->rank(); }
  int size() const override { return ranks_->size(); }
  const std::string& name() const override { return ranks_->name(); }
  std::string backend_name() const override { return "fake"; }

  WorkHandle all_reduce_async(Tensor& t, ReduceOp) override { return record("all_reduce", t); }
  WorkHandle all_gather_async(Tensor& out, const Tensor&) override {
    return record("all_gather", out);
  }
  WorkHandle reduce_scatter_async(Tensor& out, const Tensor&, ReduceOp) override {
    return record("reduce_scatter", out);
  }
  WorkHandle broadcast_async(Tensor& t, int) override { return record("broadcast", t); }
  WorkHandle send_async(const Tensor& t, int, int) override { return record("send", t); }
  WorkHandle recv_async(Tensor& t, int, int) override { return record("recv", t); }
  WorkHandle exchange_async(std::vector<P2POp> ops) override {
    return record("exchange", ops.front().tensor);
  }
  WorkHandle barrier_async() override {
    log_->push_back(name() + " barrier");
    return std::make_shared<DoneWork>();
  }
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override {
    log_->push_back(detail::concat(this->name(), " split color ", color));
    std::unique_ptr<Communicator> sub = ranks_->split(color, key, name);
    if (!sub) return nullptr;
    return std::make_unique<RecordingDeviceCommunicator>(std::move(sub), log_);
  }
  std::unique_ptr<Communicator> split_node_local(const std::string& name) override {
    return std::make_unique<RecordingDeviceCommunicator>(ranks_->split_node_local(name), log_);
  }

 private:
  WorkHandle record(const std::string& operation, const Tensor& t) {
    log_->push_back(name() + " " + operation + " " + t.device().str());
    return std::make_shared<DoneWork>();
  }

  std::unique_ptr<Communicator> ranks_;
  std::shared_ptr<std::vector<std::string>> log_;
};

struct Routed {
  std::unique_ptr<DeviceRoutingCommunicator> world;
  std::shared_ptr<std::vector<std::string>> log = std::make_shared<std::vector<std::string>>();
};

Routed routed_world() {
  Routed r;
  auto device = std::make_unique<RecordingDeviceCommunicator>(mpi_world_communicator(), r.log);
  r.world = std::make_unique<DeviceRoutingCommunicator>(mpi_world_communicator(),
                                                        std::move(device));
  return r;
}

// Host memory labelled as a CUDA tensor: only the stand-in sees it, and never reads it.
struct FakeCudaTensor {
  std::vector<float> memory;
  Tensor tensor;
  explicit FakeCudaTensor(std::int64_t n)
      : memory(static_cast<std::size_t>(n)),
        tensor(Tensor::wrap(memory.data(), {n}, DType::F32, Device::cuda(0), nullptr)) {}
};

TEST(DeviceRouting, CpuTensorsGoToTheHostCommunicator) {
  Routed r = routed_world();
  EXPECT_EQ(r.world->backend_name(), "fake+mpi");
  EXPECT_EQ(r.world->rank(), r.world->host().rank());
  Tensor t = Tensor::full({5}, 2.0f);
  r.world->all_reduce(t, ReduceOp::Sum);
  EXPECT_TRUE(test::close_to("routed CPU all_reduce", t.to_vector(),
                             std::vector<double>(5, 2.0 * r.world->size()), 0, 0));
  Tensor mine = Tensor::full({3}, static_cast<float>(r.world->rank()));
  Tensor all = Tensor::zeros({3 * r.world->size()});
  r.world->all_gather(all, mine);
  EXPECT_FLOAT_EQ(all.to_vector().back(), static_cast<float>(r.world->size() - 1));
  EXPECT_TRUE(r.log->empty()) << "the device communicator saw " << r.log->front();
}

TEST(DeviceRouting, CudaTensorsGoToTheDeviceCommunicator) {
  Routed r = routed_world();
  const int size = r.world->size();
  FakeCudaTensor a(4), whole(4 * size), chunk(4);
  r.world->all_reduce(a.tensor, ReduceOp::Sum);
  r.world->all_gather(whole.tensor, chunk.tensor);
  r.world->reduce_scatter(chunk.tensor, whole.tensor, ReduceOp::Sum);
  r.world->broadcast(a.tensor, 0);
  r.world->send(a.tensor, 0);
  r.world->recv(a.tensor, 0);
  r.world->exchange({{P2POp::Kind::Send, a.tensor, 0, 0}, {P2POp::Kind::Recv, chunk.tensor, 0, 0}});
  const std::vector<std::string> want = {
      "world all_reduce cuda:0", "world all_gather cuda:0", "world reduce_scatter cuda:0",
      "world broadcast cuda:0",  "world send cuda:0",       "world recv cuda:0",
      "world exchange cuda:0"};
  EXPECT_EQ(*r.log, want);
}

TEST(DeviceRouting, MixedDevicesAreRefused) {
  Routed r = routed_world();
  FakeCudaTensor on_gpu(4);
  Tensor on_cpu = Tensor::zeros({4 * r.world->size()});
  EXPECT_TRUE(throws_comm_error([&] { r.world->all_gather(on_cpu, on_gpu.tensor); },
                                {"all_gather on group 'world'", "different devices", "cpu",
                                 "cuda:0"}));
  Tensor cpu_small = Tensor::zeros({4});
  EXPECT_TRUE(throws_comm_error(
      [&] {
        r.world->exchange({{P2POp::Kind::Send, cpu_small, 0, 0},
                           {P2POp::Kind::Recv, on_gpu.tensor, 0, 0}});
      },
      {"exchange on group 'world'", "different devices"}));
  EXPECT_TRUE(r.log->empty());
}

TEST(DeviceRouting, BarrierIsTheHostsOne) {
  Routed r = routed_world();
  r.world->barrier();
  EXPECT_TRUE(r.log->empty());
}

TEST(DeviceRouting, SplitSplitsBothHalves) {
  Routed r = routed_world();
  const int rank = r.world->rank();
  auto parity = r.world->split(rank % 2, rank, "parity");
  ASSERT_NE(parity, nullptr);
  auto& routed = dynamic_cast<DeviceRoutingCommunicator&>(*parity);
  ASSERT_NE(routed.device(), nullptr);
  EXPECT_EQ(routed.device()->size(), routed.host().size());
  EXPECT_EQ(routed.device()->rank(), routed.host().rank());
  EXPECT_EQ(routed.host().size(), (r.world->size() - rank % 2 + 1) / 2);
  // Not a member: both halves say so.
  auto none = r.world->split(rank == 0 ? -1 : 0, rank, "all but 0");
  EXPECT_EQ(none == nullptr, rank == 0);
  // Routing carries on in the sub-group.
  FakeCudaTensor t(2);
  parity->all_reduce(t.tensor, ReduceOp::Max);
  EXPECT_EQ(r.log->back(), "parity all_reduce cuda:0");
}

// The device half learns the node from the host half: its color is the node's first rank.
TEST(DeviceRouting, SplitNodeLocalGivesTheDeviceHalfTheHostsNode) {
  Routed r = routed_world();
  auto node = r.world->split_node_local("node");
  auto& routed = dynamic_cast<DeviceRoutingCommunicator&>(*node);
  ASSERT_NE(routed.device(), nullptr);
  EXPECT_EQ(routed.device()->size(), routed.host().size());
  EXPECT_EQ(routed.device()->rank(), routed.host().rank());
  ASSERT_FALSE(r.log->empty());
  // On one machine every rank is on node 0's node.
  EXPECT_EQ(r.log->front(), "world split color 0");
}

TEST(DeviceRouting, WithoutADeviceCommunicatorEverythingGoesToTheHost) {
  DeviceRoutingCommunicator world(mpi_world_communicator(), nullptr);
  EXPECT_EQ(world.backend_name(), "mpi");
  Tensor t = Tensor::full({2}, 1.0f);
  world.all_reduce(t, ReduceOp::Sum);
  EXPECT_FLOAT_EQ(t.to_vector()[0], static_cast<float>(world.size()));
  auto parity = world.split(world.rank() % 2, world.rank(), "parity");
  EXPECT_EQ(dynamic_cast<DeviceRoutingCommunicator&>(*parity).device(), nullptr);
}

TEST(CommBackend, ParsesItsNames) {
  EXPECT_EQ(parse_comm_backend("mpi"), CommBackend::Mpi);
  EXPECT_EQ(parse_comm_backend("nccl"), CommBackend::Nccl);
  EXPECT_STREQ(comm_backend_name(CommBackend::Nccl), "nccl");
  EXPECT_STREQ(comm_backend_name(CommBackend::Mpi), "mpi");
  try {
    parse_comm_backend("gloo");
    ADD_FAILURE() << "gloo was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'gloo'"), std::string::npos) << e.what();
  }
}

TEST(CommBackend, MpiWorldCommunicator) {
  auto world = make_world_communicator(CommBackend::Mpi);
  EXPECT_EQ(world->backend_name(), "mpi");
  EXPECT_EQ(world->size(), MpiRuntime::world_size());
  Tensor t = Tensor::full({1}, 1.0f);
  world->all_reduce(t, ReduceOp::Sum);
  EXPECT_FLOAT_EQ(t.to_vector()[0], static_cast<float>(world->size()));
}

// test_comm never initialises CUDA: a CPU-only build refuses NCCL as a configuration error,
// a CUDA build for want of the runtime (on every rank, before any NCCL collective).
TEST(CommBackend, NcclWorldNeedsCuda) {
  if constexpr (!kHaveCuda) {
    try {
      make_world_communicator(CommBackend::Nccl);
      ADD_FAILURE() << "a CPU-only build made an NCCL world";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("parallel.backend: nccl needs a CUDA build"),
                std::string::npos)
          << e.what();
    }
  } else {
    EXPECT_THROW(make_world_communicator(CommBackend::Nccl), CudaError);
  }
}

}  // namespace
}  // namespace ternion

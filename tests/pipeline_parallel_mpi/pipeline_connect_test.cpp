// The pipeline's first point-to-point operations connect each pair of neighbouring stages both
// ways in mirrored exchanges (NCCL sets a pair's connections up on their first operation and
// needs both ranks to ask for the same ones then; a schedule's own first messages are not
// mirrored). Under mpirun with every rank a pipeline stage: the pipeline group's operations are
// logged by a forwarding communicator around MPI, and the first two must be the ring's swaps,
// once per run, before any activation moves.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "mpi_gtest.h"
#include "parallel/process_groups.h"
#include "parallel_run_support.h"
#include "training/trainer.h"

namespace ternion {
namespace {

using Log = std::vector<std::string>;

// Passes every call to `inner`; logs the point-to-point operations of the pipeline groups
// (named "pp...") as "send>peer", "recv<peer" or "exchange send>peer recv<peer ...". Splits
// are wrapped too, so the groups ProcessGroups carves out of it log as well.
class P2PLoggingCommunicator final : public Communicator {
 public:
  P2PLoggingCommunicator(Communicator& inner, std::shared_ptr<Log> log)
      : inner_(inner), log_(std::move(log)) {}
  P2PLoggingCommunicator(std::unique_ptr<Communicator> owned, std::shared_ptr<Log> log)
      : owned_(std::move(owned)), inner_(*owned_), log_(std::move(log)) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const std::string& name() const override { return inner_.name(); }
  std::string backend_name() const override { return inner_.backend_name(); }

  WorkHandle all_reduce_async(Tensor& t, ReduceOp op) override {
    return inner_.all_reduce_async(t, op);
  }
  WorkHandle all_gather_async(Tensor& out, const Tensor& in) override {
    return inner_.all_gather_async(out, in);
  }
  WorkHandle reduce_scatter_async(Tensor& out, const Tensor& in, ReduceOp op) override {
    return inner_.reduce_scatter_async(out, in, op);
  }
  WorkHandle broadcast_async(Tensor& t, int root) override {
    return inner_.broadcast_async(t, root);
  }
  WorkHandle send_async(const Tensor& t, int peer, int tag) override {
    record("send>" + std::to_string(peer));
    return inner_.send_async(t, peer, tag);
  }
  WorkHandle recv_async(Tensor& t, int peer, int tag) override {
    record("recv<" + std::to_string(peer));
    return inner_.recv_async(t, peer, tag);
  }
  WorkHandle exchange_async(std::vector<P2POp> ops) override {
    std::string line = "exchange";
    for (const P2POp& op : ops)
      line += (op.kind == P2POp::Kind::Send ? " send>" : " recv<") + std::to_string(op.peer);
    record(line);
    return inner_.exchange_async(std::move(ops));
  }
  WorkHandle barrier_async() override { return inner_.barrier_async(); }
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name) override {
    return wrap(inner_.split(color, key, name));
  }
  std::unique_ptr<Communicator> split_node_local(const std::string& name) override {
    return wrap(inner_.split_node_local(name));
  }

 private:
  void record(const std::string& line) {
    if (name().rfind("pp", 0) == 0) log_->push_back(line);
  }
  std::unique_ptr<Communicator> wrap(std::unique_ptr<Communicator> sub) {
    if (!sub) return nullptr;
    return std::make_unique<P2PLoggingCommunicator>(std::move(sub), log_);
  }

  std::unique_ptr<Communicator> owned_;
  Communicator& inner_;
  std::shared_ptr<Log> log_;
};

TEST(PipelineConnect, FirstOperationsConnectEveryNeighbourBothWays) {
  Communicator& world = testing_mpi::world();
  const int stages = world.size();
  if (stages < 2) GTEST_SKIP() << "needs two stages";
  auto log = std::make_shared<Log>();
  P2PLoggingCommunicator logged_world(world, log);
  TrainConfig c = test::small_parallel_run(test::corpus_dir("pp-connect-test"));
  c.parallel.pipeline = stages;
  const ProcessGroups groups(logged_world, make_rank_layout(stages, 1, stages, 1));
  Trainer trainer(c, &groups);
  trainer.train_step(1);
  trainer.train_step(2);

  const int stage = world.rank();
  const std::string next = std::to_string((stage + 1) % stages);
  const std::string previous = std::to_string((stage + stages - 1) % stages);
  ASSERT_GT(log->size(), 2u);
  EXPECT_EQ((*log)[0], "exchange send>" + next + " recv<" + previous);
  EXPECT_EQ((*log)[1], "exchange send>" + previous + " recv<" + next);
  // Once per run: the schedule's own messages after that are single sends and receives.
  for (std::size_t i = 2; i < log->size(); ++i)
    EXPECT_EQ((*log)[i].rfind("exchange", 0), std::string::npos) << "operation " << i;
  world.barrier();
}

}  // namespace
}  // namespace ternion

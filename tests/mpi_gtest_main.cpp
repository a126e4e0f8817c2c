// The main of the multi-rank GoogleTest programs: see tests/mpi_gtest.h.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "mpi_gtest.h"
#include "parallel/comm/mpi_runtime.h"

namespace ternion::testing_mpi {

namespace {

Communicator* g_world = nullptr;  // set by main for the duration of RUN_ALL_TESTS

class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
};

}  // namespace

Communicator& world() { return *g_world; }

}  // namespace ternion::testing_mpi

int main(int argc, char** argv) {
  ternion::MpiRuntime mpi(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int status = 0;
  {
    const std::unique_ptr<ternion::Communicator> world = ternion::mpi_world_communicator();
    ternion::testing_mpi::g_world = world.get();
    if (world->rank() != 0) {
      testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new ternion::testing_mpi::RankFailurePrinter(world->rank()));
    }
    status = RUN_ALL_TESTS();
    ternion::Tensor worst = ternion::Tensor::full({1}, static_cast<float>(status));
    world->all_reduce(worst, ternion::ReduceOp::Max);
    status = static_cast<int>(worst.data<float>()[0]);
    ternion::testing_mpi::g_world = nullptr;
  }
  return status;
}

// MpiRuntime: the defaults before MPI_Init (recorded by comm_test_main.cpp), what it reports
// after, and the refusal of a second initialisation.
#include "parallel/comm/mpi_runtime.h"

#include <gtest/gtest.h>

#include "comm_test_util.h"

namespace ternion {
namespace {

TEST(MpiRuntime, DefaultsBeforeInitialisation) {
  EXPECT_FALSE(test::facts_before_init.initialized);
  EXPECT_EQ(test::facts_before_init.world_rank, 0);
  EXPECT_EQ(test::facts_before_init.world_size, 1);
}

TEST(MpiRuntime, ReportsTheWorldAfterInitialisation) {
  EXPECT_TRUE(MpiRuntime::initialized());
  auto world = mpi_world_communicator();
  EXPECT_EQ(world->name(), "world");
  EXPECT_EQ(world->backend_name(), "mpi");
  EXPECT_EQ(MpiRuntime::world_rank(), world->rank());
  EXPECT_EQ(MpiRuntime::world_size(), world->size());
  Tensor size = test::tensor_of<std::int32_t>({1});
  world->all_reduce(size, ReduceOp::Sum);
  EXPECT_EQ(size.data<std::int32_t>()[0], MpiRuntime::world_size());
}

TEST(MpiRuntime, SecondInitialisationIsRefused) {
  int argc = 0;
  char** argv = nullptr;
  EXPECT_TRUE(
      test::throws_comm_error([&] { MpiRuntime again(&argc, &argv); }, {"already initialised"}));
  EXPECT_TRUE(MpiRuntime::initialized());
}

}  // namespace
}  // namespace ternion

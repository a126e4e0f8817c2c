// The main of test_comm, which mpirun starts on every rank (tests/CMakeLists.txt: comm.npN).
//
// Every rank runs every test in the same order (the collectives need all of them). Only rank
// 0 prints gtest's usual report; the other ranks print nothing but their own failures, each
// line tagged with the rank. At the end the ranks all-reduce their failure flags, so a test
// that failed only on rank 3 still fails the exit status of every rank (and of mpirun).
//
//   test_comm --abort-test   instead of the tests: the last rank calls abort_job from two
//                            threads at once, with a receive in flight, while the others
//                            wait in a barrier
//                            (tests/comm/expect_abort.sh checks one message, a non-zero exit).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <thread>

#include "comm_test_util.h"
#include "parallel/comm/mpi_runtime.h"

namespace {

using namespace ternion;

class FailurePrinter final : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number());
    std::istringstream lines(result.message());
    for (std::string line; std::getline(lines, line);)
      std::fprintf(stderr, "[rank %d] %s\n", rank_, line.c_str());
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

int run_abort_test() {
  auto world = mpi_world_communicator();
  if (world->rank() == world->size() - 1) {
    // A receive nobody sends keeps the progress thread inside MPI while the job aborts.
    Tensor never_sent = Tensor::zeros({16});
    WorkHandle pending = world->recv_async(never_sent, 0, 99);
    std::thread other([] { abort_job("deliberate abort from test_comm", 3); });
    abort_job("deliberate abort from test_comm", 3);
  }
  world->barrier();  // never completes: the last rank aborts instead of joining
  std::fprintf(stderr, "rank %d passed a barrier the aborting rank never joined\n", world->rank());
  return 0;
}

int run_tests(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = MpiRuntime::world_rank();
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  const int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;

  auto world = mpi_world_communicator();
  Tensor failed = test::tensor_of<std::int32_t>({local_failed});
  world->all_reduce(failed, ReduceOp::Max);
  const int any_failed = failed.data<std::int32_t>()[0];
  if (rank == 0 && any_failed && !local_failed)
    std::fprintf(stderr, "tests failed on other ranks (see their [rank N] lines)\n");
  return any_failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  test::facts_before_init = {MpiRuntime::initialized(), MpiRuntime::world_rank(),
                             MpiRuntime::world_size()};
  try {
    MpiRuntime mpi(&argc, &argv);
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], "--abort-test") == 0) return run_abort_test();
    return run_tests(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test_comm: rank %d: %s\n", MpiRuntime::world_rank(), e.what());
    return 1;
  }
}

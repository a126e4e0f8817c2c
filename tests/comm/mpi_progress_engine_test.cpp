// The progress engine's rule for a communicator that failed: once one of its operations fails
// to start (this rank did not join what its peers may be in), none of its later operations is
// started; each fails with that first CommError, while other communicators go on working.
#include "parallel/comm/mpi_progress_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm_test_util.h"

namespace ternion {
namespace {

using test::throws_comm_error;

// Makes no MPI call: notes that it was started, and fails there if asked to, as an MPI call
// that cannot start does.
class ProbeOperation final : public MpiOperation {
 public:
  ProbeOperation(std::string name, bool fails, std::atomic<bool>& started)
      : name_(std::move(name)), fails_(fails), started_(started) {}
  std::string describe() const override { return name_; }
  void start(std::vector<MPI_Request>& /*requests*/) override {
    started_ = true;
    if (fails_) throw CommError(name_ + ": failed to start");
  }

 private:
  std::string name_;
  bool fails_;
  std::atomic<bool>& started_;
};

WorkHandle submit_probe(std::string name, bool fails, std::shared_ptr<MpiGroupState> group,
                        std::atomic<bool>& started) {
  auto operation = std::make_unique<ProbeOperation>(std::move(name), fails, started);
  operation->count_on(std::move(group));
  return MpiProgressEngine::instance().submit(std::move(operation));
}

TEST(MpiProgressEngine, AFailedOperationBreaksItsGroup) {
  auto group = std::make_shared<MpiGroupState>();
  auto other = std::make_shared<MpiGroupState>();
  std::atomic<bool> first_started{false}, later_started{false}, other_started{false};
  // Submitted without waiting, as the trainer issues a step's collectives: the later one may
  // be queued before the first has failed.
  WorkHandle first = submit_probe("first on group 'g'", true, group, first_started);
  WorkHandle later = submit_probe("later on group 'g'", false, group, later_started);
  WorkHandle elsewhere = submit_probe("on group 'h'", false, other, other_started);

  EXPECT_TRUE(throws_comm_error([&] { first->wait(); }, {"first on group 'g': failed to start"}));
  // The later operation names the first failure, and MPI never saw it.
  EXPECT_TRUE(throws_comm_error([&] { later->wait(); }, {"first on group 'g': failed to start"}));
  EXPECT_TRUE(first_started);
  EXPECT_FALSE(later_started);
  EXPECT_TRUE(group->broken());
  EXPECT_EQ(group->unfinished.load(), 0);

  EXPECT_NO_THROW(elsewhere->wait());
  EXPECT_TRUE(other_started);
  EXPECT_FALSE(other->broken());

  // A funnelled call collective over the broken group (split, duplicate) is refused too.
  bool called = false;
  EXPECT_TRUE(throws_comm_error(
      [&] { MpiProgressEngine::instance().run([&] { called = true; }, 0, group); },
      {"first on group 'g': failed to start"}));
  EXPECT_FALSE(called);
  MpiProgressEngine::instance().run([&] { called = true; }, 0, other);
  EXPECT_TRUE(called);
}

}  // namespace
}  // namespace ternion

// CollectiveChains on operations that complete when the test says: stages in order, each
// communicator's operations in chain order whatever completes first, and failures surfaced.
#include "parallel/collective_chain.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "parallel/comm/self_communicator.h"

namespace ternion {
namespace {

// An operation that completes when complete() is called, or when waited for.
class ManualWork final : public Work {
 public:
  bool is_completed() override { return done; }
  void wait() override {
    done = true;
    if (fail) throw std::runtime_error("failed");
  }
  bool done = false, fail = false;
};

struct Recorder {
  std::vector<std::string> started;
  std::vector<std::shared_ptr<ManualWork>> works;
  ChainStage stage(const Communicator& comm, const std::string& name,
                   std::string* finished = nullptr) {
    return {&comm,
            [this, name] {
              started.push_back(name);
              works.push_back(std::make_shared<ManualWork>());
              return works.back();
            },
            [finished, name] {
              if (finished) *finished += name + " ";
            }};
  }
};

TEST(CollectiveChains, StagesRunInOrderAndFinishOnCompletion) {
  SelfCommunicator a("a"), b("b");
  CollectiveChains chains;
  Recorder rec;
  std::string finished;
  WorkHandle work = chains.submit({rec.stage(a, "1a", &finished), rec.stage(b, "1b", &finished)});
  EXPECT_EQ(rec.started, (std::vector<std::string>{"1a"}));
  EXPECT_FALSE(work->is_completed());
  rec.works[0]->done = true;
  chains.progress();
  EXPECT_EQ(finished, "1a ");
  EXPECT_EQ(rec.started, (std::vector<std::string>{"1a", "1b"}));
  rec.works[1]->done = true;
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(finished, "1a 1b ");
  EXPECT_EQ(chains.pending(), 0u);
}

TEST(CollectiveChains, EachCommunicatorSeesChainOrder) {
  // Chain 2's stage on `b` must wait for chain 1's, even when chain 2 reaches it first.
  SelfCommunicator a("a"), b("b"), c("c");
  CollectiveChains chains;
  Recorder rec;
  WorkHandle first = chains.submit({rec.stage(a, "1a"), rec.stage(b, "1b")});
  WorkHandle second = chains.submit({rec.stage(c, "2c"), rec.stage(b, "2b")});
  EXPECT_EQ(rec.started, (std::vector<std::string>{"1a", "2c"}));
  rec.works[1]->done = true;  // 2c completes before 1a
  chains.progress();
  EXPECT_EQ(rec.started, (std::vector<std::string>{"1a", "2c"})) << "2b went ahead of 1b";
  rec.works[0]->done = true;
  chains.progress();
  EXPECT_EQ(rec.started, (std::vector<std::string>{"1a", "2c", "1b", "2b"}));
  second->wait();  // drives the earliest operation in flight first (1b), then 2b
  EXPECT_TRUE(rec.works[2]->done);
  EXPECT_TRUE(first->is_completed());
  EXPECT_TRUE(second->is_completed());
}

TEST(CollectiveChains, AWaitStartsTheLaterStages) {
  SelfCommunicator a("a"), b("b");
  CollectiveChains chains;
  Recorder rec;
  std::string finished;
  WorkHandle work = chains.submit(
      {rec.stage(a, "a1", &finished), rec.stage(b, "b", &finished), rec.stage(a, "a2", &finished)});
  work->wait();
  EXPECT_EQ(rec.started, (std::vector<std::string>{"a1", "b", "a2"}));
  EXPECT_EQ(finished, "a1 b a2 ");
}

TEST(CollectiveChains, AFailureEndsItsChainAndIsRethrown) {
  SelfCommunicator a("a"), b("b");
  CollectiveChains chains;
  Recorder rec;
  WorkHandle failing = chains.submit({rec.stage(a, "1a"), rec.stage(b, "1b")});
  WorkHandle next = chains.submit({rec.stage(b, "2b")});
  rec.works[0]->fail = true;
  EXPECT_THROW(failing->wait(), std::runtime_error);
  EXPECT_EQ(rec.started, (std::vector<std::string>{"1a", "2b"}))
      << "the failed chain's later stage started, or it kept holding its communicator";
  next->wait();
  EXPECT_TRUE(next->is_completed());
}

}  // namespace
}  // namespace ternion
